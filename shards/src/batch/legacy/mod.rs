//! Magic 0 and magic 1 message sets: the record format before Kafka 0.11, still what Produce
//! v0–2 may carry and what Fetch v0–3 must return.
//!
//! The log stores v2 batches only. Old message sets are up-converted on produce (`up.rs`, as
//! Kafka's `LogValidator.convertAndAssignOffsets*`) and v2 batches down-converted for old
//! fetchers (`down.rs`, as Kafka's `RecordsUtil.downConvert`).
//!
//! ```text
//! message set: [offset i64, size i32, message]...
//! message v0:  crc u32 (CRC-32 of magic..end), magic i8, attributes i8, key bytes, value bytes
//! message v1:  crc u32, magic i8, attributes i8, timestamp i64, key bytes, value bytes
//! attributes:  bits 0-2 compression (none, gzip, snappy, lz4), bit 3 LogAppendTime (v1)
//! ```
//!
//! A compressed message set is one wrapper message whose value is the compressed inner set.
//! Magic 0 inner messages carry absolute offsets; magic 1 inner offsets are relative (0..n)
//! and the wrapper carries the absolute offset of the last one.

pub mod down;
mod lz4;
pub mod up;

use super::{BatchError, Compression};
use bytes::{BufMut, BytesMut};

pub const MAGIC_V0: u8 = 0;
pub const MAGIC_V1: u8 = 1;
/// offset and size: what precedes each message.
pub const LOG_OVERHEAD_BYTES: usize = 12;
/// crc, magic, attributes, key length, value length.
const MESSAGE_V0_OVERHEAD_BYTES: usize = 14;
/// v0's overhead plus the timestamp.
const MESSAGE_V1_OVERHEAD_BYTES: usize = 22;
/// Attribute bit 3 of a magic 1 message.
const LOG_APPEND_TIME_FLAG: u8 = 0x08;
/// The most a compressed wrapper's inner set may inflate to. Kafka sets no bound; converting
/// builds the new batch in memory, so one is needed: 32 MiB is 32 times the default
/// `max.message.bytes`, far more than old clients put in one request.
pub const LEGACY_INFLATED_BYTES_MAX: usize = 32 << 20;

/// One message of a magic 0 or 1 set, borrowed from the set's bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message<'a> {
    pub offset: i64,
    pub magic: u8,
    pub attributes: u8,
    /// `-1` (no timestamp) for magic 0.
    pub timestamp: i64,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
}

impl Message<'_> {
    pub fn compression(&self) -> Result<Compression, BatchError> {
        match self.attributes & 0x07 {
            0 => Ok(Compression::None),
            1 => Ok(Compression::Gzip),
            2 => Ok(Compression::Snappy),
            3 => Ok(Compression::Lz4),
            codec => Err(BatchError::UnsupportedCompression {
                codec: codec as u16,
            }),
        }
    }

    pub fn is_log_append_time(&self) -> bool {
        self.magic == MAGIC_V1 && self.attributes & LOG_APPEND_TIME_FLAG != 0
    }
}

fn corrupt(reason: String) -> BatchError {
    BatchError::CorruptLegacyMessage { reason }
}

fn be_i32(b: &[u8]) -> i32 {
    i32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

fn be_i64(b: &[u8]) -> i64 {
    i64::from_be_bytes(b[..8].try_into().expect("8 bytes"))
}

/// The messages of a set, each checked as Kafka's `LegacyRecord.ensureValid` checks it
/// (size, magic, CRC-32, key and value lengths). A message cut short at the end of the set is
/// dropped, not refused, as Kafka's `ByteBufferLogInputStream` drops it.
pub fn messages(set: &[u8]) -> Result<Vec<Message<'_>>, BatchError> {
    /// offset, size, crc and magic: what must be there to read a message's framing.
    const FRAMING_BYTES: usize = LOG_OVERHEAD_BYTES + 5;
    let mut out = Vec::new();
    let mut at = 0usize;
    while set.len() - at >= FRAMING_BYTES {
        let rest = &set[at..];
        let offset = be_i64(rest);
        let size = be_i32(&rest[8..]);
        if size < MESSAGE_V0_OVERHEAD_BYTES as i32 {
            return Err(corrupt(format!(
                "message size {size} is less than the minimum message overhead"
            )));
        }
        let end = LOG_OVERHEAD_BYTES + size as usize;
        let Some(body) = rest.get(LOG_OVERHEAD_BYTES..end) else {
            break;
        };
        out.push(message(offset, body)?);
        at += end;
    }
    Ok(out)
}

/// Reads one message body (after offset and size).
fn message(offset: i64, body: &[u8]) -> Result<Message<'_>, BatchError> {
    let stored = be_i32(body) as u32;
    let computed = crc32(&body[4..]);
    if stored != computed {
        return Err(corrupt(format!(
            "message is corrupt (stored crc = {stored}, computed crc = {computed})"
        )));
    }
    let magic = body[4];
    let attributes = body[5];
    let (timestamp, mut at) = match magic {
        MAGIC_V0 => (-1, 6),
        MAGIC_V1 if body.len() >= MESSAGE_V1_OVERHEAD_BYTES => (be_i64(&body[6..]), 14),
        MAGIC_V1 => {
            return Err(corrupt(format!(
                "magic 1 message of {} bytes is shorter than its overhead",
                body.len()
            )))
        }
        other => return Err(BatchError::BadMagic { magic: other }),
    };
    let key = delimited(body, &mut at)?;
    let value = delimited(body, &mut at)?;
    if at != body.len() {
        return Err(corrupt(format!(
            "message holds {} bytes beyond its value",
            body.len() - at
        )));
    }
    Ok(Message {
        offset,
        magic,
        attributes,
        timestamp,
        key,
        value,
    })
}

/// A length-prefixed field (`-1` is null).
fn delimited<'a>(body: &'a [u8], at: &mut usize) -> Result<Option<&'a [u8]>, BatchError> {
    let len = body
        .get(*at..*at + 4)
        .map(be_i32)
        .ok_or_else(|| corrupt("message is cut short in a length field".into()))?;
    *at += 4;
    if len < 0 {
        return Ok(None);
    }
    let field = body
        .get(*at..*at + len as usize)
        .ok_or_else(|| corrupt(format!("a {len}-byte field runs past the message")))?;
    *at += len as usize;
    Ok(Some(field))
}

/// CRC-32 (IEEE), which magic 0 and 1 messages use where v2 batches use CRC-32C.
fn crc32(data: &[u8]) -> u32 {
    let mut crc = flate2::Crc::new();
    crc.update(data);
    crc.sum()
}

/// Appends one message (offset, size, body) to `out`.
pub fn put_message(out: &mut BytesMut, m: &Message<'_>) {
    let overhead = match m.magic {
        MAGIC_V0 => MESSAGE_V0_OVERHEAD_BYTES,
        _ => MESSAGE_V1_OVERHEAD_BYTES,
    };
    let size = overhead + m.key.map_or(0, <[u8]>::len) + m.value.map_or(0, <[u8]>::len);
    out.reserve(LOG_OVERHEAD_BYTES + size);
    out.put_i64(m.offset);
    out.put_i32(size as i32);
    let crc_at = out.len();
    out.put_u32(0);
    out.put_u8(m.magic);
    out.put_u8(m.attributes);
    if m.magic == MAGIC_V1 {
        out.put_i64(m.timestamp);
    }
    for field in [m.key, m.value] {
        match field {
            None => out.put_i32(-1),
            Some(b) => {
                out.put_i32(b.len() as i32);
                out.put_slice(b);
            }
        }
    }
    let crc = crc32(&out[crc_at + 4..]);
    out[crc_at..crc_at + 4].copy_from_slice(&crc.to_be_bytes());
}

/// The compression bits a legacy message uses for `codec`; zstd has none (it needs v2).
fn legacy_codec_bits(codec: Compression) -> Option<u8> {
    match codec {
        Compression::None => Some(0),
        Compression::Gzip => Some(1),
        Compression::Snappy => Some(2),
        Compression::Lz4 => Some(3),
        Compression::Zstd => None,
    }
}

/// The inner message set of a compressed wrapper, inflated (at most
/// `LEGACY_INFLATED_BYTES_MAX`).
fn inflate(wrapper: &Message<'_>) -> Result<Vec<u8>, BatchError> {
    let codec = wrapper.compression()?;
    let data = wrapper.value.unwrap_or_default();
    if codec == Compression::Lz4 && wrapper.magic == MAGIC_V0 {
        let header = lz4::standard_header(data)?;
        let fixed = [&header[..], &data[header.len()..]].concat();
        return super::codec::decompress(codec, &fixed, LEGACY_INFLATED_BYTES_MAX);
    }
    super::codec::decompress(codec, data, LEGACY_INFLATED_BYTES_MAX)
}

/// `data` compressed for a wrapper of `magic`.
fn deflate(codec: Compression, magic: u8, data: &[u8]) -> Result<Vec<u8>, BatchError> {
    let mut packed = super::codec::compress(codec, data)?;
    if codec == Compression::Lz4 && magic == MAGIC_V0 {
        lz4::write_magic_v0_checksum(&mut packed);
    }
    Ok(packed)
}

/// The magic of a produce record set: the byte at offset 16 is a v2 batch's magic and a legacy
/// message's magic alike (offset 8 + size 4 + crc 4).
pub fn magic_of(records: &[u8]) -> Option<u8> {
    records.get(16).copied()
}

#[cfg(test)]
mod tests;
