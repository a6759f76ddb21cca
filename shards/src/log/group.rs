//! One write group: the queued appends that go out in one write, numbered and placed before the
//! write, recorded in the log after it.

use super::cache::CachedBatch;
use super::writer::{Numbering, PendingAppend};
use super::LogInner;
use crate::batch::{self, control, BatchHeader, Stamp, HEADER_BYTES, STAMP_BYTES};
use crate::config::IoMode;
use crate::error::Error;
use crate::types::now_ms;
use crate::uring::WriteChunk;
use bytes::Bytes;
use std::rc::Rc;

/// Batches written by one vectored write at most (two iovecs each, within IOV_MAX).
const GROUP_BATCHES_MAX: usize = 500;
/// Bytes one buffered write carries at most: no more than a shard writes itself (the default
/// `inline_write_bytes_max`), because a larger write goes to io_uring's worker threads and
/// their wake-ups cost more than more, smaller writes. 1 MiB against 16 MiB: 0.47-0.52 s of
/// broker CPU per GB of 1 KiB records against 0.51-0.61, lower in 6 of 7 alternating rounds,
/// e2e latency and 16 partitions unchanged (perf/results/inline-writes/2026-12-07.txt).
const GROUP_BYTES_MAX_BUFFERED: usize = 1 << 20;
/// Bytes one direct write carries at most: smaller groups keep several writes in flight, so
/// the device always has a queue, and a group fits glommio's registered buffers.
const GROUP_BYTES_MAX_DIRECT: usize = 1 << 20;
/// Direct mode does not split what is queued into writes smaller than this.
const DIRECT_SPLIT_BYTES_MIN: usize = 32 << 10;
/// Page-cache bytes of the active segment after which their writeback is started.
const WRITEBACK_STEP_BYTES: u64 = 8 << 20;
/// Recent batch positions kept for mapping a high watermark to a byte position.
const RECENT_POSITIONS_MAX: usize = 4096;

/// What an acknowledged append got.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct AppendInfo {
    pub base_offset: i64,
    pub last_offset: i64,
    pub log_start_offset: i64,
    /// The broker time stamped on the batches of a LogAppendTime topic, else -1.
    pub log_append_time_ms: i64,
}

/// A batch as placed in the file: position, header with its offsets, stamp, and the rest.
pub(crate) struct Placed {
    position: u64,
    header: BatchHeader,
    stamp: Stamp,
    body: Bytes,
}

/// A group numbered and placed, ready to write at `position`.
pub(crate) struct Group {
    pub appends: Vec<PendingAppend>,
    pub position: u64,
    pub end_position: u64,
    pub end_offset: i64,
    pub chunks: Vec<WriteChunk>,
    placed: Vec<Placed>,
    infos: Vec<AppendInfo>,
    records: i64,
}

/// Takes from the queue the appends that go into the active segment in one write, starting at
/// `position` of a segment `segment_bytes` long at most. The first append always goes (into an
/// empty segment, rolled by the caller, when it is big).
///
/// Direct mode spreads what is queued over the `free_slots` writes it may still start, so the
/// device gets several requests at once instead of one that carries everything: producers
/// waiting on their acknowledgement otherwise keep the device at one request at a time.
pub(crate) fn take(inner: &LogInner, position: u64, free_slots: usize) -> Vec<PendingAppend> {
    let segment_bytes = inner.config.borrow().segment_bytes;
    let mut bytes_max = inner
        .writer_tuning
        .write_bytes_max
        .unwrap_or(match inner.mode {
            IoMode::Buffered => GROUP_BYTES_MAX_BUFFERED,
            IoMode::Direct => GROUP_BYTES_MAX_DIRECT,
        });
    let mut queue = inner.queue.borrow_mut();
    if inner.mode == IoMode::Direct && free_slots > 1 {
        let queued: usize = queue.iter().map(|p| p.bytes).sum();
        bytes_max = bytes_max.min((queued / free_slots).max(DIRECT_SPLIT_BYTES_MIN));
    }
    let mut group = Vec::new();
    let (mut bytes, mut batches) = (0usize, 0usize);
    while let Some(next) = queue.front() {
        let fits_segment = position + (bytes + next.bytes) as u64 <= segment_bytes;
        let fits_group =
            bytes + next.bytes <= bytes_max && batches + next.batches.len() <= GROUP_BATCHES_MAX;
        if !(group.is_empty() || fits_segment && fits_group) {
            break;
        }
        bytes += next.bytes;
        batches += next.batches.len();
        group.push(queue.pop_front().expect("front exists"));
    }
    group
}

/// Numbers the group's batches from `next_offset` and lays them out from `position`: each
/// batch becomes its stamped prefix followed by the client's bytes.
pub(crate) fn place(
    appends: Vec<PendingAppend>,
    position: u64,
    mut next_offset: i64,
    log_start: i64,
) -> std::result::Result<Group, (Vec<PendingAppend>, Error)> {
    let batch_count: usize = appends.iter().map(|p| p.batches.len()).sum();
    let mut chunks = Vec::with_capacity(batch_count * 2);
    let mut placed = Vec::with_capacity(batch_count);
    let mut infos = Vec::with_capacity(appends.len());
    let mut pos = position;
    let mut records = 0i64;
    for append in &appends {
        let mut first = None;
        for b in &append.batches {
            let (base, epoch) = match append.numbering {
                Numbering::Assign { leader_epoch } => (next_offset, leader_epoch),
                Numbering::Keep => {
                    if b.header.base_offset < next_offset {
                        let e = Error::OffsetOutOfRange {
                            offset: b.header.base_offset,
                            log_start,
                            log_end: next_offset,
                        };
                        return Err((appends, e));
                    }
                    (b.header.base_offset, b.header.partition_leader_epoch)
                }
            };
            let stamp: Stamp = batch::stamp(&b.bytes, base, epoch);
            let mut header = b.header;
            header.base_offset = base;
            header.partition_leader_epoch = epoch;
            let body = b.bytes.slice(STAMP_BYTES..);
            chunks.push(WriteChunk::Stamp(stamp));
            chunks.push(WriteChunk::Shared(body.clone()));
            placed.push(Placed {
                position: pos,
                header,
                stamp,
                body,
            });
            first.get_or_insert(base);
            pos += b.bytes.len() as u64;
            next_offset = header.last_offset() + 1;
            records += header.record_count as i64;
        }
        infos.push(AppendInfo {
            base_offset: first.expect("non-empty append"),
            last_offset: next_offset - 1,
            log_start_offset: log_start,
            log_append_time_ms: -1,
        });
    }
    Ok(Group {
        appends,
        position,
        end_position: pos,
        end_offset: next_offset,
        chunks,
        placed,
        infos,
        records,
    })
}

impl Group {
    /// Splits off the appends that end beyond `durable_end` (the file does not hold all their
    /// bytes yet: direct mode held back the last partial block), to be acknowledged with the
    /// write that carries them. `None` when every append is on the file.
    pub(crate) fn split_beyond(&mut self, durable_end: u64) -> Option<Group> {
        if durable_end >= self.end_position {
            return None;
        }
        let mut first_placed = 0;
        let mut cut = None;
        for (i, append) in self.appends.iter().enumerate() {
            let last = &self.placed[first_placed + append.batches.len() - 1];
            if last.position + last.header.total_bytes() as u64 > durable_end {
                cut = Some((i, first_placed));
                break;
            }
            first_placed += append.batches.len();
        }
        let (i, first_placed) = cut?;
        let placed = self.placed.split_off(first_placed);
        let records: i64 = placed.iter().map(|p| p.header.record_count as i64).sum();
        let later = Group {
            appends: self.appends.split_off(i),
            position: placed[0].position,
            end_position: self.end_position,
            end_offset: self.end_offset,
            chunks: Vec::new(),
            infos: self.infos.split_off(i),
            placed,
            records,
        };
        self.records -= records;
        self.end_position = later.position;
        self.end_offset = later.placed[0].header.base_offset;
        Some(later)
    }

    /// Takes `earlier` (split off the group written before this one) in front of this group:
    /// its appends are acknowledged when this group's write completes.
    pub(crate) fn absorb_front(&mut self, mut earlier: Group) {
        earlier.appends.append(&mut self.appends);
        earlier.infos.append(&mut self.infos);
        earlier.placed.append(&mut self.placed);
        self.appends = earlier.appends;
        self.infos = earlier.infos;
        self.placed = earlier.placed;
        self.records += earlier.records;
        self.position = earlier.position;
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.appends.is_empty()
    }

    /// The group reached the file: indexes, log end, cache and waiting readers move on; then
    /// the appends are acknowledged (after an fdatasync when the flush policy asks for one).
    pub(crate) fn written(self, inner: &Rc<LogInner>) {
        record(inner, &self.placed);
        start_writeback_if_due(inner);
        let flush_messages = inner.config.borrow().flush_messages;
        let must_flush = {
            let mut st = inner.state.borrow_mut();
            st.unflushed_messages += self.records;
            st.unflushed_messages >= flush_messages
        };
        if !must_flush {
            for (p, info) in self.appends.into_iter().zip(self.infos) {
                p.acknowledge(Ok(info));
            }
            return;
        }
        // The acknowledgement waits for stable storage; the writer goes on meanwhile, and one
        // fdatasync covers every group written before it.
        let inner = inner.clone();
        let (appends, infos) = (self.appends, self.infos);
        glommio::spawn_local(async move {
            let synced = super::flush::sync_data(&inner).await;
            for (p, info) in appends.into_iter().zip(infos) {
                p.acknowledge(match &synced {
                    Ok(()) => Ok(info),
                    Err(e) => Err(e.duplicate()),
                });
            }
        })
        .detach();
    }

    pub(crate) fn failed(self, error: &Error) {
        fail(self.appends, error);
    }
}

pub(crate) fn fail(appends: Vec<PendingAppend>, error: &Error) {
    for p in appends {
        p.acknowledge(Err(error.duplicate()));
    }
}

/// Buffered mode: once `WRITEBACK_STEP_BYTES` of new data sit in the page cache, start their
/// writeback without waiting. The device then takes data steadily, so the periodic fdatasync
/// of the recovery point finds little left to write and appends do not queue behind it.
fn start_writeback_if_due(inner: &Rc<LogInner>) {
    if inner.mode != IoMode::Buffered {
        return;
    }
    let (file, from, to) = {
        let mut st = inner.state.borrow_mut();
        let size = st.active().size;
        let base = st.active().base_offset;
        if st.writeback.0 != base {
            st.writeback = (base, 0);
        }
        let from = st.writeback.1;
        if size < from + WRITEBACK_STEP_BYTES {
            return;
        }
        st.writeback.1 = size;
        (st.active().file.clone(), from, size)
    };
    glommio::spawn_local(async move {
        let Ok(file) = file.get().await else {
            return;
        };
        if let Err(e) = file.start_writeback(from, (to - from) as u32).await {
            tracing::debug!(file = %file.path().display(), error = %e, "starting writeback failed");
        }
    })
    .detach();
}

/// Moves the indexes, the log end and the cache forward over batches now in the file.
fn record(inner: &Rc<LogInner>, placed: &[Placed]) {
    let now = now_ms();
    let index_interval = inner.config.borrow().index_interval_bytes;
    let mut epochs_changed = false;
    {
        let mut st = inner.state.borrow_mut();
        let st = &mut *st;
        let start = placed.first().map(|p| p.position).unwrap_or(0);
        let active = st.segments.last_mut().expect("active segment");
        for p in placed {
            active.record_batch(p.position, &p.header, index_interval);
            if p.header.is_transactional() {
                let marker =
                    control::parse_marker(&p.header, &p.body[HEADER_BYTES - STAMP_BYTES..]);
                if let Some(aborted) = st.txns.observe(&p.header, marker) {
                    active.txn_index.push(aborted);
                }
            }
        }
        active.verified.insert(start, active.size);
        active.first_append_ms.get_or_insert(now);
        for p in placed {
            if st.recent_positions.len() == RECENT_POSITIONS_MAX {
                st.recent_positions.pop_front();
            }
            st.recent_positions
                .push_back((p.header.base_offset, p.position));
            epochs_changed |= inner
                .epochs
                .borrow_mut()
                .assign(p.header.partition_leader_epoch, p.header.base_offset);
        }
        st.end_offset = active.next_offset;
        st.oldest_unflushed_ms.get_or_insert(now);
    }
    if let Some((cache, entries)) = &inner.cache {
        for p in placed {
            cache.insert(
                entries,
                CachedBatch {
                    base_offset: p.header.base_offset,
                    last_offset: p.header.last_offset(),
                    stamp: p.stamp,
                    body: p.body.clone(),
                },
            );
        }
    }
    let stats = &inner.stats;
    stats
        .appended_batches
        .set(stats.appended_batches.get() + placed.len() as u64);
    let bytes: u64 = placed.iter().map(|p| p.header.total_bytes() as u64).sum();
    stats.appended_bytes.set(stats.appended_bytes.get() + bytes);
    let records: u64 = placed.iter().map(|p| p.header.record_count as u64).sum();
    stats
        .appended_records
        .set(stats.appended_records.get() + records);
    if epochs_changed {
        let inner = inner.clone();
        glommio::spawn_local(async move {
            match super::flush::store_epochs(&inner).await {
                Ok(()) | Err(crate::error::Error::Closed(_)) => {}
                Err(e) => {
                    crate::repeated::error("storing leader epochs failed", &inner.dir.display(), &e)
                }
            }
        })
        .detach();
    }
    inner.appended.notify_all();
}
