//! Rewriting a batch without the records compaction removes, and a run of segments into one
//! cleaned segment.
//!
//! A rewritten batch keeps everything that identifies it: base offset, last offset delta (so
//! the batch still ends where it did and offsets never move), base and max timestamps (kept
//! records' timestamp deltas stay valid), producer fields and leader epoch. Only the record
//! count, the length and the CRC change, and a compressed batch is compressed again with its
//! own codec. Kept records are copied byte for byte, headers included.

use super::batches::SegmentBatches;
use super::offset_map::OffsetMap;
use super::swap;
use super::throttle::IoThrottle;
use super::transactions::{AbortedRanges, BatchFate, TxnCleaning};
use crate::batch::records::{record_section, record_spans, RecordSpan};
use crate::batch::{codec, BatchError, BatchHeader, Compression, HEADER_BYTES};
use crate::error::{Error, Result};
use crate::log::segment::Segment;
use crate::log::segment_file::SegmentFile;
use crate::uring::{File, WriteChunk};
use std::path::Path;

/// Largest record section the cleaner decompresses; a batch beyond it is kept whole.
/// Bounded also because decompressing and compressing again runs on the shard's thread between
/// two yields.
pub(crate) const DECOMPRESSED_MAX_BYTES: usize = 8 << 20;
/// Cleaned bytes gathered before one write.
const WRITE_BYTES: usize = 1 << 20;

/// What compaction decides for each record of the batches it rewrites.
pub(crate) struct Retention<'a> {
    pub map: &'a OffsetMap,
    /// Tombstones below this offset have waited `delete.retention.ms` since first cleaned.
    pub tombstone_horizon: i64,
}

impl Retention<'_> {
    /// Kafka's rule: keep a record unless a newer one with its key exists, or it is a
    /// tombstone past the horizon. Records without a key are kept: Kafka's cleaner drops
    /// them, but Ferrite does not refuse them at produce time, and what was acknowledged stays.
    fn keeps(&self, section: &[u8], base_offset: i64, r: &RecordSpan) -> bool {
        let Some(key) = &r.key else {
            return true;
        };
        let offset = base_offset + r.offset_delta as i64;
        if self
            .map
            .latest(&section[key.clone()])
            .is_some_and(|latest| offset < latest)
        {
            return false;
        }
        !(r.value.is_none() && offset < self.tombstone_horizon)
    }
}

/// A batch after filtering.
pub(crate) enum Filtered {
    Unchanged,
    Rewritten(Vec<u8>),
    /// Every record went.
    Removed,
}

/// Calls `f` with the key and offset of every keyed record of a batch, for the offset map,
/// until it returns false (then false). Markers, aborted data and undecodable batches have no
/// keys to map.
pub(crate) fn for_each_key(
    batch: &[u8],
    h: &BatchHeader,
    aborted: &AbortedRanges,
    mut f: impl FnMut(&[u8], i64) -> bool,
) -> bool {
    if aborted.unmapped(h) {
        return true;
    }
    let Some((section, spans)) = decode(batch, h) else {
        return true;
    };
    spans.iter().all(|r| match &r.key {
        Some(key) => f(&section[key.clone()], h.base_offset + r.offset_delta as i64),
        None => true,
    })
}

fn decode(batch: &[u8], h: &BatchHeader) -> Option<(Vec<u8>, Vec<RecordSpan>)> {
    if h.is_control() {
        // Markers are decided whole (`transactions.rs`).
        return None;
    }
    let decoded = record_section(batch, DECOMPRESSED_MAX_BYTES)
        .and_then(|section| record_spans(&section, h.record_count).map(|s| (section, s)));
    match decoded {
        Ok(found) => Some(found),
        Err(e) => {
            tracing::warn!(base_offset = h.base_offset, error = %e, "cleaner keeps a batch it cannot decode");
            None
        }
    }
}

pub(crate) fn filter_batch(batch: &[u8], h: &BatchHeader, rule: &Retention<'_>) -> Filtered {
    let Some((section, spans)) = decode(batch, h) else {
        return Filtered::Unchanged;
    };
    let kept: Vec<&RecordSpan> = spans
        .iter()
        .filter(|r| rule.keeps(&section, h.base_offset, r))
        .collect();
    if kept.len() == spans.len() {
        return Filtered::Unchanged;
    }
    if kept.is_empty() {
        return Filtered::Removed;
    }
    let mut records = Vec::with_capacity(section.len());
    for r in &kept {
        records.extend_from_slice(&section[r.bytes.clone()]);
    }
    match encode(batch, h, &records, kept.len()) {
        Ok(bytes) => Filtered::Rewritten(bytes),
        Err(e) => {
            tracing::warn!(base_offset = h.base_offset, error = %e, "cleaner keeps a batch it cannot compress");
            Filtered::Unchanged
        }
    }
}

/// The original header with the new count, length and CRC, then the (recompressed) records.
fn encode(
    original: &[u8],
    h: &BatchHeader,
    records: &[u8],
    count: usize,
) -> std::result::Result<Vec<u8>, BatchError> {
    let codec = h.compression().unwrap_or(Compression::None);
    let section = codec::compress(codec, records)?;
    let mut out = Vec::with_capacity(HEADER_BYTES + section.len());
    out.extend_from_slice(&original[..HEADER_BYTES]);
    out.extend_from_slice(&section);
    let length = (out.len() - crate::batch::LOG_OVERHEAD_BYTES) as i32;
    out[8..12].copy_from_slice(&length.to_be_bytes());
    out[57..61].copy_from_slice(&(count as i32).to_be_bytes());
    let crc = crate::batch::crc::crc32c(&out[21..]);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    Ok(out)
}

/// One segment of a run to rewrite, as it was when the pass began.
#[derive(Clone)]
pub(crate) struct SourceSegment {
    pub base_offset: i64,
    pub file: SegmentFile,
    pub size: u64,
    pub next_offset: i64,
    pub max_timestamp: i64,
    /// The segment's aborted transactions (indexed where their markers are); the cleaned
    /// segment keeps those whose markers it keeps.
    pub aborted: Vec<crate::log::AbortedTxn>,
}

/// How much a rewrite kept and dropped.
#[derive(Copy, Clone, Debug, Default)]
pub(crate) struct RewriteCounts {
    pub bytes_read: u64,
    pub bytes_written: u64,
}

/// Writes the cleaned version of `run` as `<first base>.*.cleaned`, durable, and returns it as
/// a segment (still at the cleaned paths). `txns` carries the pass's walk through the
/// transactions from run to run. `stop` is polled between batches.
pub(crate) async fn rewrite_run(
    dir: &Path,
    run: &[SourceSegment],
    rule: &Retention<'_>,
    txns: &mut TxnCleaning<'_>,
    index_interval: u32,
    throttle: &IoThrottle,
    stop: &dyn Fn() -> bool,
) -> Result<Option<(Segment, RewriteCounts)>> {
    let base = run[0].base_offset;
    let paths = swap::cleaned_paths(dir, base);
    let mut out = Segment::create_at(paths, base).await?;
    let out_file = out.file.get().await?;
    let mut counts = RewriteCounts::default();
    // Kept batches are copied out: a slice would pin its whole 1 MiB read buffer.
    let mut pending: Vec<u8> = Vec::with_capacity(WRITE_BYTES);
    let mut written = 0u64;
    for source in run {
        let mut batches = SegmentBatches::new(source.file.get().await?, source.size);
        while let Some((_, header, bytes, read)) = batches.next().await? {
            if stop() {
                return Ok(None);
            }
            counts.bytes_read += read;
            throttle.spend(read).await;
            let filtered = match txns.fate(&bytes, &header) {
                BatchFate::Filter => filter_batch(&bytes, &header, rule),
                BatchFate::Keep => Filtered::Unchanged,
                BatchFate::Drop => Filtered::Removed,
            };
            match filtered {
                Filtered::Unchanged => {
                    out.record_batch(out.size, &header, index_interval);
                    pending.extend_from_slice(&bytes);
                }
                Filtered::Removed => {}
                Filtered::Rewritten(v) => {
                    let h = BatchHeader::parse(&v).map_err(Error::InvalidBatch)?;
                    out.record_batch(out.size, &h, index_interval);
                    pending.extend_from_slice(&v);
                }
            }
            if pending.len() >= WRITE_BYTES {
                written += flush_pending(&out_file, written, &mut pending, throttle).await?;
            }
            glommio::yield_if_needed().await;
        }
    }
    written += flush_pending(&out_file, written, &mut pending, throttle).await?;
    debug_assert_eq!(written, out.size);
    counts.bytes_written = written;
    let last = run.last().expect("a run holds a segment");
    out.next_offset = out.next_offset.max(last.next_offset);
    if out.max_timestamp < 0 {
        // Every record went: the segment keeps its sources' newest timestamp, so retention by
        // time (compact,delete) still expires it.
        out.max_timestamp = run.iter().map(|s| s.max_timestamp).max().unwrap_or(-1);
        out.offset_of_max_timestamp = base;
    }
    out.seal_indexes();
    for source in run {
        for entry in source.aborted.iter().filter(|e| txns.keeps_index_entry(e)) {
            out.txn_index.push(*entry);
        }
    }
    let txn_index_path = out.paths.txn_index.clone();
    out.txn_index.write_whole(&txn_index_path).await?;
    let writes = out.index_writes();
    crate::log::segment::write_indexes(&writes, true).await?;
    out.indexes_persisted(&writes);
    out_file
        .fdatasync()
        .await
        .map_err(|e| Error::io("fdatasync", out_file.path(), e))?;
    out.verified.insert(0, out.size);
    Ok(Some((out, counts)))
}

async fn flush_pending(
    file: &File,
    at: u64,
    pending: &mut Vec<u8>,
    throttle: &IoThrottle,
) -> Result<u64> {
    if pending.is_empty() {
        return Ok(0);
    }
    let bytes = std::mem::replace(pending, Vec::with_capacity(WRITE_BYTES));
    let len = bytes.len() as u64;
    file.write_all_at(at, vec![WriteChunk::Owned(bytes)])
        .await
        .map_err(|e| Error::io("write", file.path(), e))?;
    throttle.spend(len).await;
    Ok(len)
}
