//! Transaction markers: the control batches that end a producer's transaction in a partition.
//!
//! Kafka writes one as `MemoryRecords.writeEndTransactionalMarker` does: a v2 batch with the
//! transactional and control attribute bits (0x30), uncompressed, base sequence -1, and one
//! record whose key is `ControlRecordType` v0 (`version i16 = 0, type i16`: 0 ABORT, 1 COMMIT)
//! and whose value is `EndTransactionMarker` v0 (`version i16 = 0, coordinator_epoch i32`).
//! The whole batch is 78 bytes.

use super::{BatchHeader, Compression, HEADER_BYTES, MAGIC_V2};
use bytes::{BufMut, Bytes, BytesMut};

/// Attributes of a marker batch: transactional (bit 4) and control (bit 5), no codec, create time.
const MARKER_ATTRIBUTES: i16 = 0x30;
/// `ControlRecordType` key bytes: version 0, then the type.
const KEY_BYTES: usize = 4;
/// `EndTransactionMarker` value bytes: version 0, then the coordinator epoch.
const VALUE_BYTES: usize = 6;

/// How a transaction ended in a partition.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Marker {
    Abort,
    Commit,
}

/// What a control batch says: the marker and the epoch of the coordinator that wrote it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct MarkerRecord {
    pub marker: Marker,
    pub coordinator_epoch: i32,
}

/// The marker batch for `producer_id` at `producer_epoch`, base offset 0 (the log assigns it).
pub fn build_marker(
    producer_id: i64,
    producer_epoch: i16,
    marker: MarkerRecord,
    timestamp_ms: i64,
) -> Bytes {
    let mut record = BytesMut::with_capacity(16);
    record.put_u8(0); // attributes
    record.put_u8(0); // timestamp delta (zigzag 0)
    record.put_u8(0); // offset delta
    record.put_u8((KEY_BYTES as u8) << 1); // key length, zigzag
    record.put_i16(0);
    record.put_i16(match marker.marker {
        Marker::Abort => 0,
        Marker::Commit => 1,
    });
    record.put_u8((VALUE_BYTES as u8) << 1); // value length, zigzag
    record.put_i16(0);
    record.put_i32(marker.coordinator_epoch);
    record.put_u8(0); // no headers
    let mut out = BytesMut::with_capacity(HEADER_BYTES + 1 + record.len());
    out.put_i64(0);
    out.put_i32((HEADER_BYTES - 12 + 1 + record.len()) as i32);
    out.put_i32(-1);
    out.put_u8(MAGIC_V2);
    out.put_u32(0); // crc, filled below
    out.put_i16(MARKER_ATTRIBUTES);
    out.put_i32(0); // last offset delta
    out.put_i64(timestamp_ms);
    out.put_i64(timestamp_ms);
    out.put_i64(producer_id);
    out.put_i16(producer_epoch);
    out.put_i32(-1); // base sequence: markers carry none
    out.put_i32(1);
    out.put_u8((record.len() as u8) << 1); // record length, zigzag
    out.extend_from_slice(&record);
    let crc = super::crc::crc32c(&out[21..]);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    out.freeze()
}

/// Reads the marker of a control batch from its record section (the bytes after the 61-byte
/// header). `None` for a batch that is not a control batch,
/// holds no record (the cleaner may empty one), or has a record type Kafka's transactions do
/// not use (KRaft's types 2-6): Kafka's readers skip those too.
pub fn parse_marker(header: &BatchHeader, records: &[u8]) -> Option<MarkerRecord> {
    if !header.is_control()
        || header.record_count < 1
        || header.compression() != Some(Compression::None)
    {
        return None;
    }
    let batch = records;
    let mut at = 0;
    let _length = varint(batch, &mut at)?;
    at += 1; // attributes
    varint(batch, &mut at)?; // timestamp delta
    varint(batch, &mut at)?; // offset delta
    let key_len = varint(batch, &mut at)?;
    if key_len < KEY_BYTES as i64 {
        return None;
    }
    let key = batch.get(at..at + key_len as usize)?;
    // An unknown key version is read as v0, as Kafka's `ControlRecordType.parse` does.
    let marker = match i16::from_be_bytes([key[2], key[3]]) {
        0 => Marker::Abort,
        1 => Marker::Commit,
        _ => return None,
    };
    at += key_len as usize;
    let value_len = varint(batch, &mut at)?;
    if value_len < VALUE_BYTES as i64 {
        return None;
    }
    let value = batch.get(at..at + value_len as usize)?;
    if i16::from_be_bytes([value[0], value[1]]) < 0 {
        return None;
    }
    Some(MarkerRecord {
        marker,
        coordinator_epoch: i32::from_be_bytes([value[2], value[3], value[4], value[5]]),
    })
}

/// A zigzag varint at `*at`, advancing past it.
fn varint(buf: &[u8], at: &mut usize) -> Option<i64> {
    let mut raw: u64 = 0;
    for shift in (0..64).step_by(7) {
        let byte = *buf.get(*at)?;
        *at += 1;
        raw |= ((byte & 0x7f) as u64) << shift;
        if byte & 0x80 == 0 {
            return Some((raw >> 1) as i64 ^ -((raw & 1) as i64));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{validate, BatchOrigin};

    #[test]
    fn a_marker_is_kafkas_78_bytes_and_reads_back() {
        for marker in [Marker::Abort, Marker::Commit] {
            let m = MarkerRecord {
                marker,
                coordinator_epoch: 7,
            };
            let b = build_marker(42, 3, m, 1_700_000_000_000);
            assert_eq!(b.len(), 78);
            let h = validate(&b, usize::MAX, BatchOrigin::Replica).unwrap();
            assert!(h.is_control() && h.is_transactional());
            assert_eq!(
                (h.producer_id, h.producer_epoch, h.base_sequence),
                (42, 3, -1)
            );
            assert_eq!(parse_marker(&h, &b[HEADER_BYTES..]), Some(m));
            assert!(
                validate(&b, usize::MAX, BatchOrigin::Client).is_err(),
                "clients may not send control batches"
            );
        }
    }

    #[test]
    fn data_batches_and_truncated_markers_are_not_markers() {
        let data = crate::batch::build::build_batch(
            &[crate::batch::build::NewRecord::default()],
            crate::batch::build::ProducerFields::NONE,
        );
        let h = BatchHeader::parse(&data).unwrap();
        assert_eq!(parse_marker(&h, &data[HEADER_BYTES..]), None);
        let m = MarkerRecord {
            marker: Marker::Commit,
            coordinator_epoch: 0,
        };
        let b = build_marker(1, 0, m, 0);
        let h = BatchHeader::parse(&b).unwrap();
        assert_eq!(parse_marker(&h, &b[HEADER_BYTES..70]), None);
    }
}
