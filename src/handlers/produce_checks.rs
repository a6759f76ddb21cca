//! Produce's request-level rules, as Kafka 3.9 applies them before any log sees the records
//! (`KafkaApis.handleProduceRequest`, `ProduceRequest.validateRecords`,
//! `ReplicaManager.appendToLocalLog`). The batch and record rules live in the data plane
//! (`ferrite_shards::log::admission`); see `docs/validation.md` for the whole table.

use crate::protocol::errors::ErrorCode;
use bytes::Bytes;
use ferrite_shards::batch::{BatchHeader, Compression, LOG_OVERHEAD_BYTES, MAGIC_V2};

/// A partition's refusal before the append: the code and why.
pub type Refusal = (ErrorCode, String);

/// The client id Kafka lets write into internal topics (its admin tools).
const ADMIN_CLIENT_ID: &str = "__admin_client";

/// Kafka's internal topics, which only the broker itself writes.
pub fn is_internal_topic(topic: &str) -> bool {
    topic == "__consumer_offsets" || topic == "__transaction_state"
}

/// `ReplicaManager.appendToLocalLog`: producers may not write internal topics.
pub fn internal_topic_refusal(topic: &str, client_id: &str) -> Option<Refusal> {
    (is_internal_topic(topic) && client_id != ADMIN_CLIENT_ID).then(|| {
        (
            ErrorCode::INVALID_TOPIC_EXCEPTION,
            format!("Cannot append to internal topic {topic}"),
        )
    })
}

/// `ReplicaManager.appendRecords`: acks is -1 (all), 0 or 1.
pub fn acks_refusal(acks: i16) -> Option<Refusal> {
    (!(-1..=1).contains(&acks)).then(|| {
        (
            ErrorCode::INVALID_REQUIRED_ACKS,
            format!("acks={acks} is not 0, 1 or -1"),
        )
    })
}

/// The first batch's header, when the record set starts with a whole one.
fn first_header(records: &Bytes) -> Option<BatchHeader> {
    BatchHeader::parse(records).ok()
}

/// The producer of a partition's transactional records (its first batch, as Kafka looks), if
/// they are transactional: (producer id, epoch).
pub fn transactional_producer(records: &Bytes) -> Option<(i64, i16)> {
    let h = first_header(records)?;
    (h.magic == MAGIC_V2 && h.is_transactional()).then_some((h.producer_id, h.producer_epoch))
}

/// `KafkaApis.handleProduceRequest` (`RequestUtils.hasTransactionalRecords`) and
/// `ReplicaManager.appendRecords`: transactional records need the request's transactional id,
/// and Write on it (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED for the whole request); they
/// may come from one producer only (else INVALID_PRODUCER_ID_MAPPING).
pub fn transactional_refusal(
    transactional_id: Option<&str>,
    may_write_id: impl Fn(&str) -> bool,
    record_sets: &[&Bytes],
) -> Option<Refusal> {
    let producers: std::collections::BTreeSet<(i64, i16)> = record_sets
        .iter()
        .filter_map(|r| transactional_producer(r))
        .collect();
    if producers.is_empty() {
        return None;
    }
    let Some(id) = transactional_id else {
        return Some((
            ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            "a transactional batch came without a transactional id".to_string(),
        ));
    };
    if !may_write_id(id) {
        return Some((
            ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            format!("Write on transactional id {id} denied"),
        ));
    }
    (producers.len() > 1).then(|| {
        (
            ErrorCode::INVALID_PRODUCER_ID_MAPPING,
            "transactional records came from more than one producer id".to_string(),
        )
    })
}

/// `ProduceRequest.validateRecords`, for Produce v3 and later: exactly one whole magic 2
/// batch per partition, and no zstd before v7. Earlier versions are not checked by Kafka
/// (they may carry old message sets, which the log up-converts).
pub fn shape_refusal(version: i16, records: &Bytes) -> Option<Refusal> {
    if version < 3 {
        return None;
    }
    let framing = batch_framing(records);
    let (first_magic, whole) = match framing {
        Framing::Corrupt(reason) => return Some((ErrorCode::CORRUPT_MESSAGE, reason)),
        Framing::Batches { first_magic, whole } => (first_magic, whole),
    };
    let Some(first_magic) = first_magic.filter(|_| whole > 0) else {
        return Some((
            ErrorCode::INVALID_RECORD,
            format!("Produce requests with version {version} must have at least one record batch per partition"),
        ));
    };
    if first_magic != MAGIC_V2 {
        return Some((
            ErrorCode::INVALID_RECORD,
            format!("Produce requests with version {version} are only allowed to contain record batches with magic version 2"),
        ));
    }
    if whole > 1 {
        return Some((
            ErrorCode::INVALID_RECORD,
            format!("Produce requests with version {version} are only allowed to contain exactly one record batch per partition"),
        ));
    }
    let zstd = first_header(records).and_then(|h| h.compression()) == Some(Compression::Zstd);
    if version < 7 && zstd {
        return Some((
            ErrorCode::UNSUPPORTED_COMPRESSION_TYPE,
            format!("Produce requests with version {version} are not allowed to use ZStandard compression"),
        ));
    }
    None
}

enum Framing {
    Batches {
        first_magic: Option<u8>,
        whole: usize,
    },
    Corrupt(String),
}

/// Walks the batch framing as Kafka's `ByteBufferLogInputStream.nextBatchSize` does: a length
/// below the smallest message or a magic outside 0..=2 is corrupt; a cut batch at the end is
/// not counted.
fn batch_framing(records: &Bytes) -> Framing {
    const MAGIC_AT: usize = 16;
    const SMALLEST_RECORD_BYTES: i32 = 14;
    let mut at = 0usize;
    let mut whole = 0usize;
    let mut first_magic = None;
    while records.len() - at > MAGIC_AT {
        let rest = &records[at..];
        let length = i32::from_be_bytes([rest[8], rest[9], rest[10], rest[11]]);
        if length < SMALLEST_RECORD_BYTES {
            return Framing::Corrupt(format!(
                "Record size {length} is less than the minimum record overhead ({SMALLEST_RECORD_BYTES})"
            ));
        }
        let magic = rest[MAGIC_AT];
        if magic > MAGIC_V2 {
            return Framing::Corrupt(format!("Invalid magic found in record: {magic}"));
        }
        first_magic.get_or_insert(magic);
        let total = LOG_OVERHEAD_BYTES + length as usize;
        if total > rest.len() {
            break;
        }
        whole += 1;
        at += total;
    }
    Framing::Batches { first_magic, whole }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrite_shards::batch::build::{
        build_batch, build_batch_compressed, NewRecord, ProducerFields,
    };

    fn one() -> Vec<NewRecord> {
        vec![NewRecord {
            value: Some(Bytes::from_static(b"v")),
            ..Default::default()
        }]
    }

    fn batch() -> Bytes {
        build_batch(&one(), ProducerFields::NONE)
    }

    fn code(r: Option<Refusal>) -> Option<ErrorCode> {
        r.map(|(c, _)| c)
    }

    #[test]
    fn v3_needs_exactly_one_whole_magic_2_batch() {
        assert_eq!(code(shape_refusal(3, &batch())), None);
        let two = Bytes::from([batch().to_vec(), batch().to_vec()].concat());
        assert_eq!(
            code(shape_refusal(9, &two)),
            Some(ErrorCode::INVALID_RECORD)
        );
        assert_eq!(code(shape_refusal(2, &two)), None, "v0-2 are not checked");
        let cut = batch().slice(..40);
        assert_eq!(
            code(shape_refusal(9, &cut)),
            Some(ErrorCode::INVALID_RECORD)
        );
        assert_eq!(
            code(shape_refusal(9, &Bytes::new())),
            Some(ErrorCode::INVALID_RECORD)
        );
        let with_tail = Bytes::from([batch().to_vec(), batch()[..30].to_vec()].concat());
        assert_eq!(
            code(shape_refusal(9, &with_tail)),
            None,
            "a cut tail is dropped, as Kafka does"
        );
    }

    #[test]
    fn v3_refuses_old_magic_and_corrupt_framing() {
        let mut v1 = batch().to_vec();
        v1[16] = 1;
        assert_eq!(
            code(shape_refusal(3, &Bytes::from(v1))),
            Some(ErrorCode::INVALID_RECORD)
        );
        let mut bad_magic = batch().to_vec();
        bad_magic[16] = 7;
        assert_eq!(
            code(shape_refusal(3, &Bytes::from(bad_magic))),
            Some(ErrorCode::CORRUPT_MESSAGE)
        );
        let mut tiny = batch().to_vec();
        tiny[8..12].copy_from_slice(&3i32.to_be_bytes());
        assert_eq!(
            code(shape_refusal(3, &Bytes::from(tiny))),
            Some(ErrorCode::CORRUPT_MESSAGE)
        );
    }

    #[test]
    fn zstd_needs_produce_v7() {
        let zstd = build_batch_compressed(&one(), ProducerFields::NONE, Compression::Zstd).unwrap();
        assert_eq!(
            code(shape_refusal(6, &zstd)),
            Some(ErrorCode::UNSUPPORTED_COMPRESSION_TYPE)
        );
        assert_eq!(code(shape_refusal(7, &zstd)), None);
    }

    #[test]
    fn transactional_batches_need_an_id_they_may_write_and_one_producer() {
        let of = |pid: i64| {
            let mut txn = batch().to_vec();
            txn[22] |= 0x10; // attributes: transactional
            txn[43..51].copy_from_slice(&pid.to_be_bytes()); // producer id
            Bytes::from(txn)
        };
        let (txn, other) = (of(5), of(6));
        let yes = |_: &str| true;
        assert_eq!(
            code(transactional_refusal(None, yes, &[&txn])),
            Some(ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        );
        assert_eq!(code(transactional_refusal(Some("t"), yes, &[&txn])), None);
        assert_eq!(
            code(transactional_refusal(Some("t"), |_| false, &[&txn])),
            Some(ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        );
        assert_eq!(code(transactional_refusal(None, yes, &[&batch()])), None);
        assert_eq!(
            code(transactional_refusal(Some("t"), yes, &[&txn, &other])),
            Some(ErrorCode::INVALID_PRODUCER_ID_MAPPING)
        );
    }

    #[test]
    fn acks_are_all_none_or_the_leader() {
        for ok in [-1, 0, 1] {
            assert_eq!(code(acks_refusal(ok)), None);
        }
        for bad in [-2, 2, 3] {
            assert_eq!(
                code(acks_refusal(bad)),
                Some(ErrorCode::INVALID_REQUIRED_ACKS)
            );
        }
    }

    #[test]
    fn internal_topics_are_the_brokers_own() {
        assert_eq!(
            code(internal_topic_refusal("__consumer_offsets", "rdkafka")),
            Some(ErrorCode::INVALID_TOPIC_EXCEPTION)
        );
        assert_eq!(
            code(internal_topic_refusal(
                "__consumer_offsets",
                "__admin_client"
            )),
            None
        );
        assert_eq!(code(internal_topic_refusal("orders", "rdkafka")), None);
    }
}
