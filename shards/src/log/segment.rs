//! One segment: a `.log` file of batches from a base offset, with its two sparse indexes.
//!
//! Lives on: the shard that owns the partition. Its read handle (`file`) may be cloned out to
//! any shard: bytes below `size` never change while the segment exists, except by truncation
//! on a replica.

use super::index::{IndexWrite, OffsetIndex, TimeIndex};
use super::segment_file::SegmentFile;
use super::verified::VerifiedRanges;
use crate::batch::BatchHeader;
use crate::error::{Error, Result};
use crate::uring::{self, File, WriteChunk};
use std::path::{Path, PathBuf};

static NEXT_SEGMENT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

pub(crate) fn file_stem(base_offset: i64) -> String {
    format!("{base_offset:020}")
}

#[derive(Clone)]
pub(crate) struct SegmentPaths {
    pub log: PathBuf,
    pub index: PathBuf,
    pub time_index: PathBuf,
    /// Aborted transactions (`.txnindex`); absent while there are none.
    pub txn_index: PathBuf,
}

impl SegmentPaths {
    pub fn new(dir: &Path, base_offset: i64) -> SegmentPaths {
        let stem = file_stem(base_offset);
        SegmentPaths {
            log: dir.join(format!("{stem}.log")),
            index: dir.join(format!("{stem}.index")),
            time_index: dir.join(format!("{stem}.timeindex")),
            txn_index: dir.join(format!("{stem}.txnindex")),
        }
    }

    /// Every file a segment may have.
    pub fn all(&self) -> [&PathBuf; 4] {
        [&self.log, &self.index, &self.time_index, &self.txn_index]
    }
}

pub(crate) struct Segment {
    pub base_offset: i64,
    /// Unique in the process: a cleaned segment has its predecessor's base but not its id.
    pub id: u64,
    /// Buffered read/write descriptor: buffered-mode writes, every read and splice; opened on
    /// use within the shard's budget of open segment files (`segment_file.rs`).
    pub file: SegmentFile,
    pub paths: SegmentPaths,
    /// Bytes of whole, written batches.
    pub size: u64,
    /// Offset after the last batch (the base offset while empty).
    pub next_offset: i64,
    pub max_timestamp: i64,
    pub offset_of_max_timestamp: i64,
    pub index: OffsetIndex,
    pub time_index: TimeIndex,
    /// Log bytes since the last offset index entry.
    pub bytes_since_index: u64,
    /// Wall-clock milliseconds of the first append, for `segment.ms`; none while empty.
    pub first_append_ms: Option<i64>,
    /// Byte ranges validated since this process opened the log (appended or scanned).
    pub verified: VerifiedRanges,
    /// The transactions aborted by markers in this segment.
    pub txn_index: super::txn::TxnIndex,
}

impl Segment {
    /// Creates the files of a new, empty segment.
    pub async fn create(dir: &Path, base_offset: i64) -> Result<Segment> {
        Segment::create_at(SegmentPaths::new(dir, base_offset), base_offset).await
    }

    /// Creates a new, empty segment's files at `paths` (the cleaner's temporary names).
    pub async fn create_at(paths: SegmentPaths, base_offset: i64) -> Result<Segment> {
        let file = File::open(
            &paths.log,
            libc::O_RDWR | libc::O_CREAT | libc::O_TRUNC,
            0o644,
        )
        .await
        .map_err(|e| Error::io("create", &paths.log, e))?;
        for p in [&paths.index, &paths.time_index] {
            File::open(p, libc::O_RDWR | libc::O_CREAT | libc::O_TRUNC, 0o644)
                .await
                .map_err(|e| Error::io("create", p, e))?;
        }
        // A `.txnindex` is written only once a transaction aborts here; one a removed segment
        // of the same base left behind must not be taken for this one's.
        match uring::unlink(&paths.txn_index).await {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io("unlink", &paths.txn_index, e)),
        }
        Ok(Segment::empty(
            base_offset,
            SegmentFile::opened(file),
            paths,
        ))
    }

    pub fn empty(base_offset: i64, file: SegmentFile, paths: SegmentPaths) -> Segment {
        Segment {
            base_offset,
            id: NEXT_SEGMENT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            file,
            paths,
            size: 0,
            next_offset: base_offset,
            max_timestamp: -1,
            offset_of_max_timestamp: -1,
            index: OffsetIndex::default(),
            time_index: TimeIndex::default(),
            bytes_since_index: 0,
            first_append_ms: None,
            verified: VerifiedRanges::default(),
            txn_index: super::txn::TxnIndex::default(),
        }
    }

    pub fn relative(&self, offset: i64) -> u32 {
        debug_assert!(offset >= self.base_offset);
        (offset - self.base_offset).min(u32::MAX as i64) as u32
    }

    /// Accounts for a batch written at `position`: indexes, timestamps, sizes.
    ///
    /// A time index entry (t, o) says every batch before offset o has a timestamp at or below t,
    /// so a search for the first batch at or after T may start at the last entry below T.
    pub fn record_batch(&mut self, position: u64, header: &BatchHeader, index_interval_bytes: u32) {
        debug_assert_eq!(position, self.size, "batches are recorded in file order");
        debug_assert!(header.base_offset >= self.next_offset, "offsets ascend");
        let rel = self.relative(header.base_offset);
        if self.index.len() == 0 || self.bytes_since_index >= index_interval_bytes as u64 {
            self.index.append(rel, position as u32);
            if self.max_timestamp >= 0 {
                self.time_index.maybe_append(self.max_timestamp, rel);
            }
            self.bytes_since_index = 0;
        }
        let total = header.total_bytes() as u64;
        self.bytes_since_index += total;
        if header.max_timestamp > self.max_timestamp {
            self.max_timestamp = header.max_timestamp;
            self.offset_of_max_timestamp = header.base_offset;
        }
        self.size = position + total;
        self.next_offset = header.last_offset() + 1;
    }

    /// What the index files lack, to write with [`write_indexes`] without holding the segment.
    pub fn index_writes(&self) -> IndexWrites {
        IndexWrites {
            index_path: self.paths.index.clone(),
            time_index_path: self.paths.time_index.clone(),
            index: self.index.unpersisted(),
            time_index: self.time_index.unpersisted(),
        }
    }

    pub fn indexes_persisted(&mut self, writes: &IndexWrites) {
        self.index.mark_persisted(&writes.index);
        self.time_index.mark_persisted(&writes.time_index);
    }

    /// Closes the segment for appends in memory: a final time index entry covering every batch,
    /// so recovery reads the segment's newest timestamp from the last entry (as Kafka does).
    pub fn seal_indexes(&mut self) {
        if self.max_timestamp >= 0 {
            let rel = self.relative(self.next_offset);
            self.time_index.maybe_append(self.max_timestamp, rel);
        }
    }

    /// Removes the segment's files. Readers holding `file` keep reading it until they drop it.
    pub async fn delete_files(&self) -> Result<()> {
        pin_for_removal(&self.file).await?;
        delete_files(&self.paths).await
    }
}

/// Keeps the file open for the readers holding it before its path goes; one already removed
/// is as good as deleted.
async fn pin_for_removal(file: &SegmentFile) -> Result<()> {
    match file.pin().await {
        Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

/// Removes a segment's files (those already gone are skipped).
pub async fn delete_files(paths: &SegmentPaths) -> Result<()> {
    for p in paths.all() {
        match uring::unlink(p).await {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io("unlink", p, e)),
        }
    }
    Ok(())
}

/// Removes the files of every segment `inner` lists, leaving the list as it is: a read that
/// started before may still look a segment up (its open file stays readable until dropped).
pub(crate) async fn delete_listed_files(inner: &super::LogInner) -> Result<()> {
    let listed: Vec<(SegmentPaths, SegmentFile)> = inner
        .state
        .borrow()
        .segments
        .iter()
        .map(|s| (s.paths.clone(), s.file.clone()))
        .collect();
    for (paths, file) in &listed {
        pin_for_removal(file).await?;
        delete_files(paths).await?;
    }
    Ok(())
}

/// Pending index file writes of one segment.
pub(crate) struct IndexWrites {
    index_path: PathBuf,
    time_index_path: PathBuf,
    index: IndexWrite,
    time_index: IndexWrite,
}

/// Writes what the index files lack; `sync` makes them durable.
pub(crate) async fn write_indexes(writes: &IndexWrites, sync: bool) -> Result<()> {
    write_index(&writes.index_path, &writes.index, sync).await?;
    write_index(&writes.time_index_path, &writes.time_index, sync).await
}

async fn write_index(path: &Path, write: &IndexWrite, sync: bool) -> Result<()> {
    if write.bytes.is_empty() && !write.cut_first && !sync {
        return Ok(());
    }
    let file = File::open_rw(path)
        .await
        .map_err(|e| Error::io("open", path, e))?;
    if write.cut_first {
        file.truncate(write.at)
            .await
            .map_err(|e| Error::io("truncate", path, e))?;
    }
    if !write.bytes.is_empty() {
        file.write_all_at(write.at, vec![WriteChunk::Owned(write.bytes.clone())])
            .await
            .map_err(|e| Error::io("write", path, e))?;
    }
    if sync {
        file.fdatasync()
            .await
            .map_err(|e| Error::io("fdatasync", path, e))?;
    }
    Ok(())
}

/// Cuts the file to the segment's logical size when padding or a torn tail lies beyond it.
pub(crate) async fn trim_file(file: &File, size: u64) -> Result<()> {
    if file.size().map_err(|e| Error::io("stat", file.path(), e))? != size {
        file.truncate(size)
            .await
            .map_err(|e| Error::io("truncate", file.path(), e))?;
    }
    Ok(())
}
