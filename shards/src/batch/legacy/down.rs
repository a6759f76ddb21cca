//! Down-conversion: v2 batches from the log, rewritten as a magic 0 or 1 message set for a
//! Fetch v0–3 reader, as Kafka's `RecordsUtil.downConvert` does it. Records below the fetch
//! offset and control batches are left out, headers are dropped (old formats have none), and a
//! compressed batch becomes one wrapper message compressed with the same codec.
//!
//! Conversion reads and writes memory, so it cannot splice; its output is bounded by the
//! caller's byte limit (the first batch is always converted whole, so a reader can progress).

use super::{deflate, legacy_codec_bits, put_message, Message, LOG_APPEND_TIME_FLAG, MAGIC_V0};
use crate::batch::build::decode_record_section;
use crate::batch::records::record_section;
use crate::batch::{BatchError, BatchHeader, TimestampType, HEADER_BYTES, LOG_OVERHEAD_BYTES};
use bytes::{Bytes, BytesMut};

/// What a conversion produced.
#[derive(Debug, Default)]
pub struct DownConverted {
    pub set: BytesMut,
    /// Records written, wrapped or not (Kafka's "message conversions").
    pub records: usize,
    /// v2 batches read.
    pub batches: usize,
}

/// Converts the whole batches in `data` to magic `magic`, leaving out records below
/// `fetch_offset`, and stops before the batch that would take the set past `limit_bytes`
/// (once at least one batch is in). A zstd batch cannot be expressed in magic 0/1: Kafka
/// answers UNSUPPORTED_COMPRESSION_TYPE, and so does this (`UnsupportedCompression`), unless
/// converted data comes before it, which is then returned alone.
pub fn down_convert(
    data: &Bytes,
    magic: u8,
    fetch_offset: i64,
    limit_bytes: usize,
) -> Result<DownConverted, BatchError> {
    debug_assert!(magic <= super::MAGIC_V1);
    let mut out = DownConverted::default();
    for b in whole_batches(data) {
        let header = BatchHeader::parse(&b)?;
        if header.is_control() || header.last_offset() < fetch_offset {
            continue;
        }
        if !out.set.is_empty() && out.set.len() + b.len() > limit_bytes {
            break;
        }
        let codec = header
            .compression()
            .ok_or(BatchError::UnsupportedCompression {
                codec: (header.attributes & 0x7) as u16,
            })?;
        let Some(bits) = legacy_codec_bits(codec) else {
            if out.batches > 0 {
                break;
            }
            return Err(BatchError::UnsupportedCompression { codec: 4 });
        };
        let section = Bytes::from(record_section(&b, super::LEGACY_INFLATED_BYTES_MAX)?);
        let records: Vec<_> = decode_record_section(&header, &section)?
            .into_iter()
            .filter(|r| r.offset >= fetch_offset)
            .collect();
        out.batches += 1;
        let Some(last) = records.last() else {
            continue;
        };
        let log_append_time = header.timestamp_type() == TimestampType::LogAppendTime;
        let time_flag = if log_append_time && magic > MAGIC_V0 {
            LOG_APPEND_TIME_FLAG
        } else {
            0
        };
        let timestamp_of = |t: i64| match (magic, log_append_time) {
            (MAGIC_V0, _) => -1,
            (_, true) => header.max_timestamp,
            (_, false) => t,
        };
        if bits == 0 {
            for r in &records {
                put_message(
                    &mut out.set,
                    &Message {
                        offset: r.offset,
                        magic,
                        attributes: time_flag,
                        timestamp: timestamp_of(r.timestamp_ms),
                        key: r.key.as_deref(),
                        value: r.value.as_deref(),
                    },
                );
            }
        } else {
            // Magic 0 inner offsets are absolute; magic 1's count from the first record.
            let first = records[0].offset;
            let mut inner = BytesMut::new();
            for r in &records {
                put_message(
                    &mut inner,
                    &Message {
                        offset: if magic == MAGIC_V0 {
                            r.offset
                        } else {
                            r.offset - first
                        },
                        magic,
                        attributes: time_flag,
                        timestamp: timestamp_of(r.timestamp_ms),
                        key: r.key.as_deref(),
                        value: r.value.as_deref(),
                    },
                );
            }
            let packed = deflate(codec, magic, &inner)?;
            let max_timestamp = records.iter().map(|r| r.timestamp_ms).max().unwrap_or(-1);
            put_message(
                &mut out.set,
                &Message {
                    offset: last.offset,
                    magic,
                    attributes: bits | time_flag,
                    timestamp: timestamp_of(max_timestamp),
                    key: None,
                    value: Some(&packed),
                },
            );
        }
        out.records += records.len();
    }
    Ok(out)
}

/// The whole batches at the start of `data`; a read may end inside the last one.
fn whole_batches(data: &Bytes) -> impl Iterator<Item = Bytes> + '_ {
    let mut at = 0usize;
    std::iter::from_fn(move || {
        let rest = data.get(at..)?;
        let length = i32::from_be_bytes(rest.get(8..12)?.try_into().ok()?);
        let total = LOG_OVERHEAD_BYTES + usize::try_from(length).ok()?;
        if total < HEADER_BYTES || total > rest.len() {
            return None;
        }
        at += total;
        Some(data.slice(at - total..at))
    })
}
