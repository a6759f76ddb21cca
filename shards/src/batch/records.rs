//! The records of a v2 batch as spans of its (decompressed) record section.
//!
//! Each record is `length varint` then `length` bytes: attributes, timestamp delta, offset
//! delta, key, value, headers. A span covers the whole encoded record, length included, so a
//! kept record is copied as it was: its deltas stay relative to the batch's base offset and
//! timestamp, which the cleaner leaves unchanged.

use super::{BatchError, BatchHeader, Compression, HEADER_BYTES};
use std::ops::Range;

/// One record's place in the record section, and what compaction asks of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordSpan {
    /// The whole encoded record, length prefix included.
    pub bytes: Range<usize>,
    pub offset_delta: i32,
    pub timestamp_delta: i64,
    /// `None` for a record without a key.
    pub key: Option<Range<usize>>,
    /// `None` for a null value: a tombstone when the record has a key.
    pub value: Option<Range<usize>>,
}

/// A batch's record section, decompressed when the batch is compressed; at most `limit` bytes.
pub fn record_section(batch: &[u8], limit: usize) -> Result<Vec<u8>, BatchError> {
    let header = BatchHeader::parse(batch)?;
    let codec = header
        .compression()
        .ok_or(BatchError::UnsupportedCompression {
            codec: (header.attributes & 0x7) as u16,
        })?;
    let section = &batch[HEADER_BYTES.min(batch.len())..];
    match codec {
        Compression::None => Ok(section.to_vec()),
        codec => super::codec::decompress(codec, section, limit),
    }
}

/// The spans of the `count` records in `section`; anything malformed is an error.
pub fn record_spans(section: &[u8], count: i32) -> Result<Vec<RecordSpan>, BatchError> {
    let mut cursor = Cursor {
        buf: section,
        at: 0,
    };
    let mut out = Vec::with_capacity((count.max(0) as usize).min(4096));
    for _ in 0..count.max(0) {
        let start = cursor.at;
        let len = usize::try_from(cursor.varint()?).map_err(|_| cursor.bad())?;
        let end = cursor.at.checked_add(len).ok_or_else(|| cursor.bad())?;
        if end > section.len() {
            return Err(cursor.bad());
        }
        cursor.skip(1)?; // attributes
        let timestamp_delta = cursor.varlong()?;
        let offset_delta = cursor.varint()?;
        let key = cursor.nullable()?;
        let value = cursor.nullable()?;
        if cursor.at > end {
            return Err(cursor.bad());
        }
        cursor.at = end; // headers are carried inside the span
        out.push(RecordSpan {
            bytes: start..end,
            offset_delta,
            timestamp_delta,
            key,
            value,
        });
    }
    if cursor.at != section.len() {
        return Err(cursor.bad());
    }
    Ok(out)
}

struct Cursor<'a> {
    buf: &'a [u8],
    at: usize,
}

impl Cursor<'_> {
    fn bad(&self) -> BatchError {
        BatchError::BadRecords { at: self.at }
    }

    fn skip(&mut self, n: usize) -> Result<(), BatchError> {
        if self.at + n > self.buf.len() {
            return Err(self.bad());
        }
        self.at += n;
        Ok(())
    }

    fn varlong(&mut self) -> Result<i64, BatchError> {
        let mut value: u64 = 0;
        for shift in (0..64).step_by(7) {
            let byte = *self.buf.get(self.at).ok_or_else(|| self.bad())?;
            self.at += 1;
            value |= ((byte & 0x7f) as u64) << shift;
            if byte & 0x80 == 0 {
                return Ok(((value >> 1) as i64) ^ -((value & 1) as i64));
            }
        }
        Err(self.bad())
    }

    fn varint(&mut self) -> Result<i32, BatchError> {
        let v = self.varlong()?;
        i32::try_from(v).map_err(|_| self.bad())
    }

    /// A length-prefixed field's range, `None` for length -1.
    fn nullable(&mut self) -> Result<Option<Range<usize>>, BatchError> {
        let len = self.varint()?;
        if len < 0 {
            return Ok(None);
        }
        let end = self.at + len as usize;
        if end > self.buf.len() {
            return Err(self.bad());
        }
        let range = self.at..end;
        self.at = end;
        Ok(Some(range))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::build::{build_batch, NewRecord, ProducerFields};
    use bytes::Bytes;

    #[test]
    fn spans_name_keys_tombstones_and_whole_records() {
        let records = vec![
            NewRecord {
                key: Some(Bytes::from_static(b"k1")),
                value: Some(Bytes::from_static(b"v1")),
                timestamp_ms: 5,
                headers: vec![(Bytes::from_static(b"h"), None)],
            },
            NewRecord {
                key: Some(Bytes::from_static(b"k2")),
                value: None,
                timestamp_ms: 6,
                headers: vec![],
            },
            NewRecord {
                key: None,
                value: Some(Bytes::from_static(b"v3")),
                timestamp_ms: 7,
                headers: vec![],
            },
        ];
        let batch = build_batch(&records, ProducerFields::NONE);
        let section = record_section(&batch, 1 << 20).unwrap();
        let spans = record_spans(&section, 3).unwrap();
        assert_eq!(spans.len(), 3);
        assert_eq!(&section[spans[0].key.clone().unwrap()], b"k1");
        assert!(spans[0].value.is_some());
        assert!(spans[1].value.is_none());
        assert_eq!(spans[2].key, None);
        assert_eq!(spans[2].offset_delta, 2);
        assert_eq!(spans[0].bytes.start, 0);
        assert_eq!(spans[2].bytes.end, section.len());
        assert!(
            record_spans(&section, 4).is_err(),
            "count beyond the records"
        );
        assert!(record_spans(&section[..section.len() - 1], 3).is_err());
    }
}
