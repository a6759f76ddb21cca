//! Up-conversion: a magic 0 or 1 message set from Produce v0–2 becomes one v2 batch, as
//! Kafka's `LogValidator` builds it when the log's format is v2 (every log since 3.0):
//! records keep their keys, values and (magic 1) timestamps, offset deltas run 0..n, and a
//! set with any compressed wrapper is compressed again with that wrapper's codec.
//!
//! The batch then takes the same path as a v2 batch from a new client (header, CRC and record
//! checks, LogAppendTime), so each rule lives in one place.

use super::{inflate, messages, Message, MAGIC_V1};
use crate::batch::build::{build_batch_compressed, NewRecord, ProducerFields};
use crate::batch::record_checks::{RecordError, RecordErrorKind, RECORD_ERRORS_MAX};
use crate::batch::{BatchError, Compression};
use bytes::Bytes;

/// The v2 batch holding every message of `set`, and how many messages it took.
pub fn up_convert(set: &[u8]) -> Result<(Bytes, usize), BatchError> {
    let outer = messages(set)?;
    if outer.is_empty() {
        return Err(BatchError::Empty);
    }
    let mut records = Vec::with_capacity(outer.len());
    let mut refused = Refusals::default();
    let mut codec = Compression::None;
    for wrapper in &outer {
        let wrapper_codec = legacy_compression(wrapper)?;
        if wrapper_codec == Compression::None {
            refused.check_timestamp_type(wrapper, records.len());
            records.push(new_record(wrapper));
            continue;
        }
        // LogValidator: a compressed set is one wrapper, alone.
        if outer.len() > 1 {
            return Err(invalid("Compressed outer record has more than one batch"));
        }
        codec = wrapper_codec;
        if wrapper.value.is_none() {
            return Err(invalid(
                "Found invalid compressed record set with null value",
            ));
        }
        let inflated = inflate(wrapper)?;
        let inner = messages(&inflated)?;
        check_wrapper_offset(wrapper, &inner)?;
        for m in &inner {
            let index = records.len();
            check_inner(wrapper, m, index, &mut refused)?;
            records.push(new_record(m));
        }
    }
    refused.into_result()?;
    let count = records.len();
    Ok((
        build_batch_compressed(&records, ProducerFields::NONE, codec)?,
        count,
    ))
}

fn invalid(reason: &str) -> BatchError {
    BatchError::InvalidLegacyMessage {
        reason: reason.to_string(),
    }
}

/// A wrapper's codec: zstd has no legacy form (Kafka: "Invalid wrapper compressionType found
/// in legacy deep record iterator", INVALID_RECORD); ids above 4 are unknown codecs.
fn legacy_compression(m: &Message<'_>) -> Result<Compression, BatchError> {
    match m.compression() {
        Err(BatchError::UnsupportedCompression { codec: 4 }) => Err(invalid(
            "Invalid wrapper compressionType found in legacy deep record iterator",
        )),
        other => other,
    }
}

/// Kafka's `DeepRecordsIterator`: an empty wrapper is invalid, and a magic 1 wrapper's offset
/// (the last inner message's absolute offset, or 0 from some librdkafka versions) cannot be
/// below the last inner message's relative offset. Inner offsets are otherwise not checked:
/// the set is rebuilt with offsets counting up from the log end.
fn check_wrapper_offset(wrapper: &Message<'_>, inner: &[Message<'_>]) -> Result<(), BatchError> {
    let Some(last) = inner.last() else {
        return Err(invalid("A compressed wrapper holds no message"));
    };
    if wrapper.magic == MAGIC_V1 && wrapper.offset != 0 && wrapper.offset < last.offset {
        return Err(invalid(
            "Found invalid wrapper offset in compressed v1 message set",
        ));
    }
    Ok(())
}

/// Kafka's checks of a wrapper's inner messages: no nested compression (refused outright),
/// and the wrapper's magic (a refused record).
fn check_inner(
    wrapper: &Message<'_>,
    m: &Message<'_>,
    index: usize,
    refused: &mut Refusals,
) -> Result<(), BatchError> {
    if m.compression()? != Compression::None {
        return Err(invalid(
            "Compressed outer record should not have an inner record with a compression attribute set",
        ));
    }
    if m.magic != wrapper.magic {
        refused.push(
            index,
            RecordErrorKind::InvalidRecord,
            format!(
                "Record has magic {} while its wrapper has magic {}",
                m.magic, wrapper.magic
            ),
        );
    }
    // An inner message of a LogAppendTime wrapper takes the wrapper's time and type.
    if wrapper.is_log_append_time() {
        refused.check_timestamp_type(wrapper, index);
    } else {
        refused.check_timestamp_type(m, index);
    }
    Ok(())
}

fn new_record(m: &Message<'_>) -> NewRecord {
    NewRecord {
        key: m.key.map(Bytes::copy_from_slice),
        value: m.value.map(Bytes::copy_from_slice),
        timestamp_ms: m.timestamp,
        headers: Vec::new(),
    }
}

/// Refused messages, reported as a v2 batch's refused records are.
#[derive(Default)]
struct Refusals {
    errors: Vec<RecordError>,
    count: usize,
}

impl Refusals {
    fn push(&mut self, index: usize, kind: RecordErrorKind, message: String) {
        self.count += 1;
        if self.errors.len() < RECORD_ERRORS_MAX {
            self.errors.push(RecordError {
                index: index as i32,
                kind,
                message,
            });
        }
    }

    /// A producer may not claim LogAppendTime (Kafka's `validateTimestamp`).
    fn check_timestamp_type(&mut self, m: &Message<'_>, index: usize) {
        if m.is_log_append_time() {
            self.push(
                index,
                RecordErrorKind::InvalidTimestamp,
                "Invalid timestamp type in message. Producer should not set timestamp type to LogAppendTime.".into(),
            );
        }
    }

    fn into_result(self) -> Result<(), BatchError> {
        if self.errors.is_empty() {
            return Ok(());
        }
        Err(BatchError::RecordsRefused {
            errors: self.errors,
            count: self.count,
        })
    }
}
