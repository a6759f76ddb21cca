//! Kafka's record formats in `__transaction_state` (`TransactionLogKey`, `TransactionLogValue`),
//! so transaction state is stored as Kafka stores it.
//!
//! Key, version 0: `version i16 | transactional_id string` (int16 length + UTF-8).
//! Value, version 0: `version i16 | producer_id i64 | producer_epoch i16 | timeout_ms i32 |
//! status i8 | partitions: nullable array of {topic string, partition ids array of i32} |
//! last_update_ms i64 | start_ms i64`. Version 1 has the same fields in the flexible encoding
//! (compact strings and arrays, empty tagged-field sections). Kafka 3.9 writes version 0
//! (version 1 needs `transaction.version` ≥ 1, which a 3.9 cluster does not enable), and so does
//! Ferrite; both are read. The partitions are null in state Empty. A null value is a
//! tombstone: the transactional id expired.

use super::state::TxnState;
use bytes::{Buf, BufMut, Bytes, BytesMut};
use std::collections::BTreeSet;

/// What one `__transaction_state` record says about a transactional id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnValue {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub timeout_ms: i32,
    pub state: TxnState,
    pub partitions: BTreeSet<(String, i32)>,
    pub last_update_ms: i64,
    pub start_ms: i64,
}

/// A record that does not read as these formats.
#[derive(Debug, thiserror::Error)]
#[error("not a transaction state record: {0}")]
pub struct Malformed(&'static str);

pub fn encode_key(transactional_id: &str) -> Bytes {
    let mut out = BytesMut::with_capacity(4 + transactional_id.len());
    out.put_i16(0);
    put_string(&mut out, transactional_id);
    out.freeze()
}

/// The transactional id of a key; `None` for another key version (Kafka skips those).
pub fn decode_key(mut b: Bytes) -> Result<Option<String>, Malformed> {
    if b.remaining() < 2 {
        return Err(Malformed("short key"));
    }
    if b.get_i16() != 0 {
        return Ok(None);
    }
    read_string(&mut b, false).map(Some)
}

impl TxnValue {
    /// Version 0.
    pub fn encode(&self) -> Bytes {
        let mut out = BytesMut::with_capacity(64);
        out.put_i16(0);
        out.put_i64(self.producer_id);
        out.put_i16(self.producer_epoch);
        out.put_i32(self.timeout_ms);
        out.put_i8(self.state.id());
        if self.state == TxnState::Empty {
            out.put_i32(-1);
        } else {
            let by_topic = self.by_topic();
            out.put_i32(by_topic.len() as i32);
            for (topic, partitions) in by_topic {
                put_string(&mut out, topic);
                out.put_i32(partitions.len() as i32);
                for p in partitions {
                    out.put_i32(p);
                }
            }
        }
        out.put_i64(self.last_update_ms);
        out.put_i64(self.start_ms);
        out.freeze()
    }

    fn by_topic(&self) -> Vec<(&str, Vec<i32>)> {
        let mut out: Vec<(&str, Vec<i32>)> = Vec::new();
        for (topic, p) in &self.partitions {
            match out.last_mut() {
                Some((t, ps)) if t == topic => ps.push(*p),
                _ => out.push((topic, vec![*p])),
            }
        }
        out
    }

    /// Versions 0 and 1.
    pub fn decode(mut b: Bytes) -> Result<TxnValue, Malformed> {
        if b.remaining() < 2 {
            return Err(Malformed("short value"));
        }
        let flexible = match b.get_i16() {
            0 => false,
            1 => true,
            _ => return Err(Malformed("unknown value version")),
        };
        if b.remaining() < 15 {
            return Err(Malformed("short value"));
        }
        let producer_id = b.get_i64();
        let producer_epoch = b.get_i16();
        let timeout_ms = b.get_i32();
        let state = TxnState::from_id(b.get_i8()).ok_or(Malformed("unknown state"))?;
        let mut partitions = BTreeSet::new();
        let topics = read_len(&mut b, flexible)?;
        for _ in 0..topics.unwrap_or(0) {
            let topic = read_string(&mut b, flexible)?;
            let count = read_len(&mut b, flexible)?.unwrap_or(0);
            for _ in 0..count {
                if b.remaining() < 4 {
                    return Err(Malformed("short partition list"));
                }
                partitions.insert((topic.clone(), b.get_i32()));
            }
            if flexible {
                skip_tags(&mut b)?;
            }
        }
        if b.remaining() < 16 {
            return Err(Malformed("short value"));
        }
        let last_update_ms = b.get_i64();
        let start_ms = b.get_i64();
        Ok(TxnValue {
            producer_id,
            producer_epoch,
            timeout_ms,
            state,
            partitions,
            last_update_ms,
            start_ms,
        })
    }
}

fn put_string(out: &mut BytesMut, s: &str) {
    out.put_i16(s.len() as i16);
    out.put_slice(s.as_bytes());
}

fn uvarint(b: &mut Bytes) -> Result<u64, Malformed> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        if !b.has_remaining() {
            return Err(Malformed("short varint"));
        }
        let byte = b.get_u8();
        v |= ((byte & 0x7f) as u64) << shift;
        if byte & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err(Malformed("varint too long"))
}

/// An array length: i32 (-1 null), or compact (length + 1, 0 null).
fn read_len(b: &mut Bytes, flexible: bool) -> Result<Option<usize>, Malformed> {
    if flexible {
        return Ok(uvarint(b)?.checked_sub(1).map(|n| n as usize));
    }
    if b.remaining() < 4 {
        return Err(Malformed("short array"));
    }
    let n = b.get_i32();
    Ok((n >= 0).then_some(n as usize))
}

fn read_string(b: &mut Bytes, flexible: bool) -> Result<String, Malformed> {
    let len = if flexible {
        uvarint(b)?.checked_sub(1).ok_or(Malformed("null string"))? as usize
    } else {
        if b.remaining() < 2 {
            return Err(Malformed("short string"));
        }
        usize::try_from(b.get_i16()).map_err(|_| Malformed("null string"))?
    };
    if b.remaining() < len {
        return Err(Malformed("short string"));
    }
    String::from_utf8(b.split_to(len).to_vec()).map_err(|_| Malformed("string not UTF-8"))
}

fn skip_tags(b: &mut Bytes) -> Result<(), Malformed> {
    for _ in 0..uvarint(b)? {
        uvarint(b)?;
        let len = uvarint(b)? as usize;
        if b.remaining() < len {
            return Err(Malformed("short tagged field"));
        }
        b.advance(len);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ongoing() -> TxnValue {
        TxnValue {
            producer_id: 4000,
            producer_epoch: 3,
            timeout_ms: 60_000,
            state: TxnState::Ongoing,
            partitions: [("a".into(), 0), ("a".into(), 2), ("b".into(), 1)]
                .into_iter()
                .collect(),
            last_update_ms: 1_700_000_000_123,
            start_ms: 1_700_000_000_000,
        }
    }

    #[test]
    fn values_round_trip_and_empty_has_null_partitions() {
        let v = ongoing();
        assert_eq!(TxnValue::decode(v.encode()).unwrap(), v);
        let empty = TxnValue {
            state: TxnState::Empty,
            partitions: BTreeSet::new(),
            start_ms: -1,
            ..ongoing()
        };
        let bytes = empty.encode();
        assert_eq!(&bytes[17..21], &(-1i32).to_be_bytes(), "null partitions");
        assert_eq!(TxnValue::decode(bytes).unwrap(), empty);
        assert_eq!(
            decode_key(encode_key("tx-1")).unwrap().as_deref(),
            Some("tx-1")
        );
    }

    /// Field by field against `TransactionLogValue.json` (the vendored crate has no generated
    /// class for it), and a version 1 value with the same content.
    #[test]
    fn the_value_is_kafkas_transaction_log_value() {
        let v = ongoing();
        let bytes = v.encode();
        let mut b = bytes.clone();
        assert_eq!(b.get_i16(), 0);
        assert_eq!(b.get_i64(), 4000);
        assert_eq!(b.get_i16(), 3);
        assert_eq!(b.get_i32(), 60_000);
        assert_eq!(b.get_i8(), 1, "Ongoing");
        assert_eq!(b.get_i32(), 2, "two topics");
        // A v1 (flexible) value with the same content reads the same.
        let mut flexible = BytesMut::new();
        flexible.put_i16(1);
        flexible.put_i64(4000);
        flexible.put_i16(3);
        flexible.put_i32(60_000);
        flexible.put_i8(1);
        flexible.put_u8(3); // two topics
        for (topic, parts) in [("a", vec![0, 2]), ("b", vec![1])] {
            flexible.put_u8(topic.len() as u8 + 1);
            flexible.put_slice(topic.as_bytes());
            flexible.put_u8(parts.len() as u8 + 1);
            for p in parts {
                flexible.put_i32(p);
            }
            flexible.put_u8(0); // tags
        }
        flexible.put_i64(1_700_000_000_123);
        flexible.put_i64(1_700_000_000_000);
        flexible.put_u8(0);
        assert_eq!(TxnValue::decode(flexible.freeze()).unwrap(), v);
    }
}
