//! Building and reading the records inside an uncompressed v2 batch.
//!
//! The data path never looks inside a batch. These are for the batches the broker writes itself
//! (group metadata and offsets), for tests and benchmarks, and for the few places that need
//! record-level answers (timestamp lookups, compaction) on uncompressed data.

use super::{BatchError, BatchHeader, HEADER_BYTES, MAGIC_V2};
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
    assert!(!records.is_empty(), "a batch holds at least one record");
    let base_timestamp = records.iter().map(|r| r.timestamp_ms).min().unwrap_or(0);
    let max_timestamp = records.iter().map(|r| r.timestamp_ms).max().unwrap_or(0);
    let mut body = BytesMut::new();
    for (delta, record) in records.iter().enumerate() {
        encode_record(&mut body, record, delta as i32, base_timestamp);
    }
    let mut out = BytesMut::with_capacity(HEADER_BYTES + body.len());
    out.put_i64(0); // baseOffset: assigned by the log
    out.put_i32((HEADER_BYTES - 12 + body.len()) as i32);
    out.put_i32(-1); // partitionLeaderEpoch: stamped by the log
    out.put_u8(MAGIC_V2);
    out.put_u32(0); // crc, filled below
    out.put_i16(0); // attributes: no compression, create time
    out.put_i32(records.len() as i32 - 1);
    out.put_i64(base_timestamp);
    out.put_i64(max_timestamp);
    out.put_i64(producer.producer_id);
    out.put_i16(producer.producer_epoch);
    out.put_i32(producer.base_sequence);
    out.put_i32(records.len() as i32);
    out.extend_from_slice(&body);
    let crc = crc32c::crc32c(&out[21..]);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    out.freeze()
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
    let mut cursor = Cursor {
        buf: batch,
        at: HEADER_BYTES,
    };
    decode_record_bodies(&mut cursor, &header)
}

/// Decodes records from `records` (the bytes after the header, decompressed when needed).
pub fn decode_record_section(
    header: &BatchHeader,
    records: &Bytes,
) -> Result<Vec<Record>, BatchError> {
    let mut cursor = Cursor {
        buf: records,
        at: 0,
    };
    decode_record_bodies(&mut cursor, header)
}

fn decode_record_bodies(
    cursor: &mut Cursor<'_>,
    header: &BatchHeader,
) -> Result<Vec<Record>, BatchError> {
    let count = header.record_count.max(0) as usize;
    let mut out = Vec::with_capacity(count.min(4096));
    for _ in 0..count {
        let len = cursor.varint()?;
        let end = cursor.at + usize::try_from(len).map_err(|_| cursor.corrupt())?;
        if end > cursor.buf.len() {
            return Err(cursor.corrupt());
        }
        cursor.skip(1)?; // attributes
        let timestamp_delta = cursor.varlong()?;
        let offset_delta = cursor.varint()?;
        let key = cursor.nullable()?;
        let value = cursor.nullable()?;
        cursor.at = end; // headers are skipped
        out.push(Record {
            offset: header.base_offset + offset_delta as i64,
            timestamp_ms: header.base_timestamp + timestamp_delta,
            key,
            value,
        });
    }
    Ok(out)
}

struct Cursor<'a> {
    buf: &'a Bytes,
    at: usize,
}

impl Cursor<'_> {
    fn corrupt(&self) -> BatchError {
        BatchError::TrailingBytes {
            len: self.buf.len().saturating_sub(self.at),
        }
    }

    fn skip(&mut self, n: usize) -> Result<(), BatchError> {
        if self.at + n > self.buf.len() {
            return Err(self.corrupt());
        }
        self.at += n;
        Ok(())
    }

    fn varlong(&mut self) -> Result<i64, BatchError> {
        let mut value: u64 = 0;
        for shift in (0..64).step_by(7) {
            let byte = *self.buf.get(self.at).ok_or_else(|| self.corrupt())?;
            self.at += 1;
            value |= ((byte & 0x7f) as u64) << shift;
            if byte & 0x80 == 0 {
                return Ok(((value >> 1) as i64) ^ -((value & 1) as i64));
            }
        }
        Err(self.corrupt())
    }

    fn varint(&mut self) -> Result<i32, BatchError> {
        let v = self.varlong()?;
        i32::try_from(v).map_err(|_| self.corrupt())
    }

    fn nullable(&mut self) -> Result<Option<Bytes>, BatchError> {
        let len = self.varint()?;
        if len < 0 {
            return Ok(None);
        }
        let end = self.at + len as usize;
        if end > self.buf.len() {
            return Err(self.corrupt());
        }
        let out = self.buf.slice(self.at..end);
        self.at = end;
        Ok(Some(out))
    }
}
