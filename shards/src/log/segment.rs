//! One segment: a `.log` file of batches from a base offset, with its two sparse indexes.
//!
//! Lives on: the shard that owns the partition. Its read handle (`file`) may be cloned out to
//! any shard: bytes below `size` never change while the segment exists, except by truncation
//! on a replica.

use super::index::{IndexWrite, OffsetIndex, TimeIndex};
use super::verified::VerifiedRanges;
use crate::batch::BatchHeader;
use crate::error::{Error, Result};
use crate::uring::{self, File, WriteChunk};
use glommio::io::{DmaFile, OpenOptions};
use std::path::{Path, PathBuf};

/// Preallocation step for direct-mode segments: O_DIRECT appends into reserved space do not
/// wait on block allocation.
const PREALLOCATE_STEP_BYTES: u64 = 64 << 20;
/// Largest single O_DIRECT write; a group's pieces are written concurrently.
const DIRECT_PIECE_BYTES: u64 = 512 << 10;

pub(crate) fn file_stem(base_offset: i64) -> String {
    format!("{base_offset:020}")
}

pub(crate) struct SegmentPaths {
    pub log: PathBuf,
    pub index: PathBuf,
    pub time_index: PathBuf,
}

impl SegmentPaths {
    pub fn new(dir: &Path, base_offset: i64) -> SegmentPaths {
        let stem = file_stem(base_offset);
        SegmentPaths {
            log: dir.join(format!("{stem}.log")),
            index: dir.join(format!("{stem}.index")),
            time_index: dir.join(format!("{stem}.timeindex")),
        }
    }
}

pub(crate) struct Segment {
    pub base_offset: i64,
    /// Buffered read/write descriptor: buffered-mode writes, every read and splice.
    pub file: File,
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
}

impl Segment {
    /// Creates the files of a new, empty segment.
    pub async fn create(dir: &Path, base_offset: i64) -> Result<Segment> {
        let paths = SegmentPaths::new(dir, base_offset);
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
        Ok(Segment::empty(base_offset, file, paths))
    }

    pub fn empty(base_offset: i64, file: File, paths: SegmentPaths) -> Segment {
        Segment {
            base_offset,
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
        for p in [&self.paths.log, &self.paths.index, &self.paths.time_index] {
            match uring::unlink(p).await {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io("unlink", p, e)),
            }
        }
        Ok(())
    }
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

/// The O_DIRECT side of an active segment in direct mode.
///
/// O_DIRECT writes whole aligned blocks, so the last partial block is kept in memory and
/// rewritten, extended, by the next write. Writes to one segment are issued one at a time by
/// the log's writer, so two writes never race on the same block.
pub(crate) struct DirectTail {
    dma: DmaFile,
    /// Content of the last partial block (file size modulo the alignment).
    tail: Vec<u8>,
    /// Bytes reserved by fallocate from the start of the file.
    allocated_bytes: u64,
}

impl DirectTail {
    /// Opens the O_DIRECT descriptor of a segment whose logical size is `size`, reading back the
    /// partial block that ends there through `file`.
    pub async fn open(path: &Path, size: u64, file: &File) -> Result<DirectTail> {
        let dma = OpenOptions::new()
            .read(true)
            .write(true)
            .dma_open(path)
            .await
            .map_err(|e| Error::io("open O_DIRECT", path, e.into()))?;
        let tail = read_tail(file, size, dma.alignment()).await?;
        Ok(DirectTail {
            dma,
            tail,
            allocated_bytes: 0,
        })
    }

    /// Writes `chunks` at logical position `size`, rewriting the partial block before it.
    ///
    /// The aligned range is cut into pieces of at most `DIRECT_PIECE_BYTES`, written at once:
    /// they cover disjoint blocks, so the device may complete them in any order, and each fits
    /// glommio's registered buffer pool. Only the next call rewrites the last partial block,
    /// after this one has completed.
    pub async fn write(&mut self, size: u64, chunks: &[WriteChunk], path: &Path) -> Result<()> {
        let align = self.dma.alignment();
        let start = size - self.tail.len() as u64;
        debug_assert_eq!(start % align, 0);
        let payload: usize = chunks.iter().map(|c| c.as_slice().len()).sum();
        let logical = self.tail.len() + payload;
        let aligned = self.dma.align_up(logical as u64);
        if start + aligned > self.allocated_bytes {
            // Reserve ahead and let the file size cover it, as fio does: O_DIRECT writes inside
            // the file size do not extend it, which ext4 would otherwise serialise. Recovery
            // cuts the zeroed reserve like any invalid tail; sealing trims it.
            let want = start + aligned + PREALLOCATE_STEP_BYTES;
            self.dma
                .pre_allocate(want, false)
                .await
                .map_err(|e| Error::io("fallocate", path, e.into()))?;
            self.allocated_bytes = want;
        }
        let mut source = Stream::new(&self.tail, chunks);
        let mut writes = Vec::new();
        let mut piece_start = 0u64;
        let mut new_tail = Vec::new();
        while piece_start < aligned {
            let piece_len = (aligned - piece_start).min(DIRECT_PIECE_BYTES);
            let mut buf = self.dma.alloc_dma_buffer(piece_len as usize);
            let out = buf.as_bytes_mut();
            let filled = source.fill(out);
            out[filled..].fill(0);
            let piece_end = piece_start + piece_len;
            if piece_end >= aligned {
                let tail_start = logical - logical % align as usize;
                let from = tail_start - piece_start as usize;
                new_tail = out[from..from + logical % align as usize].to_vec();
            }
            writes.push(self.dma.write_at(buf, start + piece_start));
            piece_start = piece_end;
        }
        let results = futures::future::join_all(writes).await;
        let mut written = 0usize;
        for r in results {
            written += r.map_err(|e| Error::io("write O_DIRECT", path, e.into()))?;
        }
        if written < logical {
            return Err(Error::io(
                "write O_DIRECT",
                path,
                std::io::Error::new(std::io::ErrorKind::WriteZero, "short O_DIRECT write"),
            ));
        }
        self.tail = new_tail;
        Ok(())
    }

    pub async fn close(self) -> Result<()> {
        self.dma
            .close()
            .await
            .map_err(|e| Error::io("close", "O_DIRECT segment", e.into()))
    }
}

/// The bytes of a write, in order: the partial block kept from before, then the chunks.
struct Stream<'a> {
    parts: Vec<&'a [u8]>,
    part: usize,
    at: usize,
}

impl<'a> Stream<'a> {
    fn new(tail: &'a [u8], chunks: &'a [WriteChunk]) -> Stream<'a> {
        let mut parts = Vec::with_capacity(chunks.len() + 1);
        parts.push(tail);
        parts.extend(chunks.iter().map(WriteChunk::as_slice));
        Stream {
            parts,
            part: 0,
            at: 0,
        }
    }

    /// Copies the next bytes into `out`; returns how many (fewer only at the end).
    fn fill(&mut self, out: &mut [u8]) -> usize {
        let mut filled = 0;
        while filled < out.len() && self.part < self.parts.len() {
            let src = &self.parts[self.part][self.at..];
            let n = src.len().min(out.len() - filled);
            out[filled..filled + n].copy_from_slice(&src[..n]);
            filled += n;
            self.at += n;
            if self.at == self.parts[self.part].len() {
                self.part += 1;
                self.at = 0;
            }
        }
        filled
    }
}

/// The bytes of the partial block that ends at `size`.
pub(crate) async fn read_tail(file: &File, size: u64, alignment: u64) -> Result<Vec<u8>> {
    let partial = size % alignment;
    if partial == 0 {
        return Ok(Vec::new());
    }
    let tail = file
        .read_at(size - partial, partial as usize)
        .await
        .map_err(|e| Error::io("read", file.path(), e))?;
    if tail.len() as u64 != partial {
        return Err(Error::Corrupt {
            path: file.path().to_path_buf(),
            position: size - partial,
            reason: "segment shorter than its recorded size".into(),
        });
    }
    Ok(tail)
}
