//! Writing to the group's `__consumer_offsets` partition: every change that must survive a
//! restart is a record, acknowledged once the in-sync replicas have it.

use super::*;

impl Coordinator {
    /// Appends records (key, value or tombstone) to this shard's `__consumer_offsets`
    /// partition `partition`; the offset of the last.
    pub(super) async fn append(
        &self,
        partition: i32,
        records: Vec<(Bytes, Option<Bytes>)>,
    ) -> Result<i64, ErrorCode> {
        let Some(p) = self.host().and_then(|h| h.offsets_partition(partition)) else {
            return Err(ErrorCode::NOT_COORDINATOR);
        };
        append_to(&p, records).await
    }

    /// Stores a group's state in the background (a rebalance completed or emptied it: nobody
    /// waits for the answer); a failure is logged and the next change stores it again.
    pub(super) fn persist_group(self: &Rc<Self>, partition: i32, id: String, value: GroupValue) {
        let me = Rc::downgrade(self);
        glommio::spawn_local(async move {
            let Some(me) = me.upgrade() else { return };
            let key = Key::Group { group: id.clone() };
            let record = vec![(key.encode(), Some(value.encode()))];
            if let Err(code) = me.append(partition, record).await {
                tracing::warn!(group = %id, %code, "storing the group failed");
            }
        })
        .detach();
    }
}

/// Appends records to `p` and waits for the ISR; the offset of the last.
async fn append_to(
    p: &Rc<Partition>,
    records: Vec<(Bytes, Option<Bytes>)>,
) -> Result<i64, ErrorCode> {
    let batch = build_batch(&new_records(records), ProducerFields::NONE);
    let epoch = p.leader_epoch();
    let info = p.produce(&batch).await.map_err(|e| write_failed(p, &e))?;
    committed(p, info.last_offset, epoch).await
}

/// Appends a producer's transactional offset commit (base sequence 0, sequences unchecked:
/// Kafka's COORDINATOR origin) to `p` and waits for the ISR; the offset of the last record.
pub(super) async fn append_transactional(
    p: &Rc<Partition>,
    records: Vec<(Bytes, Option<Bytes>)>,
    producer: ProducerFields,
    guard: Option<u64>,
) -> Result<i64, ErrorCode> {
    let batch = build_transactional_batch(&new_records(records), producer);
    let epoch = p.leader_epoch();
    let info = p
        .append_for_transaction(batch, guard)
        .await
        .map_err(|e| write_failed(p, &e))?;
    committed(p, info.last_offset, epoch).await
}

fn new_records(records: Vec<(Bytes, Option<Bytes>)>) -> Vec<NewRecord> {
    let now = now_ms();
    records
        .into_iter()
        .map(|(key, value)| NewRecord {
            key: Some(key),
            value,
            timestamp_ms: now,
            headers: Vec::new(),
        })
        .collect()
}

fn write_failed(p: &Partition, e: &ferrite_shards::Error) -> ErrorCode {
    ferrite_shards::repeated::error(
        "writing to __consumer_offsets failed",
        &p.log().dir().display(),
        e,
    );
    coordinator_code(e)
}

/// As Kafka: a commit is answered once every in-sync replica has it.
async fn committed(p: &Partition, last_offset: i64, epoch: i32) -> Result<i64, ErrorCode> {
    match p.wait_committed(last_offset, epoch, COMMIT_TIMEOUT).await {
        Ok(true) => Ok(last_offset),
        Ok(false) => Err(ErrorCode::COORDINATOR_NOT_AVAILABLE),
        Err(_) => Err(ErrorCode::NOT_COORDINATOR),
    }
}

/// What a member is told when its group's write failed, as Kafka's `GroupMetadataManager`
/// translates the append's error: a storage error (a full disk) or lost leadership sends it
/// to look for the coordinator again, a missing partition asks it to wait, an offset commit too
/// large for the log is INVALID_COMMIT_OFFSET_SIZE.
fn coordinator_code(e: &ferrite_shards::Error) -> ErrorCode {
    let code = crate::protocol::errors::code_for(e);
    if code == ErrorCode::NOT_LEADER_OR_FOLLOWER || code == ErrorCode::KAFKA_STORAGE_ERROR {
        ErrorCode::NOT_COORDINATOR
    } else if code == ErrorCode::MESSAGE_TOO_LARGE || code == ErrorCode::RECORD_LIST_TOO_LARGE {
        ErrorCode::INVALID_COMMIT_OFFSET_SIZE
    } else if code == ErrorCode::INVALID_TXN_STATE || code == ErrorCode::INVALID_PRODUCER_EPOCH {
        // A transactional commit's refusals reach the producer as they are.
        code
    } else {
        ErrorCode::COORDINATOR_NOT_AVAILABLE
    }
}

/// How long a group write waits for the ISR before the member is told to retry.
const COMMIT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);
