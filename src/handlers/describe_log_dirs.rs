//! DescribeLogDirs: the broker's one log directory (the data directory), each partition
//! replica in it with its size, and the volume's total and usable bytes (v4), as Kafka's
//! `ReplicaManager.describeLogDirs`. Null topics means every partition; asked partitions this
//! broker does not hold are left out, as in Kafka. The offset lag is how far the replica's log
//! end is behind the high watermark (0 for a leader).

use super::{authorize, Request, Response};
use crate::protocol::errors::ErrorCode;
use crate::security::acl::Operation;
use crate::shard::Shard;
use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kafka_protocol::messages::{
    ApiKey, DescribeLogDirsRequest, DescribeLogDirsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::ffi::OsStrExt;
use std::rc::Rc;

/// One replica as a shard reports it: topic, partition, bytes, offset lag.
type Replica = (String, i32, i64, i64);

pub async fn handle(shard: &Shard, req: &Request, body: DescribeLogDirsRequest) -> Response {
    // Kafka: Describe on the cluster.
    if !authorize::cluster(shard, req, Operation::Describe) {
        let denied = DescribeLogDirsResponse::default()
            .with_error_code(ErrorCode::CLUSTER_AUTHORIZATION_FAILED.code());
        return req.respond(ApiKey::DescribeLogDirs, &denied);
    }
    let asked: Option<BTreeSet<(String, i32)>> = body.topics.map(|topics| {
        topics
            .into_iter()
            .flat_map(|t| {
                let name = t.topic.0.to_string();
                t.partitions.into_iter().map(move |p| (name.clone(), p))
            })
            .collect()
    });
    let reports = shard
        .router()
        .broadcast(|s: Rc<Shard>| {
            Box::pin(async move {
                s.partitions()
                    .into_iter()
                    .map(|p| {
                        let log = p.log();
                        let lag = (p.high_watermark() - log.log_end_offset()).max(0);
                        let size = log.size_bytes() as i64;
                        (p.topic().to_string(), p.index(), size, lag)
                    })
                    .collect::<Vec<Replica>>()
            })
        })
        .await;
    let mut by_topic: BTreeMap<String, Vec<DescribeLogDirsPartition>> = BTreeMap::new();
    for (topic, index, size, lag) in reports.into_iter().flatten().flatten() {
        if asked
            .as_ref()
            .is_some_and(|a| !a.contains(&(topic.clone(), index)))
        {
            continue;
        }
        by_topic.entry(topic).or_default().push(
            DescribeLogDirsPartition::default()
                .with_partition_index(index)
                .with_partition_size(size)
                .with_offset_lag(lag)
                .with_is_future_key(false),
        );
    }
    let topics = by_topic
        .into_iter()
        .map(|(name, mut partitions)| {
            partitions.sort_by_key(|p| p.partition_index);
            DescribeLogDirsTopic::default()
                .with_name(TopicName(StrBytes::from_string(name)))
                .with_partitions(partitions)
        })
        .collect();
    let dir = std::fs::canonicalize(&shard.config.data_dir)
        .unwrap_or_else(|_| shard.config.data_dir.clone());
    let (total, usable) = volume_bytes(&dir).unwrap_or((-1, -1));
    let result = DescribeLogDirsResult::default()
        .with_log_dir(StrBytes::from_string(dir.display().to_string()))
        .with_topics(topics)
        .with_total_bytes(total)
        .with_usable_bytes(usable);
    req.respond(
        ApiKey::DescribeLogDirs,
        &DescribeLogDirsResponse::default().with_results(vec![result]),
    )
}

/// The volume's size and the bytes an unprivileged writer may still use (Kafka's
/// `FileStore.getTotalSpace` and `getUsableSpace`).
fn volume_bytes(dir: &std::path::Path) -> Option<(i64, i64)> {
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: statvfs fills the struct we pass, from a NUL-terminated path we own.
    unsafe {
        let mut st: libc::statvfs = std::mem::zeroed();
        if libc::statvfs(path.as_ptr(), &mut st) != 0 {
            return None;
        }
        let block = st.f_frsize as i64;
        Some((st.f_blocks as i64 * block, st.f_bavail as i64 * block))
    }
}
