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
                .map(|(t, p)| {
                    let key = Key::Offset {
                        group: group_id.to_string(),
                        topic: t.clone(),
                        partition: *p,
                    };
                    (key.encode(), None)
                })
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
