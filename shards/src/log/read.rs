//! The read path: whole batches from an offset, as references the network layer can splice.

use super::scan::HeaderWalker;
use super::segment_file::SegmentFile;
use super::LogInner;
use crate::batch::control::{self, MarkerRecord};
use crate::batch::{self, BatchHeader, BatchOrigin, Stamp};
use crate::error::{Error, Result};
use crate::uring::File;
use bytes::Bytes;
use std::rc::Rc;

/// Read hints kept per log (one per recently active reader position).
const READ_HINTS_MAX: usize = 16;

/// One piece of a read: `Send`, so the shard that owns the connection can send it.
#[derive(Clone, Debug)]
pub enum Chunk {
    /// Bytes of a segment file; the file stays open while the chunk lives, even if retention
    /// deletes the segment meanwhile.
    File { file: File, position: u64, len: u64 },
    /// A batch still in memory (the direct-mode cache): its stamped prefix, then the rest.
    Batch { stamp: Stamp, body: Bytes },
    /// Bytes read into memory (first reads of data below the recovery point are validated).
    Memory(Bytes),
}

impl Chunk {
    pub fn len(&self) -> u64 {
        match self {
            Chunk::File { len, .. } => *len,
            Chunk::Batch { stamp, body } => (stamp.len() + body.len()) as u64,
            Chunk::Memory(b) => b.len() as u64,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Whole batches starting with the one that holds the requested offset.
#[derive(Clone, Debug, Default)]
pub struct ReadResult {
    pub chunks: Vec<Chunk>,
    pub bytes: u64,
    /// Offset after the last batch returned (the requested offset when nothing was returned).
    pub next_offset: i64,
}

impl ReadResult {
    fn empty(at: i64) -> ReadResult {
        ReadResult {
            chunks: Vec::new(),
            bytes: 0,
            next_offset: at,
        }
    }

    /// Copies the chunks into one buffer (tests, replication, the copying fetch path).
    pub async fn to_bytes(&self) -> std::io::Result<Bytes> {
        let mut out = Vec::with_capacity(self.bytes as usize);
        for c in &self.chunks {
            match c {
                Chunk::File {
                    file,
                    position,
                    len,
                } => out.extend_from_slice(&file.read_at(*position, *len as usize).await?),
                Chunk::Batch { stamp, body } => {
                    out.extend_from_slice(stamp);
                    out.extend_from_slice(body);
                }
                Chunk::Memory(b) => out.extend_from_slice(b),
            }
        }
        Ok(Bytes::from(out))
    }
}

/// A batch found by timestamp, whole.
#[derive(Clone, Debug)]
pub struct FoundBatch {
    pub header: BatchHeader,
    pub bytes: Bytes,
}

/// Where a previous read ended: the next read from `offset` starts at `position` directly.
#[derive(Copy, Clone, Debug)]
pub(crate) struct ReadHint {
    offset: i64,
    /// The segment's identity, not its base: a cleaned segment keeps the base of the one it
    /// replaced, and a position in one file means nothing in the other.
    segment_id: u64,
    position: u64,
}

/// What a read needs of a segment, copied out so no borrow is held across I/O; its file as
/// the segment holds it (`SegmentFile`) until `open` opens it.
pub(in crate::log) struct SegmentView<F = File> {
    base_offset: i64,
    /// `Segment::id`: lookups made later in the read find this very segment or none.
    id: u64,
    file: F,
    size: u64,
    next_offset: i64,
    start_position: u64,
    /// Byte position of the `upper` bound in this segment, when known without reading.
    upper_position: Option<u64>,
    verified_whole: bool,
}

impl super::Log {
    /// Reads whole batches from the one holding `from`, up to `max_bytes` (but always at least
    /// one whole batch) and below `upper` (the high watermark for consumers, the log end for
    /// replicas).
    pub async fn read(&self, from: i64, max_bytes: usize, upper: i64) -> Result<ReadResult> {
        let inner = &self.inner;
        if inner.deleted.get() {
            return Err(inner.closed_error());
        }
        let (log_start, log_end) = {
            let st = inner.state.borrow();
            (st.start_offset, st.end_offset)
        };
        if from < log_start || from > log_end {
            return Err(Error::OffsetOutOfRange {
                offset: from,
                log_start,
                log_end,
            });
        }
        let upper = upper.min(log_end);
        if from >= upper {
            return Ok(ReadResult::empty(from));
        }
        if let Some(found) = self.read_cached(from, max_bytes, upper) {
            return Ok(found);
        }
        let mut search = from;
        loop {
            let Some(view) = segment_view(inner, search, upper) else {
                return Ok(ReadResult::empty(from));
            };
            let view = view.open().await?;
            let base = view.base_offset;
            if let Some(found) = read_segment(inner, view, search, max_bytes, upper).await? {
                return Ok(found);
            }
            // Compaction removed the segment's last batches: go on with the next segment.
            let next_base = {
                let st = inner.state.borrow();
                st.segments
                    .iter()
                    .map(|s| s.base_offset)
                    .find(|&b| b > base)
            };
            match next_base {
                Some(b) if b < upper => search = b,
                _ => return Ok(ReadResult::empty(from)),
            }
        }
    }

    fn read_cached(&self, from: i64, max_bytes: usize, upper: i64) -> Option<ReadResult> {
        let (cache, entries) = self.inner.cache.as_ref()?;
        let batches = cache.read(entries, from, max_bytes, upper)?;
        let last = batches.last()?;
        let next_offset = last.last_offset + 1;
        let bytes = batches.iter().map(|b| b.len() as u64).sum();
        Some(ReadResult {
            chunks: batches
                .into_iter()
                .map(|b| Chunk::Batch {
                    stamp: b.stamp,
                    body: b.body,
                })
                .collect(),
            bytes,
            next_offset,
        })
    }

    /// The first batch whose newest timestamp is at or after `timestamp`, below `upper`.
    pub async fn find_batch_by_timestamp(
        &self,
        timestamp: i64,
        upper: i64,
    ) -> Result<Option<FoundBatch>> {
        let candidates: Vec<(SegmentFile, u64, u64)> = {
            let st = self.inner.state.borrow();
            st.segments
                .iter()
                .filter(|s| s.max_timestamp >= timestamp && s.base_offset < upper)
                .map(|s| {
                    let rel = s.time_index.scan_start(timestamp);
                    (s.file.clone(), s.index.lookup(rel).1 as u64, s.size)
                })
                .collect()
        };
        for (file, start, size) in candidates {
            let file = file.get().await?;
            let mut walker = HeaderWalker::new(&file);
            let mut pos = start;
            while let Some(h) = walker.header_at(pos, size).await? {
                if h.base_offset >= upper {
                    return Ok(None);
                }
                if h.max_timestamp >= timestamp {
                    let bytes = file
                        .read_at(pos, h.total_bytes())
                        .await
                        .map_err(|e| Error::io("read", file.path(), e))?;
                    let header = batch::validate(&bytes, usize::MAX, BatchOrigin::Replica)
                        .map_err(|e| Error::Corrupt {
                            path: file.path().to_path_buf(),
                            position: pos,
                            reason: e.to_string(),
                        })?;
                    return Ok(Some(FoundBatch {
                        header,
                        bytes: Bytes::from(bytes),
                    }));
                }
                pos += h.total_bytes() as u64;
            }
        }
        Ok(None)
    }
}

impl super::Log {
    /// Calls `f` with the header of every batch from the one holding `from` to the log end,
    /// and for a control batch its marker (rebuilding producer and transaction state on open).
    /// Reads headers only, and the few bytes of each marker.
    pub async fn for_each_header(
        &self,
        from: i64,
        mut f: impl FnMut(&BatchHeader, Option<MarkerRecord>),
    ) -> Result<()> {
        let segments: Vec<(SegmentFile, u64, u64)> = {
            let st = self.inner.state.borrow();
            st.segments
                .iter()
                .filter(|s| s.next_offset > from)
                .map(|s| {
                    let rel = s.relative(from.max(s.base_offset));
                    (s.file.clone(), s.index.lookup(rel).1 as u64, s.size)
                })
                .collect()
        };
        for (file, start, size) in segments {
            let file = file.get().await?;
            let mut walker = HeaderWalker::new(&file);
            let mut pos = start;
            while let Some(h) = walker.header_at(pos, size).await? {
                if h.last_offset() >= from {
                    let marker = if h.is_control() {
                        let bytes = file
                            .read_at(pos, h.total_bytes())
                            .await
                            .map_err(|e| Error::io("read", file.path(), e))?;
                        bytes
                            .get(batch::HEADER_BYTES..)
                            .and_then(|records| control::parse_marker(&h, records))
                    } else {
                        None
                    };
                    f(&h, marker);
                }
                pos += h.total_bytes() as u64;
            }
        }
        Ok(())
    }
}

/// Finds the segment holding `from` and copies out what the read needs.
pub(in crate::log) fn segment_view(
    inner: &LogInner,
    from: i64,
    upper: i64,
) -> Option<SegmentView<SegmentFile>> {
    let st = inner.state.borrow();
    let mut i = st.segments.partition_point(|s| s.base_offset <= from);
    if i == 0 {
        return None;
    }
    i -= 1;
    // Past the last batch of a segment (the offsets a compaction removed): the next one.
    while i + 1 < st.segments.len() && from >= st.segments[i].next_offset {
        i += 1;
    }
    let s = &st.segments[i];
    let hint = st
        .read_hints
        .iter()
        .find(|h| h.offset == from && h.segment_id == s.id)
        .map(|h| h.position);
    let start_position =
        hint.unwrap_or_else(|| s.index.lookup(s.relative(from.max(s.base_offset))).1 as u64);
    let is_active = i + 1 == st.segments.len();
    let upper_position = if upper >= s.next_offset {
        Some(s.size)
    } else if is_active {
        st.recent_positions
            .binary_search_by_key(&upper, |&(o, _)| o)
            .ok()
            .map(|k| st.recent_positions[k].1)
    } else {
        None
    };
    Some(SegmentView {
        base_offset: s.base_offset,
        id: s.id,
        file: s.file.clone(),
        size: s.size,
        next_offset: s.next_offset,
        start_position,
        upper_position,
        verified_whole: s.verified.contains(0, s.size),
    })
}

impl SegmentView<SegmentFile> {
    /// The view with its file open (reopened if the shard's budget had closed it).
    pub(in crate::log) async fn open(self) -> Result<SegmentView> {
        let file = self.file.get().await?;
        Ok(SegmentView {
            base_offset: self.base_offset,
            id: self.id,
            file,
            size: self.size,
            next_offset: self.next_offset,
            start_position: self.start_position,
            upper_position: self.upper_position,
            verified_whole: self.verified_whole,
        })
    }
}

pub(in crate::log) async fn read_segment(
    inner: &Rc<LogInner>,
    view: SegmentView,
    from: i64,
    max_bytes: usize,
    upper: i64,
) -> Result<Option<ReadResult>> {
    let mut walker = HeaderWalker::new(&view.file);
    // The batch holding `from`; none when the segment ends first.
    let mut pos = view.start_position;
    let first = loop {
        match walker.header_at(pos, view.size).await? {
            None => return Ok(None),
            Some(h) if !view.holds(&h) => return Err(view.offsets_outside(pos, &h)),
            Some(h) if h.last_offset() >= from => break h,
            Some(h) => pos += h.total_bytes() as u64,
        }
    };
    if first.base_offset >= upper {
        return Ok(Some(ReadResult::empty(from)));
    }
    let start = pos;
    let limit = match view.upper_position {
        Some(p) => p,
        None => position_of(inner, &mut walker, &view, upper).await?,
    };
    let first_end = start + first.total_bytes() as u64;
    let target = start.saturating_add(max_bytes as u64);
    // Whole batches only: the end is a batch boundary at or before the target, found from the
    // sparse index and a short walk, or the first batch's end if it alone exceeds the target.
    let end = if target >= limit {
        limit
    } else if first_end >= target {
        first_end
    } else {
        let indexed = with_index(inner, view.id, |i| i.lookup_position(target as u32).1);
        let mut p = (indexed as u64).max(first_end);
        while let Some(h) = walker.header_at(p, limit).await? {
            let next = p + h.total_bytes() as u64;
            if next > target {
                break;
            }
            p = next;
        }
        p
    };
    let next_offset = if end >= view.size {
        view.next_offset
    } else {
        match walker.header_at(end, view.size).await? {
            Some(h) => h.base_offset,
            None => view.next_offset,
        }
    };
    let chunk = if view.verified_whole || is_verified(inner, view.id, start, end) {
        Chunk::File {
            file: view.file.clone(),
            position: start,
            len: end - start,
        }
    } else {
        match verify_range(inner, &view, start, end).await? {
            Verified::Whole(bytes) => Chunk::Memory(bytes),
            Verified::Prefix(bytes, next) => {
                let len = bytes.len() as u64;
                remember_hint(inner, next, view.id, start + len);
                return Ok(Some(ReadResult {
                    chunks: vec![Chunk::Memory(bytes)],
                    bytes: len,
                    next_offset: next,
                }));
            }
        }
    };
    remember_hint(inner, next_offset, view.id, end);
    Ok(Some(ReadResult {
        bytes: chunk.len(),
        chunks: vec![chunk],
        next_offset,
    }))
}

impl SegmentView {
    /// Whether a batch's offsets lie inside this segment. The CRC does not cover a batch's
    /// base offset, so a damaged one is caught here instead of being served, or skipped over,
    /// as if it were data.
    fn holds(&self, h: &batch::BatchHeader) -> bool {
        h.base_offset >= self.base_offset && h.last_offset() < self.next_offset
    }

    fn offsets_outside(&self, position: u64, h: &batch::BatchHeader) -> Error {
        let reason = format!(
            "batch offsets {}..={} lie outside the segment's {}..{}",
            h.base_offset,
            h.last_offset(),
            self.base_offset,
            self.next_offset
        );
        tracing::error!(file = %self.file.path().display(), position, %reason, "corrupt batch in the log");
        Error::Corrupt {
            path: self.file.path().to_path_buf(),
            position,
            reason,
        }
    }
}

/// Byte position of the first batch at or after `offset` in the viewed segment.
async fn position_of(
    inner: &LogInner,
    walker: &mut HeaderWalker<'_>,
    view: &SegmentView,
    offset: i64,
) -> Result<u64> {
    if offset >= view.next_offset {
        return Ok(view.size);
    }
    let rel = (offset - view.base_offset).clamp(0, u32::MAX as i64) as u32;
    let mut pos = with_index(inner, view.id, |i| i.lookup(rel).1) as u64;
    while let Some(h) = walker.header_at(pos, view.size).await? {
        if h.base_offset >= offset {
            return Ok(pos);
        }
        pos += h.total_bytes() as u64;
    }
    Ok(view.size)
}

/// Looks something up in the offset index of the segment `segment_id` (0 if it is gone).
fn with_index(
    inner: &LogInner,
    segment_id: u64,
    f: impl FnOnce(&super::index::OffsetIndex) -> u32,
) -> u32 {
    let st = inner.state.borrow();
    st.segments
        .iter()
        .find(|s| s.id == segment_id)
        .map(|s| f(&s.index))
        .unwrap_or(0)
}

fn is_verified(inner: &LogInner, segment_id: u64, start: u64, end: u64) -> bool {
    let st = inner.state.borrow();
    st.segments
        .iter()
        .find(|s| s.id == segment_id)
        .is_some_and(|s| s.verified.contains(start, end))
}

enum Verified {
    Whole(Bytes),
    /// Valid batches up to corruption, and the offset after them.
    Prefix(Bytes, i64),
}

/// Reads a range not validated since the log opened and checks every batch in it. Corruption
/// is reported with the file and position and never returned as data.
async fn verify_range(
    inner: &LogInner,
    view: &SegmentView,
    start: u64,
    end: u64,
) -> Result<Verified> {
    let bytes = view
        .file
        .read_at(start, (end - start) as usize)
        .await
        .map_err(|e| Error::io("read", view.file.path(), e))?;
    let mut at = 0usize;
    let mut next_offset = None;
    let mut failure = None;
    while at < bytes.len() {
        let rest = &bytes[at..];
        let len = match batch::BatchHeader::parse(rest) {
            Ok(h) if h.batch_length >= 0 && h.total_bytes() <= rest.len() => h.total_bytes(),
            Ok(_) => {
                failure = Some("batch length runs past the range".to_string());
                break;
            }
            Err(e) => {
                failure = Some(e.to_string());
                break;
            }
        };
        match batch::validate(&rest[..len], usize::MAX, BatchOrigin::Replica) {
            Ok(h) if !view.holds(&h) || next_offset.is_some_and(|n| h.base_offset < n) => {
                failure = Some(format!(
                    "batch offsets {}..={} are out of order or outside the segment",
                    h.base_offset,
                    h.last_offset()
                ));
                break;
            }
            Ok(h) => {
                next_offset = Some(h.last_offset() + 1);
                at += len;
            }
            Err(e) => {
                failure = Some(e.to_string());
                break;
            }
        }
    }
    let bytes = Bytes::from(bytes);
    {
        let mut st = inner.state.borrow_mut();
        if let Some(s) = st.segments.iter_mut().find(|s| s.id == view.id) {
            s.verified.insert(start, start + at as u64);
        }
    }
    match failure {
        None => Ok(Verified::Whole(bytes)),
        Some(reason) => {
            let position = start + at as u64;
            tracing::error!(file = %view.file.path().display(), position, %reason, "corrupt batch in the log");
            match next_offset {
                Some(next) => Ok(Verified::Prefix(bytes.slice(..at), next)),
                None => Err(Error::Corrupt {
                    path: view.file.path().to_path_buf(),
                    position,
                    reason,
                }),
            }
        }
    }
}

fn remember_hint(inner: &LogInner, offset: i64, segment_id: u64, position: u64) {
    let mut st = inner.state.borrow_mut();
    st.read_hints.retain(|h| h.offset != offset);
    if st.read_hints.len() == READ_HINTS_MAX {
        st.read_hints.pop_front();
    }
    st.read_hints.push_back(ReadHint {
        offset,
        segment_id,
        position,
    });
}
