//! The append pipeline: a queue of appends and one writer task per log that drains it.
//!
//! Appends are numbered in queue order. The writer takes the queued appends that fit the active
//! segment as a group, numbers and places them after the groups already issued, and starts its
//! write. Up to `WRITES_IN_FLIGHT_MAX` groups are written at once, at consecutive positions, so
//! the device always has work queued; they are recorded in the log and acknowledged strictly in
//! order, each only once it and every group before it has reached the file. A failed write (a
//! full disk) fails its group and every later one; their bytes are cut off the file, the log is
//! unchanged and keeps serving.

use super::group::{self, AppendInfo, Group};
use super::roll;
use super::{LogInner, ValidBatch};
use crate::config::IoMode;
use crate::error::{Error, Result};
use crate::repeated;
use crate::sync::FifoGate;
use futures::channel::oneshot;
use glommio::sync::Permit;
use std::collections::VecDeque;
use std::rc::Rc;

/// Whether the log numbers the batches or keeps the numbers they carry.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Numbering {
    /// A producer's batches: offsets assigned here, stamped with this leader epoch.
    Assign { leader_epoch: i32 },
    /// A replica's batches from the leader: offsets and epochs as the leader wrote them.
    Keep,
}

pub(crate) struct PendingAppend {
    pub(super) batches: Vec<ValidBatch>,
    pub(super) numbering: Numbering,
    pub(super) bytes: usize,
    done: oneshot::Sender<Result<AppendInfo>>,
    _space: QueueSpace,
}

impl PendingAppend {
    pub(super) fn acknowledge(self, outcome: Result<AppendInfo>) {
        let _ = self.done.send(outcome);
    }
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
        let units = bytes.clamp(1, inner.writer_tuning.queued_bytes_max) as u64;
        // In arrival order even when the queue is full, so appends keep the order they came in.
        inner.queue_space.acquire(units).await;
        let space = QueueSpace {
            gate: inner.queue_space.clone(),
            units,
        };
        if inner.closed.get() {
            return Err(inner.closed_error());
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
        result.await.map_err(|_| inner.closed_error())?
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

/// Exclusive use of the log's files for truncation, retention and close: the writer finishes
/// its writes in flight and holds back until the guard is dropped.
pub(crate) struct Exclusive<'a> {
    inner: &'a LogInner,
    _permit: Permit<'a>,
}

impl Drop for Exclusive<'_> {
    fn drop(&mut self) {
        let waiting = &self.inner.exclusive_waiting;
        waiting.set(waiting.get() - 1);
        self.inner.exclusive_done.notify_all();
    }
}

pub(crate) async fn exclusive(inner: &LogInner) -> Result<Exclusive<'_>> {
    inner
        .exclusive_waiting
        .set(inner.exclusive_waiting.get() + 1);
    inner.work.notify_all();
    match inner.write_lock.acquire_permit(1).await {
        Ok(permit) => Ok(Exclusive {
            inner,
            _permit: permit,
        }),
        Err(_) => {
            inner
                .exclusive_waiting
                .set(inner.exclusive_waiting.get() - 1);
            Err(inner.closed_error())
        }
    }
}

/// How a failed append write is reported (see `crate::repeated`).
const APPEND_FAILED: &str = "append write failed";

struct InFlight {
    group: Group,
    write: glommio::Task<Result<()>>,
    /// The file holds every byte below this once the write completes (direct mode may hold
    /// back a partial last block for the next write).
    durable_end: u64,
}

/// Where the next group goes: after every group issued so far.
struct Issued {
    position: u64,
    offset: i64,
}

async fn run(inner: Rc<LogInner>) {
    let mut in_flight: VecDeque<InFlight> = VecDeque::new();
    let mut lock: Option<Permit<'_>> = None;
    let mut issued = Issued {
        position: 0,
        offset: 0,
    };
    loop {
        let seen = inner.work.generation();
        let queued = !inner.queue.borrow().is_empty();
        let held_back = inner.exclusive_waiting.get() > 0;
        if in_flight.is_empty() && (!queued || held_back) {
            lock = None;
            if held_back {
                wait_for_exclusive_users(&inner).await;
                continue;
            }
            if inner.closed.get() {
                break;
            }
            inner.work.wait_past(seen).await;
            continue;
        }
        if queued && !held_back && in_flight.len() < inner.writer_tuning.writes_in_flight {
            if lock.is_none() {
                match inner.write_lock.acquire_permit(1).await {
                    Ok(p) => lock = Some(p),
                    Err(_) => break,
                }
            }
            if in_flight.is_empty() {
                let st = inner.state.borrow();
                issued = Issued {
                    position: st.active().size,
                    offset: st.end_offset,
                };
            }
            // Let the tasks already woken (acknowledged producers sending their next batch)
            // queue first, so one write carries them all.
            yield_once().await;
            match issue_next(&inner, &mut issued, in_flight.len()).await {
                Next::Issued(f) => {
                    in_flight.push_back(f);
                    continue;
                }
                Next::DrainFirst => {}
                Next::Nothing => continue,
            }
        }
        // Direct mode, with room for another write: new appends are issued at once rather than
        // after the oldest write, whose O_DIRECT I/O takes a device round trip; a device fed one
        // write at a time runs well below its bandwidth. Buffered writes finish quickly, and
        // waiting for them lets more appends gather into the next write.
        let room = inner.mode == IoMode::Direct
            && !held_back
            && in_flight.len() < inner.writer_tuning.writes_in_flight;
        let Some(oldest) = in_flight.front_mut() else {
            continue;
        };
        let result = if room {
            let more_work = inner.work.wait_past(seen);
            futures::pin_mut!(more_work);
            match futures::future::select(&mut oldest.write, more_work).await {
                futures::future::Either::Left((result, _)) => result,
                futures::future::Either::Right(_) => continue,
            }
        } else {
            (&mut oldest.write).await
        };
        let oldest = in_flight.pop_front().expect("the write just awaited");
        match result {
            Ok(()) => written(&inner, oldest.group, oldest.durable_end, &mut in_flight).await,
            Err(e) => fail_from(&inner, oldest.group, &e, &mut in_flight).await,
        }
    }
    inner.writer_running.set(false);
    inner.writer_done.notify_all();
}

enum Next {
    Issued(InFlight),
    /// The next group needs a roll, which waits for the writes in flight.
    DrainFirst,
    Nothing,
}

/// A group's write completed: what the file now holds is acknowledged. Appends that end in a
/// block held back for the next write go with the next group in flight, or, when there is none,
/// the held block is written padded now.
async fn written(
    inner: &Rc<LogInner>,
    mut group: Group,
    durable_end: u64,
    in_flight: &mut VecDeque<InFlight>,
) {
    repeated::cleared(APPEND_FAILED);
    let carried = group.split_beyond(durable_end);
    if !group.is_empty() {
        group.written(inner);
    }
    let Some(carried) = carried else { return };
    if let Some(next) = in_flight.front_mut() {
        let carried_appends = &inner.stats.appends_carried;
        carried_appends.set(carried_appends.get() + carried.appends.len() as u64);
        next.group.absorb_front(carried);
        return;
    }
    let path = inner.state.borrow().active().file.path().to_path_buf();
    let held = inner
        .direct
        .borrow_mut()
        .as_mut()
        .and_then(|d| d.prepare_held_tail());
    let result = match held {
        Some(write) => write.run(&path).await,
        None => Ok(()),
    };
    match result {
        Ok(()) => carried.written(inner),
        Err(e) => fail_from(inner, carried, &e, in_flight).await,
    }
}

/// Rolls if the next append needs it, then numbers, places and starts the next group.
async fn issue_next(inner: &Rc<LogInner>, issued: &mut Issued, in_flight: usize) -> Next {
    let idle = in_flight == 0;
    let Some(next_bytes) = inner.queue.borrow().front().map(|p| p.bytes as u64) else {
        return Next::Nothing;
    };
    if roll::needed(inner, issued.position, issued.offset, next_bytes) {
        if !idle {
            return Next::DrainFirst;
        }
        if let Err(e) = roll::roll(inner, issued.offset).await {
            repeated::error("segment roll failed", &inner.dir.display(), &e);
            let queued: Vec<PendingAppend> = inner.queue.borrow_mut().drain(..).collect();
            group::fail(queued, &e);
            return Next::Nothing;
        }
        issued.position = 0;
    }
    let free_slots = inner.writer_tuning.writes_in_flight - in_flight;
    let appends = group::take(inner, issued.position, free_slots);
    if appends.is_empty() {
        return Next::Nothing;
    }
    let log_start = inner.state.borrow().start_offset;
    let mut g = match group::place(appends, issued.position, issued.offset, log_start) {
        Ok(g) => g,
        Err((appends, e)) => {
            group::fail(appends, &e);
            return Next::Nothing;
        }
    };
    issued.position = g.end_position;
    issued.offset = g.end_offset;
    let file = inner.state.borrow().active().file.clone();
    let chunks = std::mem::take(&mut g.chunks);
    let position = g.position;
    let fail_after_writing = faults::take_write_failure();
    // Another write can follow this one at once: direct mode may then hold back its partial
    // last block, which the next write carries.
    let followed =
        !inner.queue.borrow().is_empty() && in_flight + 1 < inner.writer_tuning.writes_in_flight;
    let mut durable_end = g.end_position;
    let write = match inner.mode {
        IoMode::Buffered => {
            let segment_bytes = inner.config.borrow().segment_bytes;
            let ahead = inner
                .reservation
                .ahead(position, g.end_position, segment_bytes);
            glommio::spawn_local(async move {
                let file = file.get().await?;
                if let Some(ahead) = ahead {
                    super::reserve::reserve(&file, ahead);
                }
                file.write_all_at(position, chunks)
                    .await
                    .map_err(|e| Error::io("write", file.path(), e))?;
                faults::injected(fail_after_writing, file.path())
            })
        }
        IoMode::Direct => {
            let prepared = inner
                .direct
                .borrow_mut()
                .as_mut()
                .expect("direct mode has an O_DIRECT tail on the active segment")
                .prepare(position, &chunks, followed);
            durable_end = prepared.durable_end;
            drop(chunks);
            glommio::spawn_local(async move {
                prepared.run(file.path()).await?;
                faults::injected(fail_after_writing, file.path())
            })
        }
    };
    Next::Issued(InFlight {
        group: g,
        write,
        durable_end,
    })
}

/// A write failed: it and every later group in flight fail; their bytes are cut off the file,
/// so neither a later append nor a restart finds a half-written batch there.
async fn fail_from(
    inner: &Rc<LogInner>,
    failed: Group,
    error: &Error,
    in_flight: &mut VecDeque<InFlight>,
) {
    repeated::error(APPEND_FAILED, &inner.dir.display(), error);
    while let Some(later) = in_flight.pop_front() {
        let _ = later.write.await;
        later.group.failed(error);
    }
    let position = failed.position;
    failed.failed(error);
    let file = inner.state.borrow().active().file.clone();
    debug_assert_eq!(inner.state.borrow().active().size, position);
    let file = match file.get().await {
        Ok(file) => file,
        Err(e) => {
            repeated::error("could not cut a failed write", &file.path().display(), &e);
            return;
        }
    };
    if let Err(cut) = file.truncate(position).await {
        repeated::error("could not cut a failed write", &file.path().display(), &cut);
    }
    let taken = inner.direct.borrow_mut().take();
    if let Some(mut direct) = taken {
        if let Err(e) = direct.reset(position, &file).await {
            repeated::error(
                "could not reread the partial block",
                &file.path().display(),
                &e,
            );
        }
        *inner.direct.borrow_mut() = Some(direct);
    }
}

async fn wait_for_exclusive_users(inner: &LogInner) {
    while inner.exclusive_waiting.get() > 0 {
        let seen = inner.exclusive_done.generation();
        if inner.exclusive_waiting.get() == 0 {
            break;
        }
        inner.exclusive_done.wait_past(seen).await;
    }
}

/// Returns after every task that was ready to run has had its turn.
async fn yield_once() {
    let mut yielded = false;
    futures::future::poll_fn(|cx| {
        if yielded {
            return std::task::Poll::Ready(());
        }
        yielded = true;
        cx.waker().wake_by_ref();
        std::task::Poll::Pending
    })
    .await
}

/// Fault injection for tests: the next writes report ENOSPC after their bytes reached the file,
/// the worst case for the cut-back (the bytes are there and must go).
pub(crate) mod faults {
    use crate::error::{Error, Result};
    use std::cell::Cell;
    use std::path::Path;

    thread_local! {
        static FAIL_WRITES: Cell<usize> = const { Cell::new(0) };
    }

    /// Makes the next `n` group writes on this shard fail.
    #[cfg(test)]
    pub(crate) fn fail_next_writes(n: usize) {
        FAIL_WRITES.with(|f| f.set(n));
    }

    pub(super) fn take_write_failure() -> bool {
        FAIL_WRITES.with(|f| {
            let n = f.get();
            if n > 0 {
                f.set(n - 1);
            }
            n > 0
        })
    }

    pub(super) fn injected(fail: bool, path: &Path) -> Result<()> {
        if fail {
            return Err(Error::io(
                "write",
                path,
                std::io::Error::from_raw_os_error(libc::ENOSPC),
            ));
        }
        Ok(())
    }
}
