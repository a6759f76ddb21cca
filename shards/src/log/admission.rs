//! What a producer's record set must be to enter the log, checked in the order Kafka checks
//! it (`UnifiedLog.analyzeAndValidateRecords`, then `LogValidator`): each batch's framing,
//! CRC and producer fields (`batch::validate`), then every record (`record_checks`), then the
//! header rewrites Kafka makes: the topic's timestamp type and the records' real maxTimestamp.
//! (Old message sets are up-converted before they get here: `batch::legacy::up`.)
//!
//! A batch that needs no rewrite — every batch on a CreateTime topic from a correct client —
//! goes to disk as the same bytes the request carried.

use super::{Log, ValidBatch};
use crate::batch::record_checks::{check_records, RecordRules};
use crate::batch::{self, BatchError, BatchHeader, BatchOrigin, TimestampType};
use crate::error::Result;
use bytes::Bytes;

/// A producer's record set, ready for `append`.
#[derive(Debug)]
pub struct Admitted {
    pub batches: Vec<ValidBatch>,
    /// The broker time stamped on the batches (LogAppendTime topics), else -1: Produce's
    /// `log_append_time_ms`.
    pub log_append_time_ms: i64,
}

impl Log {
    /// Checks a producer's record set at the broker time `now_ms`.
    pub fn admit(&self, records: &Bytes, now_ms: i64) -> Result<Admitted> {
        let config = self.config();
        let (before_max_ms, after_max_ms) = config.timestamp_window_ms();
        let rules = RecordRules {
            key_required: config.cleanup_policy.compacts(),
            timestamp_type: config.message_timestamp_type,
            now_ms,
            timestamp_before_max_ms: before_max_ms,
            timestamp_after_max_ms: after_max_ms,
        };
        let mut batches = Vec::new();
        for bytes in batch::whole_batches(records)? {
            // LogValidator.validateBatch: every batch of a set has the first one's magic.
            if let Some(first) = batches.first() {
                let first: &ValidBatch = first;
                if bytes[16] != first.header.magic {
                    return Err(BatchError::MixedMagic {
                        first: first.header.magic,
                        magic: bytes[16],
                    }
                    .into());
                }
            }
            let header = batch::validate(&bytes, config.max_message_bytes, BatchOrigin::Client)?;
            let seen = check_records(&bytes, &header, &rules)?;
            let max_timestamp = match rules.timestamp_type {
                TimestampType::LogAppendTime => now_ms,
                TimestampType::CreateTime => seen.max_timestamp,
            };
            batches.push(restamped(
                bytes,
                header,
                rules.timestamp_type,
                max_timestamp,
            ));
        }
        Ok(Admitted {
            batches,
            log_append_time_ms: match rules.timestamp_type {
                TimestampType::LogAppendTime => now_ms,
                TimestampType::CreateTime => -1,
            },
        })
    }
}

/// The batch with Kafka's header rewrite applied when it changes anything; the original
/// bytes otherwise.
fn restamped(
    bytes: Bytes,
    header: BatchHeader,
    timestamp_type: TimestampType,
    max_timestamp: i64,
) -> ValidBatch {
    if header.timestamp_type() == timestamp_type && header.max_timestamp == max_timestamp {
        return ValidBatch { bytes, header };
    }
    let bytes = batch::with_max_timestamp(&bytes, timestamp_type, max_timestamp);
    let header = BatchHeader::parse(&bytes).expect("a rewritten header is whole");
    ValidBatch { bytes, header }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::build::{build_batch, NewRecord, ProducerFields};
    use crate::config::{CleanupPolicy, IoMode, LogConfig};
    use crate::log::tests::{open, records, run};

    const NOW: i64 = 1_700_000_000_000;

    fn admit_with(config: LogConfig, records: Bytes) -> Result<Admitted> {
        let dir = tempfile::tempdir().unwrap();
        let mut out = None;
        run(|| async {
            let log = open(dir.path(), IoMode::Buffered, config).await;
            out = Some(log.admit(&records, NOW));
            log.close().await.unwrap();
        });
        out.unwrap()
    }

    #[test]
    fn a_correct_create_time_batch_goes_to_disk_as_the_same_bytes() {
        let batch = records(3, 10, NOW - 5);
        let admitted = admit_with(LogConfig::default(), batch.clone()).unwrap();
        assert_eq!(admitted.batches.len(), 1);
        assert_eq!(
            admitted.batches[0].bytes.as_ptr(),
            batch.as_ptr(),
            "no copy"
        );
        assert_eq!(admitted.log_append_time_ms, -1);
    }

    #[test]
    fn log_append_time_stamps_the_brokers_clock_and_a_valid_crc() {
        let config = LogConfig {
            message_timestamp_type: TimestampType::LogAppendTime,
            ..LogConfig::default()
        };
        let admitted = admit_with(config, records(3, 10, 5)).unwrap();
        let b = &admitted.batches[0];
        assert_eq!(admitted.log_append_time_ms, NOW);
        assert_eq!(b.header.max_timestamp, NOW);
        assert_eq!(b.header.timestamp_type(), TimestampType::LogAppendTime);
        batch::validate(&b.bytes, usize::MAX, BatchOrigin::Replica).expect("the CRC was redone");
    }

    #[test]
    fn a_wrong_max_timestamp_is_replaced_by_the_records_newest() {
        let mut wrong = records(3, 10, 1_000).to_vec();
        wrong[35..43].copy_from_slice(&77i64.to_be_bytes());
        let crc = crc32c::crc32c(&wrong[21..]);
        wrong[17..21].copy_from_slice(&crc.to_be_bytes());
        let admitted = admit_with(LogConfig::default(), Bytes::from(wrong)).unwrap();
        let b = &admitted.batches[0];
        assert_eq!(b.header.max_timestamp, 1_002);
        batch::validate(&b.bytes, usize::MAX, BatchOrigin::Replica).unwrap();
    }

    #[test]
    fn the_topics_record_rules_apply() {
        let compacted = LogConfig {
            cleanup_policy: CleanupPolicy::Compact,
            ..LogConfig::default()
        };
        let keyless = build_batch(
            &[NewRecord {
                value: Some(Bytes::from_static(b"v")),
                timestamp_ms: NOW,
                ..Default::default()
            }],
            ProducerFields::NONE,
        );
        assert!(matches!(
            admit_with(compacted, keyless),
            Err(crate::Error::InvalidBatch(
                BatchError::RecordsRefused { .. }
            ))
        ));
        let window = LogConfig {
            message_timestamp_difference_max_ms: 1_000,
            ..LogConfig::default()
        };
        assert!(matches!(
            admit_with(window, records(2, 10, NOW - 5_000)),
            Err(crate::Error::InvalidBatch(
                BatchError::RecordsRefused { .. }
            ))
        ));
    }

    #[test]
    fn a_cut_batch_after_whole_ones_is_dropped_and_magic_may_not_change() {
        let whole = records(2, 10, NOW);
        let with_tail = Bytes::from([whole.to_vec(), whole[..30].to_vec()].concat());
        assert_eq!(
            admit_with(LogConfig::default(), with_tail)
                .unwrap()
                .batches
                .len(),
            1
        );
        let mut v1 = whole.to_vec();
        v1[16] = 1;
        let mixed = Bytes::from([whole.to_vec(), v1].concat());
        assert!(matches!(
            admit_with(LogConfig::default(), mixed),
            Err(crate::Error::InvalidBatch(BatchError::MixedMagic { .. }))
        ));
    }
}
