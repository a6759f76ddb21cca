//! Every record of a v2 batch a producer sends, walked and checked before the batch is
//! written, as Kafka's `LogValidator` does: the record framing (`DefaultRecord.readFrom`),
//! then the topic's rules (keys on compacted topics, timestamps).
//!
//! Compressed batches are walked through a decompressing stream (`stream.rs`), so memory stays
//! bounded whatever they inflate to; the bytes that go to disk are the client's, untouched.

use super::clean_walk::clean_max_timestamp;
use super::stream::{RecordBytes, Section};
use super::{BatchError, BatchHeader, TimestampType};

/// What a topic asks of the records producers send it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct RecordRules {
    /// `cleanup.policy` includes compact: every record needs a key.
    pub key_required: bool,
    /// `message.timestamp.type`.
    pub timestamp_type: TimestampType,
    /// The broker's clock when the batch arrived.
    pub now_ms: i64,
    /// `message.timestamp.before.max.ms`: how far in the past a CreateTime may be.
    pub timestamp_before_max_ms: i64,
    /// `message.timestamp.after.max.ms`: how far in the future a CreateTime may be.
    pub timestamp_after_max_ms: i64,
}

impl RecordRules {
    /// Kafka's defaults: CreateTime with no timestamp bound, keys optional.
    pub fn defaults(now_ms: i64) -> RecordRules {
        RecordRules {
            key_required: false,
            timestamp_type: TimestampType::CreateTime,
            now_ms,
            timestamp_before_max_ms: i64::MAX,
            timestamp_after_max_ms: i64::MAX,
        }
    }
}

/// Which Kafka error a refused record gets.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum RecordErrorKind {
    InvalidRecord,
    InvalidTimestamp,
}

/// One record the topic's rules refuse; Produce v8+ returns these as `record_errors`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordError {
    /// The record's place in its batch, from 0.
    pub index: i32,
    pub kind: RecordErrorKind,
    pub message: String,
}

/// Refused records reported one by one at most; the rest are counted in the message.
pub const RECORD_ERRORS_MAX: usize = 100;

/// What the walk learned, for the caller to rewrite the header when Kafka would.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct RecordsSeen {
    /// The largest record timestamp (`-1` when every record has none).
    pub max_timestamp: i64,
}

/// Walks every record of `batch` and applies `rules`. A framing error ends the walk
/// (`MalformedRecord`); rule violations are collected (`RecordsRefused`). An uncompressed
/// batch is first walked by `clean_walk`, which passes a batch with nothing wrong in it at
/// less cost; only what it leaves is walked again here.
pub fn check_records(
    batch: &[u8],
    header: &BatchHeader,
    rules: &RecordRules,
) -> Result<RecordsSeen, BatchError> {
    let section = Section::of(batch, header)?;
    if let Section::Plain(plain) = &section {
        if let Some(max_timestamp) = clean_max_timestamp(plain.rest(), header, rules) {
            return Ok(RecordsSeen { max_timestamp });
        }
    }
    walk_section(section, header, rules)
}

/// The full walk, which names what is wrong.
fn walk_section(
    section: Section<'_>,
    header: &BatchHeader,
    rules: &RecordRules,
) -> Result<RecordsSeen, BatchError> {
    match section {
        Section::Plain(mut s) => walk(&mut s, header, rules),
        Section::Inflating(mut s) => walk(&mut s, header, rules),
    }
}

fn walk(
    section: &mut impl RecordBytes,
    header: &BatchHeader,
    rules: &RecordRules,
) -> Result<RecordsSeen, BatchError> {
    let mut refused = Vec::new();
    let mut refused_count = 0usize;
    let mut max_timestamp = -1i64;
    let timestamps = TimestampCheck::new(header, rules);
    for index in 0..header.record_count.max(0) {
        let record = read_record(section, index)?;
        let timestamp = header.base_timestamp.wrapping_add(record.timestamp_delta);
        max_timestamp = max_timestamp.max(timestamp);
        let mut refuse = |kind, message: String| {
            refused_count += 1;
            if refused.len() < RECORD_ERRORS_MAX {
                refused.push(RecordError {
                    index,
                    kind,
                    message,
                });
            }
        };
        if record.offset_delta != index {
            // LogValidator: "does not have incremental offsets".
            refuse(
                RecordErrorKind::InvalidRecord,
                format!(
                    "record {index} has offset delta {}, expected {index}",
                    record.offset_delta
                ),
            );
        }
        if rules.key_required && !record.has_key {
            refuse(
                RecordErrorKind::InvalidRecord,
                "Compacted topic cannot accept message without key".to_string(),
            );
        }
        if let Some(message) = timestamps.problem(timestamp) {
            refuse(RecordErrorKind::InvalidTimestamp, message);
        }
    }
    if !section.at_end()? {
        return Err(malformed(
            header.record_count,
            "Incorrect declared batch size, records still remaining",
        ));
    }
    if !refused.is_empty() {
        return Err(BatchError::RecordsRefused {
            errors: refused,
            count: refused_count,
        });
    }
    Ok(RecordsSeen { max_timestamp })
}

/// Kafka's `LogValidator.validateTimestamp`: under CreateTime a record's timestamp must lie
/// within the topic's window around the broker's clock (`-1`, no timestamp, is let through);
/// a producer may not claim LogAppendTime for itself. Decided once per batch, applied to each
/// record.
struct TimestampCheck {
    /// `[earliest, latest]` under CreateTime.
    window: Option<(i64, i64)>,
    /// The batch's header claims LogAppendTime.
    log_append_time_claimed: bool,
}

impl TimestampCheck {
    fn new(header: &BatchHeader, rules: &RecordRules) -> TimestampCheck {
        let window = (rules.timestamp_type == TimestampType::CreateTime).then(|| {
            (
                rules.now_ms.saturating_sub(rules.timestamp_before_max_ms),
                rules.now_ms.saturating_add(rules.timestamp_after_max_ms),
            )
        });
        TimestampCheck {
            window,
            log_append_time_claimed: header.timestamp_type() == TimestampType::LogAppendTime,
        }
    }

    #[inline]
    fn problem(&self, timestamp: i64) -> Option<String> {
        match self.window {
            Some((earliest, latest)) if timestamp != -1 => {
                (timestamp < earliest || timestamp > latest).then(|| {
                    format!(
                        "Timestamp {timestamp} of message is out of range. The timestamp should be within [{earliest}, {latest}]"
                    )
                })
            }
            _ => self
                .log_append_time_claimed
                .then(|| "Producer should not set timestamp type to LogAppendTime.".to_string()),
        }
    }
}

/// The parts of a record the rules look at.
struct RecordFields {
    timestamp_delta: i64,
    offset_delta: i32,
    has_key: bool,
}

#[cold]
fn malformed(index: i32, reason: &'static str) -> BatchError {
    BatchError::MalformedRecord { index, reason }
}

#[cold]
fn premature_eof(index: i32) -> BatchError {
    malformed(
        index,
        "Incorrect declared batch size, premature EOF reached",
    )
}

/// Reads one record as `DefaultRecord.readFrom` does: its length, then attributes, timestamp
/// delta, offset delta, key, value and headers, which must fill the length exactly.
#[inline]
fn read_record(s: &mut impl RecordBytes, index: i32) -> Result<RecordFields, BatchError> {
    let length = read_varint(s, index)?;
    if length < 0 {
        return Err(malformed(index, "Invalid negative record size"));
    }
    let start = s.position();
    s.byte()?.ok_or_else(|| premature_eof(index))?; // attributes: unused in v2
    let timestamp_delta = read_varlong(s, index)?;
    let offset_delta = read_varint(s, index)?;
    let has_key = skip_nullable(s, index, "Invalid negative key size")?;
    skip_nullable(s, index, "Invalid negative value size")?;
    let headers = read_varint(s, index)?;
    if headers < 0 {
        return Err(malformed(index, "Found invalid number of record headers"));
    }
    for _ in 0..headers {
        // A header key may not be null; its value may.
        let key_length = read_varint(s, index)?;
        if key_length < 0 {
            return Err(malformed(index, "Invalid negative header key size"));
        }
        if !s.skip(key_length as usize)? {
            return Err(premature_eof(index));
        }
        skip_nullable(s, index, "Invalid negative header value size")?;
        if s.position() - start > length as u64 {
            return Err(malformed(
                index,
                "Invalid record size: headers overrun the record",
            ));
        }
    }
    if s.position() - start != length as u64 {
        return Err(malformed(
            index,
            "Invalid record size: the fields do not fill the record's length",
        ));
    }
    Ok(RecordFields {
        timestamp_delta,
        offset_delta,
        has_key,
    })
}

/// Skips a length-prefixed field; false when it is null (length -1). Other negative lengths
/// are refused with `negative`, as Kafka refuses them.
#[inline]
fn skip_nullable(
    s: &mut impl RecordBytes,
    index: i32,
    negative: &'static str,
) -> Result<bool, BatchError> {
    let length = read_varint(s, index)?;
    if length == -1 {
        return Ok(false);
    }
    if length < 0 {
        return Err(malformed(index, negative));
    }
    if !s.skip(length as usize)? {
        return Err(premature_eof(index));
    }
    Ok(true)
}

/// What reading a varint found.
enum VarintBits {
    Value(u64),
    /// The section ended inside it.
    Eof,
    /// Every one of its allowed bytes said another follows.
    TooLong,
}

/// The next varint's bits (zigzag not undone), at most `max_bytes` long; its seventh bits land
/// at 7 × i whatever the width, and bits shifted past 64 are dropped.
#[inline]
fn varint_bits(s: &mut impl RecordBytes, max_bytes: u32) -> Result<VarintBits, BatchError> {
    let mut value = 0u64;
    for i in 0..max_bytes {
        let Some(byte) = s.byte()? else {
            return Ok(VarintBits::Eof);
        };
        value |= ((byte & 0x7f) as u64) << (7 * i);
        if byte & 0x80 == 0 {
            return Ok(VarintBits::Value(value));
        }
    }
    Ok(VarintBits::TooLong)
}

#[inline]
fn read_varlong(s: &mut impl RecordBytes, index: i32) -> Result<i64, BatchError> {
    match varint_bits(s, 10)? {
        VarintBits::Value(value) => Ok(((value >> 1) as i64) ^ -((value & 1) as i64)),
        VarintBits::Eof => Err(premature_eof(index)),
        VarintBits::TooLong => Err(malformed(index, "Varlong is too long")),
    }
}

/// As Kafka's `ByteUtils.readVarint`: a fifth byte's bits beyond 32 are dropped, a sixth byte
/// is refused.
#[inline]
fn read_varint(s: &mut impl RecordBytes, index: i32) -> Result<i32, BatchError> {
    match varint_bits(s, 5)? {
        VarintBits::Value(value) => {
            let value = value as u32;
            Ok(((value >> 1) as i32) ^ -((value & 1) as i32))
        }
        VarintBits::Eof => Err(premature_eof(index)),
        VarintBits::TooLong => Err(malformed(index, "Varint is too long")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::build::{build_batch_compressed, NewRecord, ProducerFields};
    use crate::batch::{BatchHeader, Compression, HEADER_BYTES, LOG_APPEND_TIME_FLAG};
    use bytes::Bytes;
    use proptest::prelude::*;

    const NOW: i64 = 1_700_000_000_000;

    fn rules() -> RecordRules {
        RecordRules::defaults(NOW)
    }

    fn records(keys: bool) -> Vec<NewRecord> {
        (0..5)
            .map(|i| NewRecord {
                key: keys.then(|| Bytes::from(format!("key-{i}"))),
                value: Some(Bytes::from(format!("value-{i}"))),
                timestamp_ms: NOW - 10 + i,
                headers: vec![(Bytes::from_static(b"h"), Some(Bytes::from_static(b"x")))],
            })
            .collect()
    }

    fn batch(codec: Compression, keys: bool) -> Vec<u8> {
        build_batch_compressed(&records(keys), ProducerFields::NONE, codec)
            .unwrap()
            .to_vec()
    }

    fn check(b: &[u8], rules: &RecordRules) -> Result<RecordsSeen, BatchError> {
        check_records(b, &BatchHeader::parse(b).unwrap(), rules)
    }

    /// An uncompressed batch whose record section is `section`, claiming `count` records.
    fn with_section(section: &[u8], count: i32) -> Vec<u8> {
        let mut b = batch(Compression::None, true)[..HEADER_BYTES].to_vec();
        b[57..61].copy_from_slice(&count.to_be_bytes());
        b.extend_from_slice(section);
        b
    }

    fn malformed_reason(r: Result<RecordsSeen, BatchError>) -> &'static str {
        match r {
            Err(BatchError::MalformedRecord { reason, .. }) => reason,
            other => panic!("expected a malformed record, got {other:?}"),
        }
    }

    #[test]
    fn well_formed_batches_pass_with_every_codec() {
        for codec in Compression::ALL {
            let seen = check(&batch(codec, true), &rules()).unwrap();
            assert_eq!(seen.max_timestamp, NOW - 6, "{codec:?}");
        }
    }

    #[test]
    fn record_counts_that_disagree_with_the_records_are_malformed() {
        let b = batch(Compression::None, true);
        let section = &b[HEADER_BYTES..];
        assert!(
            malformed_reason(check(&with_section(section, 6), &rules())).contains("premature EOF")
        );
        assert!(malformed_reason(check(&with_section(section, 4), &rules())).contains("remaining"));
    }

    #[test]
    fn broken_varints_and_lengths_are_malformed() {
        // length 3, then attributes, timestamp delta and offset delta, then nothing.
        let cut = [0x06, 0x00, 0x00, 0x00];
        assert!(malformed_reason(check(&with_section(&cut, 1), &rules())).contains("premature EOF"));
        let too_long = [0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
        assert_eq!(
            malformed_reason(check(&with_section(&too_long, 1), &rules())),
            "Varint is too long"
        );
        let negative_length = [0x01];
        assert!(
            malformed_reason(check(&with_section(&negative_length, 1), &rules()))
                .contains("negative record size")
        );
        // length 6: attributes, ts 0, offset 0, key -1, value -1, headers -1.
        let negative_headers = [0x0c, 0x00, 0x00, 0x00, 0x01, 0x01, 0x01];
        assert!(
            malformed_reason(check(&with_section(&negative_headers, 1), &rules()))
                .contains("headers")
        );
        // length 8: ..., headers 1, header key -1.
        let null_header_key = [0x10, 0x00, 0x00, 0x00, 0x01, 0x01, 0x02, 0x01, 0x01];
        assert!(
            malformed_reason(check(&with_section(&null_header_key, 1), &rules()))
                .contains("header key")
        );
        // length 7 for six bytes of fields, then one stray byte inside the record.
        let short_fields = [0x0e, 0x00, 0x00, 0x00, 0x01, 0x01, 0x00, 0x00];
        assert!(
            malformed_reason(check(&with_section(&short_fields, 1), &rules())).contains("fill")
        );
    }

    #[test]
    fn offset_deltas_must_count_up_from_zero() {
        let mut b = batch(Compression::None, true);
        // The first record: length, attributes, timestamp delta (0), offset delta.
        let offset_delta_at = HEADER_BYTES + 3;
        assert_eq!(b[offset_delta_at], 0);
        b[offset_delta_at] = 0x02; // zigzag 1
        match check(&b, &rules()) {
            Err(BatchError::RecordsRefused { errors, count }) => {
                assert_eq!(count, 1);
                assert_eq!(errors[0].index, 0);
                assert_eq!(errors[0].kind, RecordErrorKind::InvalidRecord);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn compacted_topics_refuse_records_without_keys() {
        let compacted = RecordRules {
            key_required: true,
            ..rules()
        };
        assert!(check(&batch(Compression::Lz4, true), &compacted).is_ok());
        match check(&batch(Compression::Lz4, false), &compacted) {
            Err(BatchError::RecordsRefused { errors, count }) => {
                assert_eq!(count, 5);
                assert_eq!(errors.len(), 5);
                assert!(errors[0].message.contains("without key"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn create_times_outside_the_window_are_invalid_timestamps() {
        let narrow = RecordRules {
            timestamp_before_max_ms: 7,
            timestamp_after_max_ms: 0,
            ..rules()
        };
        match check(&batch(Compression::Gzip, true), &narrow) {
            Err(BatchError::RecordsRefused { errors, count }) => {
                assert_eq!(count, 3, "records at now-10, now-9 and now-8");
                assert!(errors
                    .iter()
                    .all(|e| e.kind == RecordErrorKind::InvalidTimestamp));
                assert_eq!(
                    errors.iter().map(|e| e.index).collect::<Vec<_>>(),
                    [0, 1, 2]
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_producer_may_not_claim_log_append_time() {
        let mut b = batch(Compression::None, true);
        let attributes = i16::from_be_bytes([b[21], b[22]]) | LOG_APPEND_TIME_FLAG;
        b[21..23].copy_from_slice(&attributes.to_be_bytes());
        let log_append = RecordRules {
            timestamp_type: TimestampType::LogAppendTime,
            ..rules()
        };
        assert!(matches!(
            check(&b, &log_append),
            Err(BatchError::RecordsRefused { errors, .. }) if errors[0].kind == RecordErrorKind::InvalidTimestamp
        ));
    }

    #[test]
    fn corrupt_compressed_data_is_reported_as_such() {
        for codec in [
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let mut b = batch(codec, true);
            let middle = HEADER_BYTES + (b.len() - HEADER_BYTES) / 2;
            for byte in &mut b[middle..] {
                *byte = 0x5a;
            }
            let result = check(&b, &rules());
            assert!(
                matches!(
                    result,
                    Err(BatchError::BadCompressedData { .. })
                        | Err(BatchError::MalformedRecord { .. })
                ),
                "{codec:?}: {result:?}"
            );
        }
    }

    /// The full walk alone, without the clean walk in front of it.
    fn full_walk(b: &[u8], rules: &RecordRules) -> Result<RecordsSeen, BatchError> {
        let header = BatchHeader::parse(b).unwrap();
        walk_section(Section::of(b, &header)?, &header, rules)
    }

    #[test]
    fn the_clean_walk_takes_a_clean_batch_and_leaves_a_broken_one() {
        let b = batch(Compression::None, true);
        let header = BatchHeader::parse(&b).unwrap();
        let records = &b[HEADER_BYTES..];
        assert_eq!(
            super::clean_max_timestamp(records, &header, &rules()),
            Some(NOW - 6)
        );
        let compacted = RecordRules {
            key_required: true,
            ..rules()
        };
        let keyless = batch(Compression::None, false);
        let keyless_header = BatchHeader::parse(&keyless).unwrap();
        assert_eq!(
            super::clean_max_timestamp(&keyless[HEADER_BYTES..], &keyless_header, &compacted),
            None
        );
        assert_eq!(
            super::clean_max_timestamp(&records[..records.len() - 1], &header, &rules()),
            None
        );
    }

    /// Records of every shape the walk reads: keys or none, values or none, headers with null
    /// values, timestamps before and after the batch's first and far from it.
    fn varied_records(count: usize, seed: u64) -> Vec<NewRecord> {
        (0..count as u64)
            .map(|i| {
                let shape = seed.wrapping_mul(31).wrapping_add(i * 7);
                NewRecord {
                    key: (shape % 3 != 0).then(|| Bytes::from(vec![b'k'; (shape % 150) as usize])),
                    value: (shape % 5 != 0)
                        .then(|| Bytes::from(vec![b'v'; (shape % 300) as usize])),
                    timestamp_ms: match shape % 4 {
                        0 => -1,
                        1 => NOW - (shape % 100_000) as i64,
                        2 => NOW + (shape % 1_000) as i64,
                        _ => NOW - 3,
                    },
                    headers: (0..shape % 3)
                        .map(|h| {
                            (
                                Bytes::from(format!("h{h}")),
                                (h % 2 == 0).then(|| Bytes::from_static(b"x")),
                            )
                        })
                        .collect(),
                }
            })
            .collect()
    }

    /// Where each record of a well-formed uncompressed batch starts (its length varint).
    fn record_starts(b: &[u8]) -> Vec<usize> {
        let mut starts = Vec::new();
        let mut at = HEADER_BYTES;
        while at < b.len() {
            starts.push(at);
            let (mut bits, mut width) = (0u32, 0);
            loop {
                let byte = b[at + width];
                bits |= ((byte & 0x7f) as u32) << (7 * width);
                width += 1;
                if byte & 0x80 == 0 {
                    break;
                }
            }
            let length = ((bits >> 1) as i32) ^ -((bits & 1) as i32);
            at += width + length as usize;
        }
        starts
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2_000))]
        /// Whatever the clean walk accepts, the full walk accepts with the same result, and what
        /// it leaves the full walk reports: mutated batches under rules that refuse some records.
        #[test]
        fn checking_a_batch_answers_what_the_full_walk_answers(
            count in 1usize..40,
            seed in any::<u64>(),
            mutations in proptest::collection::vec((any::<usize>(), any::<usize>(), any::<u8>()), 0..3),
            key_required in any::<bool>(),
            before in prop_oneof![Just(i64::MAX), 0i64..200_000],
            after in prop_oneof![Just(i64::MAX), 0i64..2_000],
            log_append_time in any::<bool>(),
        ) {
            let mut b = build_batch_compressed(
                &varied_records(count, seed),
                ProducerFields::NONE,
                Compression::None,
            )
            .unwrap()
            .to_vec();
            // Most mutations land in a record's fields before its value (length, attributes,
            // timestamp delta, offset delta, key), where a changed byte changes what the walk
            // reads rather than only what a value holds; some change the record count.
            let starts = record_starts(&b);
            for (place, within, byte) in mutations {
                match place % 8 {
                    0 => {
                        let count = i32::from_be_bytes(b[57..61].try_into().unwrap());
                        let count = count + if within % 2 == 0 { 1 } else { -1 };
                        b[57..61].copy_from_slice(&count.to_be_bytes());
                    }
                    1 => {
                        let at = HEADER_BYTES + place % (b.len() - HEADER_BYTES);
                        b[at] = byte;
                    }
                    _ => {
                        let at = (starts[place % starts.len()] + within % 8).min(b.len() - 1);
                        b[at] = [0x00, 0x01, 0x02, 0x7f, 0x80, 0xff, byte][within % 7];
                    }
                }
            }
            let rules = RecordRules {
                key_required,
                timestamp_type: if log_append_time {
                    TimestampType::LogAppendTime
                } else {
                    TimestampType::CreateTime
                },
                timestamp_before_max_ms: before,
                timestamp_after_max_ms: after,
                ..rules()
            };
            prop_assert_eq!(check(&b, &rules), full_walk(&b, &rules));
        }

        #[test]
        fn any_mutation_of_any_batch_is_answered_without_panicking(
            codec in 0usize..5,
            at in 0usize..400,
            byte in any::<u8>(),
        ) {
            let mut b = batch(Compression::ALL[codec], true);
            let at = HEADER_BYTES + at % (b.len() - HEADER_BYTES);
            b[at] = byte;
            let _ = check(&b, &rules());
        }
    }
}
