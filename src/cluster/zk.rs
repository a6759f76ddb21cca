//! Small ZooKeeper helpers shared by the control thread's parts: the create modes Ferrite uses
//! (open ACLs, as Kafka's defaults) and create/delete that tolerate the node's state.

use zookeeper_client::{Acls, Client, CreateMode, CreateOptions, Error};

/// How many per-partition ZooKeeper operations one pass keeps in flight: the controller's
/// reads and writes of partition states, and the leaders' ISR changes. A failover or a
/// broker's return changes thousands of partitions together, and one round trip each in turn
/// would take seconds.
pub const PARTITION_OPS_IN_FLIGHT: usize = 256;

pub fn persistent() -> CreateOptions<'static> {
    CreateMode::Persistent.with_acls(Acls::anyone_all())
}

pub fn persistent_sequential() -> CreateOptions<'static> {
    CreateMode::PersistentSequential.with_acls(Acls::anyone_all())
}

pub fn ephemeral() -> CreateOptions<'static> {
    CreateMode::Ephemeral.with_acls(Acls::anyone_all())
}

/// Creates a persistent node unless it exists (its data then stays as it is).
pub async fn create_if_missing(client: &Client, path: &str, data: &[u8]) -> Result<(), Error> {
    match client.create(path, data, &persistent()).await {
        Ok(_) | Err(Error::NodeExists) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Deletes a node if it is there.
pub async fn delete_if_present(client: &Client, path: &str) -> Result<(), Error> {
    match client.delete(path, None).await {
        Ok(()) | Err(Error::NoNode) => Ok(()),
        Err(e) => Err(e),
    }
}
