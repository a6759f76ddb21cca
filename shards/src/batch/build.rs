//! Building and reading the records inside an uncompressed v2 batch.
//!
//! The data path never looks inside a batch. These are for the batches the broker writes itself
//! (group metadata and offsets), for tests and benchmarks, and for the few places that need
//! record-level answers (timestamp lookups, compaction) on uncompressed data.

use super::{BatchError, BatchHeader, Compression, HEADER_BYTES, MAGIC_V2};
use bytes::{BufMut, Bytes, BytesMut};

/// One record to put in a batch.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NewRecord {
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    pub timestamp_ms: i64,
    pub headers: Vec<(Bytes, Option<Bytes>)>,
}

/// Producer identity carried by a batch (idempotent producers); `NONE` for plain producers.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct ProducerFields {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
}

impl ProducerFields {
    pub const NONE: ProducerFields = ProducerFields {
        producer_id: -1,
        producer_epoch: -1,
        base_sequence: -1,
    };
}

/// Encodes `records` as one uncompressed v2 batch with base offset 0.
pub fn build_batch(records: &[NewRecord], producer: ProducerFields) -> Bytes {
    build_batch_compressed(records, producer, Compression::None)
        .expect("an uncompressed batch needs no codec")
}

/// Encodes `records` as one uncompressed v2 batch of a producer's transaction (attribute bit 4):
/// what a transactional producer sends, and the group coordinator's transactional offset commits.
pub fn build_transactional_batch(records: &[NewRecord], producer: ProducerFields) -> Bytes {
    let mut out = BytesMut::from(&build_batch(records, producer)[..]);
    let attributes = i16::from_be_bytes([out[21], out[22]]) | 0x10;
    out[21..23].copy_from_slice(&attributes.to_be_bytes());
    let crc = super::crc::crc32c(&out[21..]);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    out.freeze()
}

/// Encodes `records` as one v2 batch with base offset 0, its record section compressed with
/// `codec`. Records with no timestamp (`-1`, from magic 0 messages) keep none.
pub fn build_batch_compressed(
    records: &[NewRecord],
    producer: ProducerFields,
    codec: Compression,
) -> Result<Bytes, BatchError> {
    assert!(!records.is_empty(), "a batch holds at least one record");
    let base_timestamp = records[0].timestamp_ms;
    let max_timestamp = records.iter().map(|r| r.timestamp_ms).max().unwrap_or(-1);
    let mut body = BytesMut::new();
    for (delta, record) in records.iter().enumerate() {
        encode_record(&mut body, record, delta as i32, base_timestamp);
    }
    let section = match codec {
        Compression::None => body.freeze(),
        codec => Bytes::from(super::codec::compress(codec, &body)?),
    };
    let mut out = BytesMut::with_capacity(HEADER_BYTES + section.len());
    out.put_i64(0); // baseOffset: assigned by the log
    out.put_i32((HEADER_BYTES - 12 + section.len()) as i32);
    out.put_i32(-1); // partitionLeaderEpoch: stamped by the log
    out.put_u8(MAGIC_V2);
    out.put_u32(0); // crc, filled below
    out.put_i16(codec as i16); // attributes: the codec, create time
    out.put_i32(records.len() as i32 - 1);
    out.put_i64(base_timestamp);
    out.put_i64(max_timestamp);
    out.put_i64(producer.producer_id);
    out.put_i16(producer.producer_epoch);
    out.put_i32(producer.base_sequence);
    out.put_i32(records.len() as i32);
    out.extend_from_slice(&section);
    let crc = super::crc::crc32c(&out[21..]);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    Ok(out.freeze())
}

fn encode_record(out: &mut BytesMut, record: &NewRecord, offset_delta: i32, base_ts: i64) {
    let mut body = BytesMut::new();
    body.put_u8(0); // attributes, unused
    put_varlong(&mut body, record.timestamp_ms - base_ts);
    put_varint(&mut body, offset_delta);
    put_nullable(&mut body, record.key.as_deref());
    put_nullable(&mut body, record.value.as_deref());
    put_varint(&mut body, record.headers.len() as i32);
    for (key, value) in &record.headers {
        put_nullable(&mut body, Some(key));
        put_nullable(&mut body, value.as_deref());
    }
    put_varint(out, body.len() as i32);
    out.extend_from_slice(&body);
}

fn put_nullable(out: &mut BytesMut, bytes: Option<&[u8]>) {
    match bytes {
        None => put_varint(out, -1),
        Some(b) => {
            put_varint(out, b.len() as i32);
            out.extend_from_slice(b);
        }
    }
}

fn put_varint(out: &mut BytesMut, v: i32) {
    put_varlong(out, v as i64)
}

fn put_varlong(out: &mut BytesMut, v: i64) {
    let mut zigzag = ((v << 1) ^ (v >> 63)) as u64;
    loop {
        if zigzag < 0x80 {
            out.put_u8(zigzag as u8);
            return;
        }
        out.put_u8((zigzag as u8 & 0x7f) | 0x80);
        zigzag >>= 7;
    }
}

/// A record read back from an uncompressed batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub offset: i64,
    pub timestamp_ms: i64,
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
}

/// Decodes the records of an uncompressed batch (`batch` is the whole batch). Headers are
/// skipped. Compressed batches are the caller's to decompress first.
pub fn decode_records(batch: &Bytes) -> Result<Vec<Record>, BatchError> {
    let header = BatchHeader::parse(batch)?;
    decode_record_section(&header, &batch.slice(HEADER_BYTES..))
}

/// Decodes records from `records` (the bytes after the header, decompressed when needed).
pub fn decode_record_section(
    header: &BatchHeader,
    records: &Bytes,
) -> Result<Vec<Record>, BatchError> {
    Ok(super::records::record_spans(records, header.record_count)?
        .into_iter()
        .map(|r| Record {
            offset: header.base_offset + r.offset_delta as i64,
            timestamp_ms: header.base_timestamp + r.timestamp_delta,
            key: r.key.map(|k| records.slice(k)),
            value: r.value.map(|v| records.slice(v)),
        })
        .collect())
}
