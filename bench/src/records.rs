//! Record batches as the bench writes and reads them.
//!
//! The load generator shares the machine with the broker, so its own cost per record matters:
//! uncompressed batches are encoded and read here directly (one pass, no per-record
//! allocation); compressed ones go through the codec crate's encoder and decoder.

use crate::transactions::BatchProducer;
use anyhow::Result;
use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

/// The header every bench record carries: send time (µs since the epoch), producer, sequence.
pub const BENCH_HEADER: &str = "fb";
const HEADER_BYTES: usize = 61;

/// One record to send.
pub struct OutRecord {
    pub key: Option<Bytes>,
    pub value: Bytes,
    pub timestamp_ms: i64,
    pub tag: [u8; 16],
}

/// The bench's tag of a received record, and whether its value is `expected`.
pub struct Tagged {
    pub sent_us: u64,
    pub producer: u32,
    pub seq: u32,
    pub value_ok: bool,
}

fn put_varlong(out: &mut BytesMut, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        out.put_u8((z as u8) | 0x80);
        z >>= 7;
    }
    out.put_u8(z as u8);
}

fn varlong_len(v: i64) -> usize {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    let mut n = 1;
    while z >= 0x80 {
        z >>= 7;
        n += 1;
    }
    n
}

/// Encodes one v2 batch (base offset 0, no producer id).
pub fn encode_batch(
    records: &[OutRecord],
    compression: Compression,
    producer: Option<BatchProducer>,
) -> Result<Bytes> {
    if compression != Compression::None {
        return encode_with_codec(records, compression, producer);
    }
    let base_ts = records.iter().map(|r| r.timestamp_ms).min().unwrap_or(0);
    let max_ts = records.iter().map(|r| r.timestamp_ms).max().unwrap_or(0);
    let size_hint: usize = records.iter().map(|r| r.value.len() + 48).sum();
    let mut out = BytesMut::with_capacity(HEADER_BYTES + size_hint);
    out.put_i64(0);
    out.put_i32(0); // length, patched
    out.put_i32(-1);
    out.put_u8(2);
    out.put_u32(0); // crc, patched
                    // Attributes: a transactional producer's batches carry bit 4.
    out.put_i16(if producer.is_some() { 0x10 } else { 0 });
    out.put_i32(records.len() as i32 - 1);
    out.put_i64(base_ts);
    out.put_i64(max_ts);
    let p = producer.unwrap_or(BatchProducer {
        producer_id: -1,
        producer_epoch: -1,
        base_sequence: -1,
    });
    out.put_i64(p.producer_id);
    out.put_i16(p.producer_epoch);
    out.put_i32(p.base_sequence);
    out.put_i32(records.len() as i32);
    for (i, r) in records.iter().enumerate() {
        let ts_delta = r.timestamp_ms - base_ts;
        let key_len = r.key.as_ref().map(|k| k.len() as i64).unwrap_or(-1);
        let body = 1
            + varlong_len(ts_delta)
            + varlong_len(i as i64)
            + varlong_len(key_len)
            + key_len.max(0) as usize
            + varlong_len(r.value.len() as i64)
            + r.value.len()
            + varlong_len(1)
            + varlong_len(BENCH_HEADER.len() as i64)
            + BENCH_HEADER.len()
            + varlong_len(16)
            + 16;
        put_varlong(&mut out, body as i64);
        out.put_u8(0);
        put_varlong(&mut out, ts_delta);
        put_varlong(&mut out, i as i64);
        put_varlong(&mut out, key_len);
        if let Some(k) = &r.key {
            out.put_slice(k);
        }
        put_varlong(&mut out, r.value.len() as i64);
        out.put_slice(&r.value);
        put_varlong(&mut out, 1);
        put_varlong(&mut out, BENCH_HEADER.len() as i64);
        out.put_slice(BENCH_HEADER.as_bytes());
        put_varlong(&mut out, 16);
        out.put_slice(&r.tag);
    }
    let len = (out.len() - 12) as i32;
    out[8..12].copy_from_slice(&len.to_be_bytes());
    let crc = crc32c::crc32c(&out[21..]);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    Ok(out.freeze())
}

fn encode_with_codec(
    records: &[OutRecord],
    compression: Compression,
    producer: Option<BatchProducer>,
) -> Result<Bytes> {
    let records: Vec<Record> = records
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let mut headers = IndexMap::with_capacity(1);
            headers.insert(
                StrBytes::from_static_str(BENCH_HEADER),
                Some(Bytes::copy_from_slice(&r.tag)),
            );
            Record {
                transactional: producer.is_some(),
                control: false,
                delete_horizon: false,
                partition_leader_epoch: -1,
                producer_id: producer.map_or(-1, |p| p.producer_id),
                producer_epoch: producer.map_or(-1, |p| p.producer_epoch),
                timestamp_type: TimestampType::Creation,
                // The encoder starts a new batch when offset - sequence changes.
                offset: i as i64,
                sequence: producer.map_or(i as i32 - 1, |p| p.base_sequence + i as i32),
                timestamp: r.timestamp_ms,
                key: r.key.clone(),
                value: Some(r.value.clone()),
                headers,
            }
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        &records,
        &RecordEncodeOptions {
            version: 2,
            compression,
        },
    )?;
    Ok(buf.freeze())
}

struct Cursor<'a> {
    buf: &'a [u8],
    at: usize,
}

impl Cursor<'_> {
    fn varlong(&mut self) -> Option<i64> {
        let mut v: u64 = 0;
        for shift in (0..64).step_by(7) {
            let b = *self.buf.get(self.at)?;
            self.at += 1;
            v |= ((b & 0x7f) as u64) << shift;
            if b & 0x80 == 0 {
                return Some(((v >> 1) as i64) ^ -((v & 1) as i64));
            }
        }
        None
    }

    fn bytes(&mut self, len: i64) -> Option<&[u8]> {
        if len < 0 {
            return Some(&[]);
        }
        let end = self.at.checked_add(len as usize)?;
        let s = self.buf.get(self.at..end)?;
        self.at = end;
        Some(s)
    }
}

fn parse_tag(t: &[u8]) -> Option<(u64, u32, u32)> {
    (t.len() == 16).then(|| {
        (
            u64::from_be_bytes(t[0..8].try_into().expect("8 bytes")),
            u32::from_be_bytes(t[8..12].try_into().expect("4 bytes")),
            u32::from_be_bytes(t[12..16].try_into().expect("4 bytes")),
        )
    })
}

/// The tags of a batch's records; `None` for a record without one (or an undecodable batch).
pub fn tags(batch: &Bytes, expected: &[u8]) -> Vec<Option<Tagged>> {
    let compressed =
        batch.len() >= HEADER_BYTES && i16::from_be_bytes([batch[21], batch[22]]) & 0x7 != 0;
    if compressed {
        return tags_with_codec(batch, expected);
    }
    let count = if batch.len() >= HEADER_BYTES {
        i32::from_be_bytes(batch[57..61].try_into().expect("4 bytes")).max(0) as usize
    } else {
        0
    };
    let mut c = Cursor {
        buf: batch,
        at: HEADER_BYTES,
    };
    let mut out = Vec::with_capacity(count);
    for _ in 0..count {
        match tag_of_record(&mut c, expected) {
            Some(t) => out.push(t),
            None => {
                out.push(None);
                break;
            }
        }
    }
    out
}

fn tag_of_record(c: &mut Cursor<'_>, expected: &[u8]) -> Option<Option<Tagged>> {
    let len = c.varlong()?;
    let end = c.at.checked_add(usize::try_from(len).ok()?)?;
    c.at += 1; // attributes
    c.varlong()?; // timestamp delta
    c.varlong()?; // offset delta
    let key_len = c.varlong()?;
    c.bytes(key_len)?;
    let value_len = c.varlong()?;
    let value_ok = c.bytes(value_len)? == expected;
    let headers = c.varlong()?;
    let mut found = None;
    for _ in 0..headers {
        let k_len = c.varlong()?;
        let k = c.bytes(k_len)?.to_vec();
        let v_len = c.varlong()?;
        let v = c.bytes(v_len)?;
        if k == BENCH_HEADER.as_bytes() {
            found = parse_tag(v);
        }
    }
    c.at = end;
    Some(found.map(|(sent_us, producer, seq)| Tagged {
        sent_us,
        producer,
        seq,
        value_ok,
    }))
}

fn tags_with_codec(batch: &Bytes, expected: &[u8]) -> Vec<Option<Tagged>> {
    let mut b = batch.clone();
    let Ok(set) = RecordBatchDecoder::decode(&mut b) else {
        return vec![None];
    };
    set.records
        .iter()
        .map(|r| {
            let tag = r
                .headers
                .get(&StrBytes::from_static_str(BENCH_HEADER))
                .cloned()
                .flatten()?;
            let (sent_us, producer, seq) = parse_tag(&tag)?;
            Some(Tagged {
                sent_us,
                producer,
                seq,
                value_ok: r.value.as_deref() == Some(expected),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(n: usize) -> Vec<OutRecord> {
        (0..n)
            .map(|i| OutRecord {
                key: (i % 2 == 0).then(|| Bytes::from(format!("k{i}"))),
                value: Bytes::from_static(b"the value"),
                timestamp_ms: 1_700_000_000_000 + i as i64,
                tag: {
                    let mut t = [0u8; 16];
                    t[0..8].copy_from_slice(&(1000 + i as u64).to_be_bytes());
                    t[12..16].copy_from_slice(&(i as u32).to_be_bytes());
                    t
                },
            })
            .collect()
    }

    #[test]
    fn the_direct_encoder_agrees_with_the_codec_crate() {
        let records = sample(50);
        let mine = encode_batch(&records, Compression::None, None).unwrap();
        let mut b = mine.clone();
        let set = RecordBatchDecoder::decode(&mut b).expect("the codec reads the direct encoding");
        assert_eq!(set.records.len(), 50);
        for (i, r) in set.records.iter().enumerate() {
            assert_eq!(r.offset, i as i64);
            assert_eq!(r.timestamp, 1_700_000_000_000 + i as i64);
            assert_eq!(r.value.as_deref(), Some(&b"the value"[..]));
            assert_eq!(r.key.is_some(), i % 2 == 0);
        }
        for codec in [Compression::None, Compression::Zstd, Compression::Lz4] {
            let batch = encode_batch(&records, codec, None).unwrap();
            let found = tags(&batch, b"the value");
            assert_eq!(found.len(), 50, "{codec:?}");
            for (i, t) in found.iter().enumerate() {
                let t = t.as_ref().expect("tagged");
                assert_eq!((t.sent_us, t.seq), (1000 + i as u64, i as u32));
                assert!(t.value_ok);
            }
            assert!(tags(&batch, b"other")
                .iter()
                .all(|t| !t.as_ref().unwrap().value_ok));
        }
    }
}
