//! The append pipeline: a queue of appends and one writer task per log that drains it.
//!
//! Appends are numbered in queue order. The writer takes every queued append that fits the
//! active segment (rolling first when the next one does not), writes them with one vectored
//! write, and only then moves the log end and acknowledges. A failed write (a full disk) is cut
//! back off the file and fails the appends of that group; the log is unchanged and keeps serving.

use super::cache::CachedBatch;
use super::segment::{self, DirectTail, Segment};
use super::{LogInner, ValidBatch};
use crate::batch::{self, Stamp, STAMP_BYTES};
use crate::config::IoMode;
use crate::error::{Error, Result};
use crate::sync::FifoGate;
use crate::types::now_ms;
use crate::uring::WriteChunk;
use futures::channel::oneshot;
use std::rc::Rc;

/// Batches written by one vectored write at most (two iovecs each, within IOV_MAX).
const GROUP_BATCHES_MAX: usize = 500;
/// Bytes written by one vectored write at most.
const GROUP_BYTES_MAX: usize = 16 << 20;
/// Recent batch positions kept for mapping a high watermark to a byte position.
const RECENT_POSITIONS_MAX: usize = 4096;

/// What an acknowledged append got.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct AppendInfo {
    pub base_offset: i64,
    pub last_offset: i64,
    pub log_start_offset: i64,
}

/// Whether the log numbers the batches or keeps the numbers they carry.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Numbering {
    /// A producer's batches: offsets assigned here, stamped with this leader epoch.
    Assign { leader_epoch: i32 },
    /// A replica's batches from the leader: offsets and epochs as the leader wrote them.
    Keep,
}

pub(crate) struct PendingAppend {
    batches: Vec<ValidBatch>,
    numbering: Numbering,
    bytes: usize,
    done: oneshot::Sender<Result<AppendInfo>>,
    _space: QueueSpace,
}

/// Queue room held by a pending append, given back once it is written (or failed).
struct QueueSpace {
    gate: Rc<FifoGate>,
    units: u64,
}

impl Drop for QueueSpace {
    fn drop(&mut self) {
        self.gate.release(self.units);
    }
}

impl super::Log {
    /// Appends a producer's validated batches as one unit; resolves once they have reached the
    /// kernel (and stable storage, when `flush.messages` says so).
    pub async fn append(&self, batches: Vec<ValidBatch>, leader_epoch: i32) -> Result<AppendInfo> {
        self.enqueue(batches, Numbering::Assign { leader_epoch })
            .await
    }

    /// Appends batches replicated from the leader, keeping their offsets; each must start at
    /// or after the log end.
    pub async fn append_as_follower(&self, batches: Vec<ValidBatch>) -> Result<AppendInfo> {
        self.enqueue(batches, Numbering::Keep).await
    }

    async fn enqueue(&self, batches: Vec<ValidBatch>, numbering: Numbering) -> Result<AppendInfo> {
        assert!(!batches.is_empty(), "an append holds at least one batch");
        let inner = &self.inner;
        let bytes: usize = batches.iter().map(|b| b.bytes.len()).sum();
        let units = bytes.clamp(1, super::QUEUED_BYTES_MAX) as u64;
        // In arrival order even when the queue is full, so appends keep the order they came in.
        inner.queue_space.acquire(units).await;
        let space = QueueSpace {
            gate: inner.queue_space.clone(),
            units,
        };
        if inner.closed.get() {
            return Err(Error::Closed(inner.dir.clone()));
        }
        let (done, result) = oneshot::channel();
        inner.queue.borrow_mut().push_back(PendingAppend {
            batches,
            numbering,
            bytes,
            done,
            _space: space,
        });
        inner.work.notify_all();
        result.await.map_err(|_| Error::Closed(inner.dir.clone()))?
    }
}

/// Starts the writer task of a freshly opened log.
pub(crate) fn spawn(inner: &Rc<LogInner>) {
    inner.writer_running.set(true);
    glommio::spawn_local(run(inner.clone())).detach();
}

/// Closes the queue, lets the writer finish what is queued, and waits for it to exit.
pub(crate) async fn stop(inner: &Rc<LogInner>) {
    inner.closed.set(true);
    inner.work.notify_all();
    while inner.writer_running.get() {
        let seen = inner.writer_done.generation();
        if !inner.writer_running.get() {
            break;
        }
        inner.writer_done.wait_past(seen).await;
    }
}

async fn run(inner: Rc<LogInner>) {
    loop {
        let seen = inner.work.generation();
        if inner.queue.borrow().is_empty() {
            if inner.closed.get() {
                break;
            }
            inner.work.wait_past(seen).await;
            continue;
        }
        let Ok(_lock) = inner.write_lock.acquire_permit(1).await else {
            break;
        };
        if let Err(e) = roll_if_needed(&inner).await {
            tracing::error!(log = %inner.dir.display(), error = %e, "segment roll failed");
            fail_all_queued(&inner, &e);
            continue;
        }
        let group = take_group(&inner);
        let outcome = write_group(&inner, &group).await;
        complete(&inner, group, outcome);
    }
    inner.writer_running.set(false);
    inner.writer_done.notify_all();
}

/// Takes the appends that go into the active segment in one write.
fn take_group(inner: &LogInner) -> Vec<PendingAppend> {
    let segment_bytes = inner.config.borrow().segment_bytes;
    let active_size = inner.state.borrow().active().size;
    let mut queue = inner.queue.borrow_mut();
    let mut group = Vec::new();
    let (mut bytes, mut batches) = (0usize, 0usize);
    while let Some(next) = queue.front() {
        let fits_segment = active_size + (bytes + next.bytes) as u64 <= segment_bytes;
        let fits_group = bytes + next.bytes <= GROUP_BYTES_MAX
            && batches + next.batches.len() <= GROUP_BATCHES_MAX;
        // The first append always goes: into an empty segment (rolled by the caller) if big.
        if !(group.is_empty() || fits_segment && fits_group) {
            break;
        }
        bytes += next.bytes;
        batches += next.batches.len();
        group.push(queue.pop_front().expect("front exists"));
    }
    group
}

/// Rolls to a new segment when the next append does not fit the active one or it is too old.
async fn roll_if_needed(inner: &Rc<LogInner>) -> Result<()> {
    let config = inner.config.borrow().clone();
    let next_bytes = match inner.queue.borrow().front() {
        Some(p) => p.bytes as u64,
        None => return Ok(()),
    };
    let (needs_roll, next_base) = {
        let st = inner.state.borrow();
        let active = st.active();
        let too_big = active.size > 0 && active.size + next_bytes > config.segment_bytes;
        let too_old = active
            .first_append_ms
            .is_some_and(|t| now_ms() - t >= config.segment_ms);
        // Index entries hold positions and relative offsets as u32.
        let offsets_overflow = st.end_offset - active.base_offset > (u32::MAX / 2) as i64;
        (too_big || too_old || offsets_overflow, st.end_offset)
    };
    if needs_roll {
        roll(inner, next_base).await?;
    }
    Ok(())
}

/// Seals the active segment (trimmed, synced, final index entries) and starts a new one at
/// `next_base`. The caller holds the write lock.
pub(crate) async fn roll(inner: &Rc<LogInner>, next_base: i64) -> Result<()> {
    let taken = inner.direct.borrow_mut().take();
    if let Some(direct) = taken {
        direct.close().await?;
    }
    let (file, size, writes) = {
        let mut st = inner.state.borrow_mut();
        let active = st.active_mut();
        active.seal_indexes();
        (active.file.clone(), active.size, active.index_writes())
    };
    segment::trim_file(&file, size).await?;
    file.fdatasync()
        .await
        .map_err(|e| Error::io("fdatasync", file.path(), e))?;
    segment::write_indexes(&writes, true).await?;
    let new = Segment::create(&inner.dir, next_base).await?;
    let direct = match inner.mode {
        IoMode::Direct => Some(DirectTail::open(&new.paths.log, 0, &new.file).await?),
        IoMode::Buffered => None,
    };
    crate::uring::sync_dir(&inner.dir)
        .await
        .map_err(|e| Error::io("fsync", &inner.dir, e))?;
    let mut st = inner.state.borrow_mut();
    let sealed = st.active_mut();
    sealed.indexes_persisted(&writes);
    st.segments.push(new);
    st.recent_positions.clear();
    *inner.direct.borrow_mut() = direct;
    tracing::debug!(log = %inner.dir.display(), base = next_base, "rolled segment");
    Ok(())
}

struct Written {
    infos: Vec<AppendInfo>,
    records: i64,
}

async fn write_group(inner: &Rc<LogInner>, group: &[PendingAppend]) -> Result<Written> {
    let (file, position, mut next, index_interval, log_start) = {
        let st = inner.state.borrow();
        let a = st.active();
        (
            a.file.clone(),
            a.size,
            st.end_offset,
            inner.config.borrow().index_interval_bytes,
            st.segments[0].base_offset,
        )
    };
    let batch_count: usize = group.iter().map(|p| p.batches.len()).sum();
    let mut chunks = Vec::with_capacity(batch_count * 2);
    let mut placed = Vec::with_capacity(batch_count);
    let mut infos = Vec::with_capacity(group.len());
    let mut pos = position;
    let mut records = 0i64;
    for append in group {
        let mut first = None;
        for b in &append.batches {
            let (base, epoch) = match append.numbering {
                super::writer::Numbering::Assign { leader_epoch } => (next, leader_epoch),
                super::writer::Numbering::Keep => {
                    if b.header.base_offset < next {
                        return Err(Error::OffsetOutOfRange {
                            offset: b.header.base_offset,
                            log_start,
                            log_end: next,
                        });
                    }
                    (b.header.base_offset, b.header.partition_leader_epoch)
                }
            };
            let stamp: Stamp = batch::stamp(&b.bytes, base, epoch);
            let mut header = b.header;
            header.base_offset = base;
            header.partition_leader_epoch = epoch;
            chunks.push(WriteChunk::Stamp(stamp));
            chunks.push(WriteChunk::Shared(b.bytes.slice(STAMP_BYTES..)));
            placed.push((pos, header, stamp, b.bytes.slice(STAMP_BYTES..)));
            first.get_or_insert(base);
            pos += b.bytes.len() as u64;
            next = header.last_offset() + 1;
            records += header.record_count as i64;
        }
        infos.push(AppendInfo {
            base_offset: first.expect("non-empty append"),
            last_offset: next - 1,
            log_start_offset: log_start,
        });
    }
    let written = match inner.mode {
        IoMode::Buffered => file
            .write_all_at(position, chunks)
            .await
            .map_err(|e| Error::io("write", file.path(), e)),
        IoMode::Direct => {
            let mut direct = inner
                .direct
                .borrow_mut()
                .take()
                .expect("direct mode has an O_DIRECT tail on the active segment");
            let r = direct.write(position, &chunks, file.path()).await;
            *inner.direct.borrow_mut() = Some(direct);
            r
        }
    };
    if let Err(e) = written {
        // Whatever part reached the file lies beyond the log end: cut it, so a later append
        // (or a restart) finds no half-written batch there.
        if let Err(cut) = file.truncate(position).await {
            tracing::error!(file = %file.path().display(), error = %cut, "could not cut a failed write");
        }
        return Err(e);
    }
    record_written(inner, &placed, index_interval);
    Ok(Written { infos, records })
}

/// Moves the indexes, the log end and the cache forward over batches now in the file.
fn record_written(
    inner: &Rc<LogInner>,
    placed: &[(u64, batch::BatchHeader, Stamp, bytes::Bytes)],
    index_interval: u32,
) {
    let now = now_ms();
    let mut epochs_changed = false;
    {
        let mut st = inner.state.borrow_mut();
        let st = &mut *st;
        let start = placed.first().map(|p| p.0).unwrap_or(0);
        let active = st.segments.last_mut().expect("active segment");
        for (pos, header, _, _) in placed {
            active.record_batch(*pos, header, index_interval);
        }
        active.verified.insert(start, active.size);
        active.first_append_ms.get_or_insert(now);
        for (pos, header, _, _) in placed {
            if st.recent_positions.len() == RECENT_POSITIONS_MAX {
                st.recent_positions.pop_front();
            }
            st.recent_positions.push_back((header.base_offset, *pos));
            epochs_changed |= inner
                .epochs
                .borrow_mut()
                .assign(header.partition_leader_epoch, header.base_offset);
        }
        st.end_offset = active.next_offset;
        st.oldest_unflushed_ms.get_or_insert(now);
    }
    if let Some((cache, entries)) = &inner.cache {
        for (_, header, stamp, body) in placed {
            cache.insert(
                entries,
                CachedBatch {
                    base_offset: header.base_offset,
                    last_offset: header.last_offset(),
                    stamp: *stamp,
                    body: body.clone(),
                },
            );
        }
    }
    let stats = &inner.stats;
    stats
        .appended_batches
        .set(stats.appended_batches.get() + placed.len() as u64);
    let bytes: u64 = placed.iter().map(|p| p.1.total_bytes() as u64).sum();
    stats.appended_bytes.set(stats.appended_bytes.get() + bytes);
    if epochs_changed {
        let inner = inner.clone();
        glommio::spawn_local(async move {
            if let Err(e) = super::flush::store_epochs(&inner).await {
                tracing::error!(log = %inner.dir.display(), error = %e, "storing leader epochs failed");
            }
        })
        .detach();
    }
    inner.appended.notify_all();
}

/// Acknowledges (or fails) each append of a written group, after an fdatasync when the flush
/// policy asks for one.
fn complete(inner: &Rc<LogInner>, group: Vec<PendingAppend>, outcome: Result<Written>) {
    match outcome {
        Err(e) => {
            for p in group {
                let _ = p.done.send(Err(e.duplicate()));
            }
        }
        Ok(written) => {
            let flush_messages = inner.config.borrow().flush_messages;
            let must_flush = {
                let mut st = inner.state.borrow_mut();
                st.unflushed_messages += written.records;
                st.unflushed_messages >= flush_messages
            };
            if !must_flush {
                for (p, info) in group.into_iter().zip(written.infos) {
                    let _ = p.done.send(Ok(info));
                }
                return;
            }
            // The acknowledgement waits for stable storage; the writer goes on with the next
            // group meanwhile, and one fdatasync covers every group written before it.
            let inner = inner.clone();
            glommio::spawn_local(async move {
                let synced = super::flush::sync_data(&inner).await;
                for (p, info) in group.into_iter().zip(written.infos) {
                    let _ = p.done.send(match &synced {
                        Ok(()) => Ok(info),
                        Err(e) => Err(e.duplicate()),
                    });
                }
            })
            .detach();
        }
    }
}

fn fail_all_queued(inner: &LogInner, error: &Error) {
    let pending: Vec<PendingAppend> = inner.queue.borrow_mut().drain(..).collect();
    for p in pending {
        let _ = p.done.send(Err(error.duplicate()));
    }
}
