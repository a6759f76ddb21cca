//! What the watch reported since the tree was read, and reading only that again.
//!
//! The control thread holds the tree it last read. Each event of its persistent recursive
//! watch names one znode; `section_of` maps it to the part of the tree that znode feeds (one
//! partition's state, one topic's assignment, one broker, ...), and `read_changed` reads those
//! parts again, so a change costs reads in proportion to what changed, not to the cluster.
//! Events that arrive in one burst are collected first, so a part is read once for all of
//! them; a re-read is idempotent, so an event for a change already read costs one read.
//!
//! The whole tree is read at the start of a session and after a disconnection: ZooKeeper does
//! not deliver the events of changes made while a client was away (ZOOKEEPER-4698), and a
//! failed read leaves the tree partly updated, so it also asks for a whole read.

use super::view::{self, ZkTree};
use super::zk::PARTITION_OPS_IN_FLIGHT;
use super::znodes;
use futures::StreamExt;
use std::collections::{BTreeSet, HashSet};
use zookeeper_client::{Client, Error, EventType, SessionState, WatchedEvent};

/// A part of the tree that is read on its own.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Section {
    /// `/brokers/topics/<t>`: assignment and reassignments (states of new partitions too).
    /// Listed first, so a topic read in a burst is read before its partitions' states.
    Topic(String),
    /// `/brokers/topics/<t>/partitions/<p>/state`.
    PartitionState(String, i32),
    /// `/config/topics/<t>`.
    TopicConfigs(String),
    /// `/brokers/ids/<n>`.
    Broker(i32),
    ClusterId,
    Controller,
    /// Everything under `/config/brokers`.
    BrokerConfigs,
    /// Everything under `/config/users` and `/config/clients`: quotas and SCRAM credentials.
    UserAndClientConfigs,
    /// Both ACL roots.
    Acls,
    /// `/admin/delete_topics`.
    PendingDeletions,
    /// `/admin/reassign_partitions`.
    ReassignRequests,
    /// `/admin/preferred_replica_election`.
    PreferredElections,
    /// `/admin/unclean_leader_election`.
    UncleanElections,
}

/// The part of the tree the znode at `path` feeds; none for znodes the view does not hold
/// (change notifications, the controller epoch, the producer id block, parents).
pub fn section_of(path: &str) -> Option<Section> {
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    match parts.as_slice() {
        ["cluster", "id"] => Some(Section::ClusterId),
        ["controller"] => Some(Section::Controller),
        ["brokers", "ids", n] => n.parse().ok().map(Section::Broker),
        ["brokers", "topics", t] => Some(Section::Topic(t.to_string())),
        ["brokers", "topics", t, "partitions", p, "state"] => p
            .parse()
            .ok()
            .map(|p| Section::PartitionState(t.to_string(), p)),
        ["config", "topics", t] => Some(Section::TopicConfigs(t.to_string())),
        ["config", "brokers", _] => Some(Section::BrokerConfigs),
        ["config", "users", _, ..] | ["config", "clients", _] => {
            Some(Section::UserAndClientConfigs)
        }
        // An ACL's resource name may hold a '/', which ZooKeeper reads as a deeper znode.
        ["kafka-acl", _, _, ..] | ["kafka-acl-extended", "prefixed", _, _, ..] => {
            Some(Section::Acls)
        }
        ["admin", "delete_topics", _] => Some(Section::PendingDeletions),
        ["admin", "reassign_partitions"] => Some(Section::ReassignRequests),
        ["admin", "preferred_replica_election"] => Some(Section::PreferredElections),
        ["admin", "unclean_leader_election"] => Some(Section::UncleanElections),
        _ => None,
    }
}

/// What is to be read again.
#[derive(Debug)]
pub struct Changed {
    whole: bool,
    sections: BTreeSet<Section>,
}

impl Changed {
    /// Everything: a session's first read, or after events may have been lost.
    pub fn everything() -> Changed {
        Changed {
            whole: true,
            sections: BTreeSet::new(),
        }
    }

    pub fn nothing() -> Changed {
        Changed {
            whole: false,
            sections: BTreeSet::new(),
        }
    }

    /// Takes one event of the watch. A disconnection means events may be lost until the
    /// session is back, so the next read is whole.
    pub fn note(&mut self, event: &WatchedEvent) {
        match event.event_type {
            EventType::Session => {
                if event.session_state == SessionState::Disconnected {
                    self.whole = true;
                }
            }
            _ => {
                if let Some(section) = section_of(&event.path) {
                    self.sections.insert(section);
                }
            }
        }
    }

    pub fn is_nothing(&self) -> bool {
        !self.whole && self.sections.is_empty()
    }
}

/// Reads into `tree` what `changed` names. On an error the tree may be partly updated: the
/// caller reads it whole next.
pub async fn read_changed(
    client: &Client,
    tree: &mut ZkTree,
    changed: Changed,
) -> Result<(), Error> {
    if changed.whole {
        *tree = view::read_tree(client).await?;
        return Ok(());
    }
    // Topics read whole in this pass: their partitions' states were read with them.
    let mut read_whole = HashSet::new();
    let mut states = Vec::new();
    for section in changed.sections {
        match section {
            Section::Topic(name) => {
                let known = tree.topics.get(&name);
                if known.is_none() {
                    read_whole.insert(name.clone());
                }
                match view::read_topic(client, &name, known).await? {
                    Some(topic) => {
                        tree.topics.insert(name, topic);
                    }
                    None => {
                        tree.topics.remove(&name);
                    }
                }
            }
            // Read together below, after the topics they belong to.
            Section::PartitionState(name, p) => states.push((name, p)),
            Section::TopicConfigs(name) => {
                if read_whole.contains(&name) {
                    continue;
                }
                if let Some(topic) = tree.topics.get_mut(&name) {
                    topic.configs = view::read_topic_configs(client, &name).await?;
                }
            }
            Section::Broker(n) => match view::read_broker(client, n).await? {
                Some(b) => {
                    tree.brokers.insert(n, b);
                }
                None => {
                    tree.brokers.remove(&n);
                }
            },
            Section::ClusterId => tree.cluster_id = view::read_cluster_id(client).await?,
            Section::Controller => tree.controller = view::read_controller(client).await?,
            Section::BrokerConfigs => {
                tree.broker_configs = view::read_broker_configs(client).await?
            }
            Section::UserAndClientConfigs => {
                (tree.client_quotas, tree.scram_users) =
                    view::read_user_and_client_configs(client).await?
            }
            Section::Acls => tree.acls = super::acls::read(client).await?,
            Section::PendingDeletions => {
                tree.pending_deletions = view::read_pending_deletions(client).await?
            }
            Section::ReassignRequests => {
                tree.reassign_requests = view::read_reassign_requests(client).await?
            }
            Section::PreferredElections => {
                tree.preferred_elections =
                    view::read_elections(client, znodes::PREFERRED_ELECTION).await?
            }
            Section::UncleanElections => {
                tree.unclean_elections =
                    view::read_elections(client, znodes::UNCLEAN_ELECTION).await?
            }
        }
    }
    // A state of a topic or partition not known yet is read with its topic.
    states.retain(|(name, p)| {
        !read_whole.contains(name)
            && tree
                .topics
                .get(name)
                .is_some_and(|t| t.partitions.contains_key(p))
    });
    let mut read = futures::stream::iter(states)
        .map(|(name, p)| async move {
            let state = view::read_state(client, &name, p).await;
            (name, p, state)
        })
        .buffer_unordered(PARTITION_OPS_IN_FLIGHT);
    while let Some((name, p, state)) = read.next().await {
        let state = state?;
        if let Some(partition) = tree
            .topics
            .get_mut(&name)
            .and_then(|t| t.partitions.get_mut(&p))
        {
            partition.state = state;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_znode_feeds_its_own_section() {
        let cases = [
            ("/cluster/id", Some(Section::ClusterId)),
            ("/controller", Some(Section::Controller)),
            ("/controller_epoch", None),
            ("/brokers/ids/3", Some(Section::Broker(3))),
            ("/brokers/ids", None),
            ("/brokers/topics/t", Some(Section::Topic("t".into()))),
            ("/brokers/topics/t/partitions/7", None),
            (
                "/brokers/topics/t/partitions/7/state",
                Some(Section::PartitionState("t".into(), 7)),
            ),
            ("/config/topics/t", Some(Section::TopicConfigs("t".into()))),
            ("/config/brokers/<default>", Some(Section::BrokerConfigs)),
            ("/config/users/alice", Some(Section::UserAndClientConfigs)),
            (
                "/config/users/alice/clients/c",
                Some(Section::UserAndClientConfigs),
            ),
            ("/config/clients/c", Some(Section::UserAndClientConfigs)),
            ("/config/changes/config_change_0000000001", None),
            ("/kafka-acl/Topic/t", Some(Section::Acls)),
            ("/kafka-acl/Group/a/b", Some(Section::Acls)),
            ("/kafka-acl-extended/prefixed/Topic/t", Some(Section::Acls)),
            ("/kafka-acl-changes/acl_changes_0000000001", None),
            ("/admin/delete_topics/t", Some(Section::PendingDeletions)),
            (
                "/admin/reassign_partitions",
                Some(Section::ReassignRequests),
            ),
            (
                "/admin/preferred_replica_election",
                Some(Section::PreferredElections),
            ),
            (
                "/admin/unclean_leader_election",
                Some(Section::UncleanElections),
            ),
            ("/latest_producer_id_block", None),
        ];
        for (path, section) in cases {
            assert_eq!(section_of(path), section, "{path}");
        }
    }

    #[test]
    fn a_burst_names_each_section_once_and_a_disconnection_asks_for_everything() {
        let event = WatchedEvent::new;
        let mut changed = Changed::nothing();
        assert!(changed.is_nothing());
        changed.note(&event(
            EventType::NodeDataChanged,
            "/brokers/topics/t/partitions/0/state",
        ));
        changed.note(&event(
            EventType::NodeDataChanged,
            "/brokers/topics/t/partitions/0/state",
        ));
        changed.note(&event(
            EventType::NodeCreated,
            "/config/changes/config_change_1",
        ));
        assert_eq!(changed.sections.len(), 1);
        assert!(!changed.whole);
        changed.note(&WatchedEvent::new_session(SessionState::Disconnected));
        assert!(changed.whole);
    }
}
