//! The record walk of an uncompressed batch in which nothing is wrong, the batch nearly every
//! producer sends: the same reads and rules as the full walk (`record_checks.rs`), on the
//! slice, with no error to describe. Any doubt — a field crossing its record's end, a varint
//! too long, a rule broken, a producer claiming LogAppendTime — gives `None`, and the caller
//! runs the full walk, which finds and reports it; so whatever this accepts, the full walk
//! accepts with the same result (a property test holds the two together).
//!
//! Why apart: with 100-byte records the walk was 12% of the broker's CPU (`perf record` of
//! `ferrite-bench produce --size 100`), most of it carrying the full walk's errors and
//! section reads through every field.

use super::record_checks::RecordRules;
use super::{BatchHeader, TimestampType};

/// The largest record timestamp (`-1` when every record has none) of a clean uncompressed
/// record section `records`, or `None` when the full walk must decide.
#[inline]
pub(super) fn clean_max_timestamp(
    records: &[u8],
    header: &BatchHeader,
    rules: &RecordRules,
) -> Option<i64> {
    if header.timestamp_type() == TimestampType::LogAppendTime {
        return None;
    }
    let window = match rules.timestamp_type {
        TimestampType::CreateTime => (
            rules.now_ms.saturating_sub(rules.timestamp_before_max_ms),
            rules.now_ms.saturating_add(rules.timestamp_after_max_ms),
        ),
        // The topic stamps its own time: any CreateTime a producer sends is let through.
        TimestampType::LogAppendTime => (i64::MIN, i64::MAX),
    };
    let mut at = 0usize;
    let mut max_timestamp = -1i64;
    for index in 0..header.record_count.max(0) {
        let length = varint(records, &mut at)?;
        let end = at.checked_add(usize::try_from(length).ok()?)?;
        let record = records.get(at..end)?;
        at = end;
        let (timestamp_delta, offset_delta, has_key) = record_fields(record)?;
        if offset_delta != index || (rules.key_required && !has_key) {
            return None;
        }
        let timestamp = header.base_timestamp.wrapping_add(timestamp_delta);
        if timestamp != -1 && (timestamp < window.0 || timestamp > window.1) {
            return None;
        }
        max_timestamp = max_timestamp.max(timestamp);
    }
    (at == records.len()).then_some(max_timestamp)
}

/// A record's fields after its length, as `DefaultRecord.readFrom` reads them, which must fill
/// `record` exactly: timestamp delta, offset delta, and whether it has a key.
#[inline(always)]
fn record_fields(record: &[u8]) -> Option<(i64, i32, bool)> {
    let mut at = 1; // attributes: unused in v2
    if record.is_empty() {
        return None;
    }
    let timestamp_delta = varlong(record, &mut at)?;
    let offset_delta = varint(record, &mut at)?;
    let has_key = skip_nullable(record, &mut at)?;
    skip_nullable(record, &mut at)?;
    let headers = varint(record, &mut at)?;
    for _ in 0..headers.max(-1) {
        // A header key may not be null; its value may.
        let key_length = usize::try_from(varint(record, &mut at)?).ok()?;
        at = at.checked_add(key_length)?;
        skip_nullable(record, &mut at)?;
    }
    (headers >= 0 && at == record.len()).then_some((timestamp_delta, offset_delta, has_key))
}

/// Skips a length-prefixed field inside `record`; `Some(false)` when it is null.
#[inline(always)]
fn skip_nullable(record: &[u8], at: &mut usize) -> Option<bool> {
    let length = varint(record, at)?;
    if length == -1 {
        return Some(false);
    }
    let end = at.checked_add(usize::try_from(length).ok()?)?;
    (end <= record.len()).then(|| {
        *at = end;
        true
    })
}

/// A zigzag varint of at most 5 bytes, bits beyond 32 dropped as Kafka's `readVarint` does.
#[inline(always)]
fn varint(bytes: &[u8], at: &mut usize) -> Option<i32> {
    let value = varint_bits(bytes, at, 5)? as u32;
    Some(((value >> 1) as i32) ^ -((value & 1) as i32))
}

/// A zigzag varlong of at most 10 bytes.
#[inline(always)]
fn varlong(bytes: &[u8], at: &mut usize) -> Option<i64> {
    let value = varint_bits(bytes, at, 10)?;
    Some(((value >> 1) as i64) ^ -((value & 1) as i64))
}

/// The next varint's bits within `bytes`. One and two bytes are read first: a small record's
/// fields are one byte long, its length and its value's length two.
#[inline(always)]
fn varint_bits(bytes: &[u8], at: &mut usize, max_bytes: usize) -> Option<u64> {
    let first = *bytes.get(*at)?;
    if first < 0x80 {
        *at += 1;
        return Some(first as u64);
    }
    let second = *bytes.get(*at + 1)?;
    if second < 0x80 {
        *at += 2;
        return Some((first & 0x7f) as u64 | (second as u64) << 7);
    }
    let mut value = 0u64;
    for (i, &byte) in bytes.get(*at..)?.iter().take(max_bytes).enumerate() {
        value |= ((byte & 0x7f) as u64) << (7 * i);
        if byte & 0x80 == 0 {
            *at += i + 1;
            return Some(value);
        }
    }
    None
}
