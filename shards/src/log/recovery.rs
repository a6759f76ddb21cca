//! Opening a log: trust what the recovery point covers, validate what follows, cut a torn tail.
//!
//! Segments wholly before the recovery point are taken as they are; only their index files are
//! read (and rebuilt by a scan if damaged). The segment holding the point is scanned from the
//! point's byte position, and later segments (a crash around a roll) from their start. Every
//! scanned batch is validated; the first byte that is not part of a valid batch is where the log
//! ends: the file is cut there and any later segment removed.

use super::cache;
use super::checkpoint::RecoveryPoint;
use super::direct::DirectTail;
use super::epochs::LeaderEpochCache;
use super::index::{OffsetIndex, TimeIndex};
use super::scan::{self, HeaderWalker};
use super::segment::{self, Segment, SegmentPaths};
use super::segment_file::SegmentFile;
use super::{flush, writer, Log, LogInner, LogOptions, LogState, LogStats};
use crate::config::IoMode;
use crate::error::{Error, Result};
use crate::sync::Notify;
use crate::types::now_ms;
use crate::uring::{self, File};
use glommio::sync::Semaphore;
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::path::Path;
use std::rc::Rc;

pub(crate) async fn open(dir: &Path, options: LogOptions) -> Result<Log> {
    uring::mkdir(dir)
        .await
        .map_err(|e| Error::io("mkdir", dir, e))?;
    super::clean::swap::recover(dir).await?;
    let bases = list_segments(dir).await?;
    let (point, recovery_point_file) = RecoveryPoint::load(dir).await;
    let point = point.filter(|p| bases.contains(&p.segment_base));
    let index_interval = options.config.index_interval_bytes;
    let mut segments = Vec::with_capacity(bases.len().max(1));
    let mut txn_indexes_sound = true;
    // Segments read past the recovery point (or with none): their data may be in the page
    // cache only, so the sealed ones among them are sealed again once the log is built.
    let mut scanned = Vec::new();
    for (i, &base) in bases.iter().enumerate() {
        let next_base = bases.get(i + 1).copied();
        let paths = SegmentPaths::new(dir, base);
        // Opened within the shard's budget of open segment files: a partition's sealed
        // segments are read here once and may be closed again before the log is served.
        let file = SegmentFile::closed(&paths.log);
        let file_size = file
            .get()
            .await?
            .size()
            .map_err(|e| Error::io("stat", &paths.log, e))?;
        let mut seg = Segment::empty(base, file, paths);
        match super::txn::TxnIndex::load(&seg.paths.txn_index, base).await {
            Some(index) => seg.txn_index = index,
            None => {
                tracing::warn!(log = %dir.display(), base, "damaged .txnindex; rebuilding the transaction indexes from the log");
                txn_indexes_sound = false;
            }
        }
        let torn = match (point, next_base) {
            (Some(p), Some(next)) if base < p.segment_base => {
                load_sealed(&mut seg, file_size, next, index_interval).await?;
                false
            }
            (Some(p), _) if base == p.segment_base => {
                scan_from_point(&mut seg, file_size, &p, index_interval).await?
            }
            _ => scan_whole(&mut seg, file_size, index_interval).await?,
        };
        if point.is_none_or(|p| base >= p.segment_base) {
            scanned.push((base, seg.file.clone()));
        }
        segments.push(seg);
        if torn {
            let later_segments = &bases[i + 1..];
            for &later in later_segments {
                tracing::warn!(log = %dir.display(), base = later, "removing segment after a torn tail");
                let paths = SegmentPaths::new(dir, later);
                for p in paths.all() {
                    let _ = uring::unlink(p).await;
                }
            }
            // The removals are made durable before the log is served: a segment that came back
            // after another crash would be read after the cut one, its offsets not following.
            if !later_segments.is_empty() {
                uring::sync_dir(dir)
                    .await
                    .map_err(|e| Error::io("fsync", dir, e))?;
            }
            break;
        }
    }
    if segments.is_empty() {
        segments.push(Segment::create(dir, 0).await?);
    }
    let active = segments.last().expect("at least one segment");
    let active_file = active.file.get().await?;
    segment::trim_file(&active_file, active.size).await?;
    let direct = match options.io_mode {
        IoMode::Direct => {
            Some(DirectTail::open(&active.paths.log, active.size, &active_file).await?)
        }
        IoMode::Buffered => None,
    };
    let end_offset = active.next_offset;
    let first_base = segments[0].base_offset;
    let log_start = super::start::on_open(super::start::load(dir).await, first_base, end_offset);
    let mut epochs = LeaderEpochCache::load(dir).await;
    let cleaner = super::clean::state::CleanerState::load(dir).await;
    let epochs_changed =
        epochs.truncate_from_end(end_offset) | epochs.truncate_from_start(log_start);
    let flushed = point.map(|p| p.offset).unwrap_or(first_base);
    let inner = Rc::new(LogInner {
        dir: dir.to_path_buf(),
        mode: options.io_mode,
        config: RefCell::new(Rc::new(options.config)),
        state: RefCell::new(LogState {
            segments,
            start_offset: log_start,
            end_offset,
            flushed_offset: flushed.min(end_offset),
            recovery_point: point.unwrap_or(RecoveryPoint::start_of(first_base)),
            recovery_point_file,
            unflushed_messages: 0,
            // What recovery read past the point counts as unflushed from now, for `flush.ms`.
            oldest_unflushed_ms: (flushed < end_offset).then(now_ms),
            last_checkpoint_ms: now_ms(),
            read_hints: VecDeque::new(),
            writeback: (-1, 0),
            recent_positions: VecDeque::new(),
            txns: Default::default(),
            txn_indexes_sound,
        }),
        epochs: RefCell::new(epochs),
        epochs_lock: Semaphore::new(1),
        cleaner: RefCell::new(cleaner),
        cleaning: Semaphore::new(1),
        cleaner_stop_requests: Cell::new(0),
        queue: RefCell::new(VecDeque::new()),
        queue_space: Rc::new(crate::sync::FifoGate::new(
            options.writer.queued_bytes_max as u64,
        )),
        writer_tuning: options.writer,
        work: Notify::new(),
        appended: Notify::new(),
        write_lock: Semaphore::new(1),
        exclusive_waiting: Cell::new(0),
        reservation: Default::default(),
        exclusive_done: Notify::new(),
        flush_lock: Semaphore::new(1),
        sync_running: Cell::new(false),
        sync_done: Notify::new(),
        pending_seals: RefCell::new(Vec::new()),
        seal_failure: RefCell::new(None),
        direct: RefCell::new(direct),
        cache: options.cache.map(|c| (c, cache::BatchCache::new_entries())),
        closed: Cell::new(false),
        deleted: Cell::new(false),
        writer_done: Notify::new(),
        writer_running: Cell::new(false),
        stats: LogStats::default(),
    });
    // What was scanned past the point is valid but stays unflushed: the periodic checkpoint
    // makes it durable and moves the point (see `checkpoint_at_open` for the one case stored
    // here). On a full disk these small files cannot be written, and the log is served all the
    // same: the next start finds the older point and scans again.
    if epochs_changed {
        unless_disk_full(flush::store_epochs(&inner).await, dir)?;
    }
    let active_base = inner.state.borrow().active().base_offset;
    for (base, file) in scanned.into_iter().filter(|(b, _)| *b != active_base) {
        super::roll::seal_in_background(&inner, file.get().await?, base);
    }
    unless_disk_full(flush::checkpoint_at_open(&inner, point).await, dir)?;
    writer::spawn(&inner);
    Ok(Log { inner })
}

/// `result`, with a full disk reported (see `crate::repeated`) rather than failing the open.
fn unless_disk_full(result: Result<()>, dir: &Path) -> Result<()> {
    match result {
        Err(e) if e.is_disk_full() => {
            crate::repeated::error("checkpoint at open skipped (disk full)", &dir.display(), &e);
            Ok(())
        }
        other => other,
    }
}

/// Base offsets of the `.log` files, ascending; stray temporary files are removed.
async fn list_segments(dir: &Path) -> Result<Vec<i64>> {
    // Directory listing has no io_uring operation; it runs once, when the partition opens.
    let entries = std::fs::read_dir(dir).map_err(|e| Error::io("list", dir, e))?;
    let mut bases = Vec::new();
    let mut stray = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Error::io("list", dir, e))?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.ends_with(".tmp") {
            stray.push(entry.path());
        } else if let Some(stem) = name.strip_suffix(".log") {
            if let Ok(base) = stem.parse::<i64>() {
                bases.push(base);
            }
        }
    }
    for p in stray {
        let _ = uring::unlink(&p).await;
    }
    bases.sort_unstable();
    Ok(bases)
}

/// A segment wholly below the recovery point: sizes from the file, timestamps and positions
/// from its indexes, which are checked and rebuilt by a scan if damaged.
async fn load_sealed(
    seg: &mut Segment,
    file_size: u64,
    next_base: i64,
    index_interval: u32,
) -> Result<()> {
    seg.size = file_size;
    seg.next_offset = next_base;
    let span = (next_base - seg.base_offset).max(0) as u64;
    let index = read_file(&seg.paths.index).await;
    let time = read_file(&seg.paths.time_index).await;
    let loaded = match (
        index.as_deref().map(|b| OffsetIndex::decode(b, file_size)),
        time.as_deref().map(|b| TimeIndex::decode(b, span)),
    ) {
        (Some(Ok(i)), Some(Ok(t))) if index_is_sound(seg, &i, file_size).await => Some((i, t)),
        _ => None,
    };
    match loaded {
        Some((index, time_index)) => {
            seg.max_timestamp = time_index.last().map(|(t, _)| t).unwrap_or(-1);
            seg.index = index;
            seg.time_index = time_index;
        }
        None => {
            tracing::warn!(file = %seg.paths.index.display(), "index missing or damaged; rebuilding from the log");
            rebuild(seg, file_size, next_base, index_interval).await?;
            seg.next_offset = next_base.max(seg.next_offset);
            seg.size = file_size;
        }
    }
    Ok(())
}

/// The index of a non-empty segment must start at position 0 and its last entry must name the
/// batch at its position.
async fn index_is_sound(seg: &Segment, index: &OffsetIndex, file_size: u64) -> bool {
    if file_size == 0 {
        return true;
    }
    let Some((rel, pos)) = index.last() else {
        return false;
    };
    if index.first().map(|(_, p)| p) != Some(0) {
        return false;
    }
    let Ok(file) = seg.file.get().await else {
        return false;
    };
    let mut walker = HeaderWalker::new(&file);
    matches!(
        walker.header_at(pos as u64, file_size).await,
        Ok(Some(h)) if h.base_offset == seg.base_offset + rel as i64
    )
}

/// Rebuilds the indexes of a sealed segment from a validating scan. Corruption met here lies
/// below the recovery point: it is reported, the segment keeps its size, and reads that reach
/// the bad bytes fail instead of serving them.
async fn rebuild(
    seg: &mut Segment,
    file_size: u64,
    next_base: i64,
    index_interval: u32,
) -> Result<()> {
    seg.index = OffsetIndex::default();
    seg.time_index = TimeIndex::default();
    seg.size = 0;
    seg.next_offset = seg.base_offset;
    seg.bytes_since_index = 0;
    let file = seg.file.get().await?;
    let base = seg.base_offset;
    let end = scan::scan_valid(&file, 0, file_size, base..next_base, |pos, h| {
        seg.record_batch(pos, h, index_interval)
    })
    .await?;
    if let Some(reason) = end.stopped_by {
        tracing::error!(file = %file.path().display(), position = end.valid_end, %reason,
            "corrupt data below the recovery point; it will not be served");
    }
    seg.verified.insert(0, end.valid_end);
    seg.seal_indexes();
    segment::write_indexes(&seg.index_writes(), true).await?;
    let writes = seg.index_writes();
    seg.indexes_persisted(&writes);
    Ok(())
}

/// The segment holding the recovery point: trusted up to the point, scanned after it. Returns
/// whether the scan found a torn tail.
async fn scan_from_point(
    seg: &mut Segment,
    file_size: u64,
    point: &RecoveryPoint,
    index_interval: u32,
) -> Result<bool> {
    if point.position > file_size {
        tracing::warn!(file = %seg.paths.log.display(), "segment shorter than its recovery point; scanning it whole");
        return scan_whole(seg, file_size, index_interval).await;
    }
    let index = read_file(&seg.paths.index)
        .await
        .and_then(|b| OffsetIndex::decode(&b, file_size).ok());
    let time = read_file(&seg.paths.time_index)
        .await
        .and_then(|b| TimeIndex::decode(&b, u32::MAX as u64).ok());
    let (Some(mut index), Some(mut time_index)) = (index, time) else {
        return scan_whole(seg, file_size, index_interval).await;
    };
    index.truncate_to_position(point.position as u32);
    time_index.truncate_to_offset(seg.relative(point.offset));
    if point.position > 0 && !index_is_sound(seg, &index, point.position).await {
        return scan_whole(seg, file_size, index_interval).await;
    }
    seg.bytes_since_index = point.position - index.last().map(|(_, p)| p as u64).unwrap_or(0);
    seg.index = index;
    seg.time_index = time_index;
    seg.size = point.position;
    seg.next_offset = point.offset;
    seg.max_timestamp = point.max_timestamp;
    seg.offset_of_max_timestamp = point.offset_of_max_timestamp;
    scan_tail(seg, point.position, file_size, index_interval).await
}

/// A segment after the recovery point (or with none): scanned from its start.
async fn scan_whole(seg: &mut Segment, file_size: u64, index_interval: u32) -> Result<bool> {
    seg.index = OffsetIndex::default();
    seg.time_index = TimeIndex::default();
    seg.size = 0;
    seg.next_offset = seg.base_offset;
    seg.bytes_since_index = 0;
    seg.max_timestamp = -1;
    seg.offset_of_max_timestamp = -1;
    // The index files are rewritten from what the scan finds.
    for p in [&seg.paths.index, &seg.paths.time_index] {
        let f = File::open_rw(p)
            .await
            .map_err(|e| Error::io("open", p, e))?;
        f.truncate(0)
            .await
            .map_err(|e| Error::io("truncate", p, e))?;
    }
    scan_tail(seg, 0, file_size, index_interval).await
}

async fn scan_tail(
    seg: &mut Segment,
    from: u64,
    file_size: u64,
    index_interval: u32,
) -> Result<bool> {
    let file = seg.file.get().await?;
    // Offsets in a segment are relative to its base in 32 bits (Kafka's
    // `ensureOffsetInRange`): a batch claiming more is damaged.
    let offsets = seg.next_offset..seg.base_offset + i32::MAX as i64 + 1;
    let end = scan::scan_valid(&file, from, file_size, offsets, |pos, h| {
        seg.record_batch(pos, h, index_interval)
    })
    .await?;
    seg.verified.insert(from, end.valid_end);
    if seg.size > 0 {
        seg.first_append_ms = Some(now_ms());
    }
    match end.stopped_by {
        None => Ok(false),
        Some(reason) => {
            tracing::warn!(file = %file.path().display(), position = end.valid_end, %reason,
                "torn tail: cutting the log at the first invalid byte");
            file.truncate(end.valid_end)
                .await
                .map_err(|e| Error::io("truncate", file.path(), e))?;
            Ok(true)
        }
    }
}

/// A whole small file (checkpoints, indexes), or `None` when it cannot be read.
pub(super) async fn read_file(path: &Path) -> Option<Vec<u8>> {
    let file = File::open_read(path).await.ok()?;
    let size = file.size().ok()?;
    file.read_at(0, size as usize).await.ok()
}
