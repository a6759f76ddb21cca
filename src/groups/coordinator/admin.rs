//! ListGroups, DescribeGroups and DeleteGroups.

use super::*;

impl Coordinator {
    /// This shard's groups (those not dead).
    pub fn list(&self) -> Vec<ListedGroup> {
        self.groups
            .borrow()
            .values()
            .map(|g| {
                let g = g.borrow();
                ListedGroup {
                    group_id: g.id.clone(),
                    protocol_type: g.protocol_type.clone().unwrap_or_default(),
                    state: g.state.name(),
                }
            })
            .filter(|g| g.state != "Dead")
            .collect()
    }

    pub fn describe(&self, group_id: &str) -> Described {
        let Some(group) = self.group(group_id) else {
            return Described {
                error: ErrorCode::NONE,
                state: "Dead",
                protocol_type: String::new(),
                protocol: String::new(),
                members: Vec::new(),
            };
        };
        let g = group.borrow();
        let stable = matches!(g.state, State::Stable | State::CompletingRebalance);
        let protocol = g.protocol.clone().unwrap_or_default();
        let mut members: Vec<&Member> = g.members.values().collect();
        members.sort_by_key(|m| m.joined_at);
        Described {
            error: ErrorCode::NONE,
            state: g.state.name(),
            protocol_type: g.protocol_type.clone().unwrap_or_default(),
            protocol: if stable {
                protocol.clone()
            } else {
                String::new()
            },
            members: members
                .into_iter()
                .map(|m| DescribedMember {
                    member_id: m.id.clone(),
                    instance_id: m.instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    metadata: if stable {
                        m.metadata_for(&protocol)
                    } else {
                        Bytes::new()
                    },
                    assignment: if g.state == State::Stable {
                        m.assignment.clone()
                    } else {
                        Bytes::new()
                    },
                })
                .collect(),
        }
    }

    /// Deletes an empty group and its offsets.
    pub async fn delete(self: &Rc<Self>, partition: i32, group_id: &str) -> ErrorCode {
        let Some(group) = self.group(group_id) else {
            return ErrorCode::GROUP_ID_NOT_FOUND;
        };
        let records = {
            let g = group.borrow();
            if !g.members.is_empty() || g.state != State::Empty {
                return ErrorCode::NON_EMPTY_GROUP;
            }
            let mut records: Vec<(Bytes, Option<Bytes>)> = g
                .offsets
                .keys()
                .map(|(t, p)| offset_tombstone(group_id, t, *p))
                .collect();
            records.push((
                Key::Group {
                    group: group_id.to_string(),
                }
                .encode(),
                None,
            ));
            records
        };
        if let Err(code) = self.append(partition, records).await {
            return code;
        }
        group.borrow_mut().set_state(State::Dead);
        self.groups.borrow_mut().remove(group_id);
        tracing::info!(group = %group_id, "group deleted");
        ErrorCode::NONE
    }
}

/// The `__consumer_offsets` record that removes a committed offset.
fn offset_tombstone(group: &str, topic: &str, partition: i32) -> (Bytes, Option<Bytes>) {
    let key = Key::Offset {
        group: group.to_string(),
        topic: topic.to_string(),
        partition,
    };
    (key.encode(), None)
}

/// A partition's answer to OffsetDelete.
pub type OffsetDeleted = ((String, i32), ErrorCode);

impl Coordinator {
    /// OffsetDelete, as Kafka's `GroupCoordinator.handleDeleteOffsets`: an empty group loses
    /// the offsets of every asked partition; a consumer group with members keeps those of the
    /// topics it subscribes to (GROUP_SUBSCRIBED_TO_TOPIC) and loses the others; any other
    /// group with members is NON_EMPTY_GROUP. Asked partitions without an offset count as
    /// deleted, as in Kafka.
    pub async fn delete_offsets(
        self: &Rc<Self>,
        partition: i32,
        group_id: &str,
        asked: Vec<(String, i32)>,
    ) -> Result<Vec<OffsetDeleted>, ErrorCode> {
        let Some(group) = self.group(group_id) else {
            return Err(ErrorCode::GROUP_ID_NOT_FOUND);
        };
        let (eligible, refused, tombstones) = {
            let g = group.borrow();
            let subscribed = match g.state {
                State::Dead => return Err(ErrorCode::GROUP_ID_NOT_FOUND),
                State::Empty => Vec::new(),
                _ if g.protocol_type.as_deref() == Some("consumer") => subscribed_topics(&g),
                _ => return Err(ErrorCode::NON_EMPTY_GROUP),
            };
            let (refused, eligible): (Vec<_>, Vec<_>) =
                asked.into_iter().partition(|(t, _)| subscribed.contains(t));
            let tombstones: Vec<(Bytes, Option<Bytes>)> = eligible
                .iter()
                .filter(|tp| g.offsets.contains_key(*tp))
                .map(|(t, p)| offset_tombstone(group_id, t, *p))
                .collect();
            (eligible, refused, tombstones)
        };
        if !tombstones.is_empty() {
            self.append(partition, tombstones).await?;
            let mut g = group.borrow_mut();
            for tp in &eligible {
                g.remove_offset(tp);
            }
            tracing::info!(group = %group_id, partitions = eligible.len(), "offsets deleted");
        }
        Ok(eligible
            .into_iter()
            .map(|tp| (tp, ErrorCode::NONE))
            .chain(
                refused
                    .into_iter()
                    .map(|tp| (tp, ErrorCode::GROUP_SUBSCRIBED_TO_TOPIC)),
            )
            .collect())
    }
}

/// The topics a consumer group's members subscribe to, from their subscriptions in the
/// group's protocol (`ConsumerProtocolSubscription`, a version then the fields). A member
/// whose subscription does not parse adds nothing, as Kafka's `computeSubscribedTopics`
/// then knows none.
fn subscribed_topics(g: &Group) -> Vec<String> {
    use kafka_protocol::messages::ConsumerProtocolSubscription;
    use kafka_protocol::protocol::Decodable;
    let Some(protocol) = g.protocol.as_deref() else {
        return Vec::new();
    };
    let mut topics = Vec::new();
    for m in g.members.values() {
        let mut meta = m.metadata_for(protocol);
        if meta.len() < 2 {
            continue;
        }
        let version = bytes::Buf::get_i16(&mut meta);
        // Newer versions only add fields: read what this codec knows (3 is the newest).
        if let Ok(s) = ConsumerProtocolSubscription::decode(&mut meta, version.clamp(0, 3)) {
            topics.extend(s.topics.into_iter().map(|t| t.to_string()));
        }
    }
    topics
}
