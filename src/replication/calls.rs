//! Requests from this broker to another one that are not replication: the transaction
//! coordinator's WriteTxnMarkers to partition leaders, and a partition leader's KIP-890
//! verification at a transaction coordinator. On the inter-broker listener, as the fetchers
//! connect; connections are kept per broker and reused.
//!
//! Lives on: every shard, in ZooKeeper mode (a single broker has no one to call).

use super::peer::Peer;
use crate::security::listener::InterBrokerClient;
use crate::shard::Shard;
use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::{Decodable, Encodable};
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Duration;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Idle connections kept per broker.
const IDLE_PER_BROKER: usize = 4;

/// The shard's connections to other brokers for these calls.
pub struct BrokerCalls {
    client: Rc<InterBrokerClient>,
    idle: RefCell<HashMap<i32, Vec<Peer>>>,
}

impl BrokerCalls {
    pub fn new(client: Rc<InterBrokerClient>) -> BrokerCalls {
        BrokerCalls {
            client,
            idle: RefCell::new(HashMap::new()),
        }
    }
}

/// Sends one request to broker `node` and reads its answer within `timeout`. Err says why
/// not (no such broker, no shared listener, the connection failed): the caller retries.
pub async fn call_broker<Req: Encodable, Resp: Decodable>(
    shard: &Shard,
    node: i32,
    key: ApiKey,
    version: i16,
    body: &Req,
    timeout: Duration,
) -> Result<Resp, String> {
    let calls = shard
        .services
        .get::<BrokerCalls>()
        .ok_or_else(|| "not in a cluster".to_string())?;
    let addr = shard
        .metadata()
        .brokers
        .iter()
        .find(|b| b.node_id == node)
        .and_then(|b| b.endpoint(&calls.client.listener))
        .map(|e| (e.host.clone(), e.port))
        .ok_or_else(|| format!("broker {node} is not registered on the inter-broker listener"))?;
    let idle = calls.idle.borrow_mut().get_mut(&node).and_then(|v| v.pop());
    let mut peer = match idle {
        Some(p) => p,
        None => Peer::connect(&addr, shard.config.node_id, &calls.client, CONNECT_TIMEOUT)
            .await
            .map_err(|e| format!("connecting to broker {node}: {e}"))?,
    };
    let answer = peer
        .call(key, version, body, timeout)
        .await
        .map_err(|e| format!("{key:?} to broker {node}: {e}"))?;
    let mut idle = calls.idle.borrow_mut();
    let kept = idle.entry(node).or_default();
    if kept.len() < IDLE_PER_BROKER {
        kept.push(peer);
    }
    Ok(answer)
}
