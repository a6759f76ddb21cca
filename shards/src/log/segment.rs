//! One segment: a `.log` file of batches from a base offset, with its two sparse indexes.
//!
//! Lives on: the shard that owns the partition. Its read handle (`file`) may be cloned out to
//! any shard: bytes below `size` never change while the segment exists, except by truncation
//! on a replica.

use super::index::{IndexWrite, OffsetIndex, TimeIndex};
use super::verified::VerifiedRanges;
use crate::batch::BatchHeader;
use crate::error::{Error, Result};
use crate::sync::Latch;
use crate::uring::{self, File, WriteChunk};
use glommio::io::{DmaBuffer, DmaFile, OpenOptions};
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// Preallocation step for direct-mode segments: O_DIRECT appends into reserved space do not
/// wait on block allocation.
const PREALLOCATE_STEP_BYTES: u64 = 64 << 20;
/// Largest single O_DIRECT write; a group's pieces are written concurrently.
const DIRECT_PIECE_BYTES: u64 = 512 << 10;

static NEXT_SEGMENT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

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
    /// Unique in the process: a cleaned segment has its predecessor's base but not its id.
    pub id: u64,
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
        Ok(Segment::empty(base_offset, file, paths))
    }

    pub fn empty(base_offset: i64, file: File, paths: SegmentPaths) -> Segment {
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
/// rewritten, extended, by the next write. Several writes may be in flight: each covers blocks
/// after the previous one's, except its first block when it completes a partial block the
/// previous write ended in — that one block waits for the previous write to finish, so the two
/// writes of it reach the device in order.
pub(crate) struct DirectTail {
    dma: Rc<DmaFile>,
    /// Content of the last partial block (file size modulo the alignment), as last prepared.
    tail: Vec<u8>,
    /// Bytes reserved by fallocate from the start of the file.
    allocated_bytes: u64,
    /// Completion of the last prepared write.
    last_write: Option<Rc<Latch>>,
}

/// A prepared O_DIRECT write: buffers filled, I/O not yet issued.
pub(crate) struct DirectWrite {
    dma: Rc<DmaFile>,
    preallocate_to: Option<u64>,
    /// The block shared with the previous write, and that write's completion.
    head: Option<(DmaBuffer, u64, Option<Rc<Latch>>)>,
    rest: Vec<(DmaBuffer, u64)>,
    done: Rc<Latch>,
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
            dma: Rc::new(dma),
            tail,
            allocated_bytes: 0,
            last_write: None,
        })
    }

    /// Copies `chunks`, which go at logical position `size`, into aligned buffers (with the
    /// partial block before them) and returns the write to run.
    pub fn prepare(&mut self, size: u64, chunks: &[WriteChunk]) -> DirectWrite {
        let align = self.dma.alignment();
        let start = size - self.tail.len() as u64;
        debug_assert_eq!(start % align, 0);
        let payload: usize = chunks.iter().map(|c| c.as_slice().len()).sum();
        let logical = self.tail.len() + payload;
        let aligned = self.dma.align_up(logical as u64);
        let preallocate_to = (start + aligned > self.allocated_bytes).then(|| {
            // Reserve ahead and let the file size cover it, as fio does: O_DIRECT writes
            // inside the file size do not extend it, which ext4 would otherwise serialise.
            // Recovery cuts the zeroed reserve like any invalid tail; sealing trims it.
            let want = start + aligned + PREALLOCATE_STEP_BYTES;
            self.allocated_bytes = want;
            want
        });
        let shares_block = !self.tail.is_empty();
        let mut source = Stream::new(&self.tail, chunks);
        let mut head = None;
        let mut rest = Vec::new();
        let mut new_tail = Vec::new();
        let mut piece_start = 0u64;
        while piece_start < aligned {
            let piece_len = if shares_block && piece_start == 0 {
                align
            } else {
                (aligned - piece_start).min(DIRECT_PIECE_BYTES)
            };
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
            if shares_block && piece_start == 0 {
                head = Some((buf, start, self.last_write.clone()));
            } else {
                rest.push((buf, start + piece_start));
            }
            piece_start = piece_end;
        }
        self.tail = new_tail;
        let done = Rc::new(Latch::default());
        self.last_write = Some(done.clone());
        DirectWrite {
            dma: self.dma.clone(),
            preallocate_to,
            head,
            rest,
            done,
        }
    }

    /// After a failed write or a truncation to `size`: the partial block's content, read back
    /// from `file`, and no write to wait for.
    pub async fn reset(&mut self, size: u64, file: &File) -> Result<()> {
        self.tail = read_tail(file, size, self.dma.alignment()).await?;
        self.last_write = None;
        self.allocated_bytes = 0;
        Ok(())
    }

    pub async fn close(self) -> Result<()> {
        let dma = Rc::try_unwrap(self.dma).map_err(|_| {
            Error::io(
                "close",
                "O_DIRECT segment",
                std::io::Error::other("a write is still in flight"),
            )
        })?;
        dma.close()
            .await
            .map_err(|e| Error::io("close", "O_DIRECT segment", e.into()))
    }
}

impl DirectWrite {
    /// Issues the pieces at once (the shared block after the previous write) and waits for all.
    pub async fn run(self, path: &Path) -> Result<()> {
        let done = self.done.clone();
        let result = self.issue(path).await;
        // Opened even on failure: the next write then fails too, and the writer resets.
        done.open();
        result
    }

    async fn issue(self, path: &Path) -> Result<()> {
        let DirectWrite {
            dma,
            preallocate_to,
            head,
            rest,
            done: _,
        } = self;
        if let Some(want) = preallocate_to {
            dma.pre_allocate(want, false)
                .await
                .map_err(|e| Error::io("fallocate", path, e.into()))?;
        }
        let rest = futures::future::join_all(
            rest.into_iter()
                .map(|(buf, pos)| write_piece(&dma, buf, pos)),
        );
        let head = async {
            match head {
                None => Ok(()),
                Some((buf, pos, after)) => {
                    if let Some(previous) = after {
                        previous.wait().await;
                    }
                    write_piece(&dma, buf, pos).await
                }
            }
        };
        let (head, rest) = futures::future::join(head, rest).await;
        let io = |e: std::io::Error| Error::io("write O_DIRECT", path, e);
        head.map_err(io)?;
        for r in rest {
            r.map_err(io)?;
        }
        Ok(())
    }
}

async fn write_piece(dma: &DmaFile, buf: DmaBuffer, pos: u64) -> std::io::Result<()> {
    let len = buf.len();
    let written = dma.write_at(buf, pos).await?;
    if written < len {
        return Err(std::io::Error::new(
            std::io::ErrorKind::WriteZero,
            "short O_DIRECT write",
        ));
    }
    Ok(())
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
