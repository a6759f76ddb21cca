//! A second io_uring ring per shard, for the operations glommio does not expose.
//!
//! glommio owns the shard's main rings but offers no vectored write from caller-owned buffers,
//! no splice and no fdatasync on descriptors it did not open. This ring runs beside it on the same
//! thread: operations are pushed and submitted at once, and a driver task sleeps in a glommio read
//! of the eventfd the kernel signals on every completion, so the shard parks in glommio's reactor
//! as usual and wakes for either ring.
//!
//! That wakeup is not always delivered. Under load on this machine (kernel 6.18, glommio 0.9) a
//! shard was seen asleep in glommio's reactor for good: once with completions unreaped in this
//! ring and its eventfd signalled, once with this ring idle and nothing to wake the task that
//! waited. Any wakeup of the reactor (a timer, a signal) let it go on; the cause was not found.
//! So a sweeper keeps a timer pending on every shard. While operations are in flight it looks at
//! the ring every [`LATE_COMPLETION_CHECK`], and completions that waited a whole check unreaped
//! make it reap them and restart the driver's read; otherwise it wakes every [`IDLE_HEARTBEAT`].
//! A lost wakeup then costs at most two checks (or one heartbeat) instead of a stalled shard, and
//! each late completion found is counted ([`late_wakeups`], `ferrite_uring_late_wakeups_total`).
//!
//! Lives on: every shard thread, one per glommio executor, created on first use. Only that thread
//! touches it. Buffers and descriptors an operation uses are owned by its slot until the kernel has
//! completed it, so dropping an operation's future early is safe.

mod direct;
mod file;
mod ops;
pub mod pipes;
pub mod socket;

pub use direct::{align_up, AlignedBuf, DIRECT_ALIGNMENT};
pub use file::{mkdir, rename, sync_dir, unlink, write_atomically, File};
pub use ops::{splice, WriteChunk};

use futures::future::Either;
use glommio::io::BufferedFile;
use io_uring::{squeue, IoUring};
use std::any::Any;
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::os::fd::FromRawFd;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

/// How often the sweeper looks for completions the driver was not woken for while operations
/// are in flight (see the module comment). A lost wakeup stalls every operation on the shard for
/// up to twice this; 1 ms made the log's recovery fuzz test (many short fsyncs) 15% slower, 5 ms
/// costs nothing measurable there.
const LATE_COMPLETION_CHECK: Duration = Duration::from_millis(5);

/// How often the sweeper wakes the shard's reactor while this ring is idle, so that no lost
/// wakeup elsewhere leaves the shard asleep for longer. A broker's shards have their own timers
/// besides; this bounds the stall where they have none (tests, a shard with no partitions).
const IDLE_HEARTBEAT: Duration = Duration::from_millis(100);

/// Submission queue depth of a ring unless the shard sets one (`set_ring_entries`);
/// operations beyond it wait in a backlog.
const RING_ENTRIES_DEFAULT: u32 = 256;

thread_local! {
    static RING_ENTRIES: std::cell::Cell<u32> = const { std::cell::Cell::new(RING_ENTRIES_DEFAULT) };
}

/// The depth of the ring this thread creates next (the tuning file's `uring_entries`); call it
/// before the shard's first I/O.
pub fn set_ring_entries(entries: u32) {
    RING_ENTRIES.with(|e| e.set(entries.max(1)));
}

/// Writes of at most this many bytes are made inline by the shard thread unless the shard
/// sets another limit (`set_inline_write_max`); see `File::write_all_at`.
const INLINE_WRITE_MAX_DEFAULT: usize = 1 << 20;

thread_local! {
    static INLINE_WRITE_MAX: Cell<usize> = const { Cell::new(INLINE_WRITE_MAX_DEFAULT) };
}

/// The largest write this thread makes itself instead of through the ring (the tuning file's
/// `inline_write_bytes_max`); 0 sends every write through the ring.
pub fn set_inline_write_max(bytes: usize) {
    INLINE_WRITE_MAX.with(|m| m.set(bytes));
}

pub(crate) fn inline_write_max() -> usize {
    INLINE_WRITE_MAX.with(|m| m.get())
}

type Keepalive = Box<dyn Any>;

enum Slot {
    Free,
    Waiting {
        waker: Option<Waker>,
        keep: Keepalive,
    },
    Done {
        result: i32,
        keep: Keepalive,
    },
    /// The future was dropped; the kernel still owns the buffers until the completion arrives.
    Abandoned {
        _keep: Keepalive,
    },
}

struct State {
    uring: IoUring,
    /// Submission queue entries (the kernel rounds the asked depth up to a power of two).
    entries: usize,
    slots: Vec<Slot>,
    free: Vec<usize>,
    backlog: VecDeque<squeue::Entry>,
    /// Operations not yet completed, whether in the kernel or in the backlog.
    in_flight: usize,
    /// Operations the kernel holds; kept within the ring depth so completions never overflow.
    in_kernel: usize,
    driver_waker: Option<Waker>,
    /// Calls of `reap`, so the sweeper can tell completions nobody came for from new ones.
    reaps: u64,
    /// Times the sweeper found completions that waited a whole check unreaped.
    late_wakeups: u64,
    /// The wakers one `reap` collects, kept between reaps so reaping allocates nothing.
    wakers: Vec<Waker>,
}

/// The per-shard auxiliary ring. Obtain it with [`Ring::current`].
pub struct Ring {
    state: RefCell<State>,
    executor_id: usize,
    /// Bumped by the sweeper to make the driver drop its eventfd read and reap.
    kick: crate::sync::Notify,
}

thread_local! {
    static CURRENT: RefCell<Option<Rc<Ring>>> = const { RefCell::new(None) };
}

impl Ring {
    /// The ring of the glommio executor running on this thread, created on first use.
    ///
    /// Panics outside a glommio executor: every caller runs on a shard.
    pub fn current() -> Rc<Ring> {
        let executor_id = glommio::executor().id();
        CURRENT.with(|current| {
            let mut current = current.borrow_mut();
            if let Some(ring) = current.as_ref() {
                if ring.executor_id == executor_id {
                    return ring.clone();
                }
            }
            let (ring, eventfd) = Ring::new(executor_id).expect("io_uring setup for the shard");
            let ring = Rc::new(ring);
            *current = Some(ring.clone());
            glommio::spawn_local(drive(ring.clone(), eventfd)).detach();
            glommio::spawn_local(sweep(ring.clone())).detach();
            ring
        })
    }

    fn new(executor_id: usize) -> std::io::Result<(Ring, BufferedFile)> {
        let entries = RING_ENTRIES.with(|e| e.get());
        let uring = IoUring::new(entries)?;
        let sq_entries = uring.params().sq_entries() as usize;
        // SAFETY: eventfd returns a new descriptor or -1, checked below.
        let efd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if efd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        uring.submitter().register_eventfd(efd)?;
        // SAFETY: efd is ours and owned from here on by the BufferedFile.
        let eventfd = unsafe { BufferedFile::from_raw_fd(efd) };
        let ring = Ring {
            state: RefCell::new(State {
                uring,
                entries: sq_entries,
                slots: Vec::new(),
                free: Vec::new(),
                backlog: VecDeque::new(),
                wakers: Vec::new(),
                in_flight: 0,
                in_kernel: 0,
                driver_waker: None,
                reaps: 0,
                late_wakeups: 0,
            }),
            executor_id,
            kick: crate::sync::Notify::new(),
        };
        Ok((ring, eventfd))
    }

    /// Submits `entry`; `keep` holds whatever the kernel reads or writes until completion and is
    /// handed back with the result (a negative errno on failure).
    pub fn run<K: Any>(self: &Rc<Self>, entry: squeue::Entry, keep: K) -> Operation<K> {
        let slot = {
            let mut st = self.state.borrow_mut();
            let slot = match st.free.pop() {
                Some(i) => i,
                None => {
                    st.slots.push(Slot::Free);
                    st.slots.len() - 1
                }
            };
            st.slots[slot] = Slot::Waiting {
                waker: None,
                keep: Box::new(keep),
            };
            let entry = entry.user_data(slot as u64);
            st.in_flight += 1;
            if st.in_kernel < st.entries && st.backlog.is_empty() {
                // SAFETY: the entry's buffers live in the slot's keepalive until completion.
                unsafe { st.uring.submission().push(&entry) }
                    .expect("submission queue has room: it is emptied on every submit");
                st.in_kernel += 1;
                if let Err(e) = st.uring.submit() {
                    tracing::warn!(error = %e, "io_uring submit failed; retried by the driver");
                }
            } else {
                st.backlog.push_back(entry);
            }
            if let Some(w) = st.driver_waker.take() {
                w.wake();
            }
            slot
        };
        Operation {
            ring: self.clone(),
            slot,
            finished: Cell::new(false),
            _keep: std::marker::PhantomData,
        }
    }

    /// Moves completions to their slots, waking the waiting futures; refills from the backlog.
    fn reap(&self) {
        let mut wakers;
        {
            let mut st = self.state.borrow_mut();
            let st = &mut *st;
            st.reaps += 1;
            wakers = std::mem::take(&mut st.wakers);
            for completion in st.uring.completion() {
                let (idx, result) = (completion.user_data() as usize, completion.result());
                st.in_flight -= 1;
                st.in_kernel -= 1;
                match std::mem::replace(&mut st.slots[idx], Slot::Free) {
                    Slot::Waiting { waker, keep } => {
                        st.slots[idx] = Slot::Done { result, keep };
                        wakers.extend(waker);
                    }
                    Slot::Abandoned { .. } => st.free.push(idx),
                    Slot::Free | Slot::Done { .. } => {
                        unreachable!("completion for slot {idx} that was not in flight")
                    }
                }
            }
            let mut pushed_any = false;
            while st.in_kernel < st.entries {
                let Some(entry) = st.backlog.pop_front() else {
                    break;
                };
                // SAFETY: as in `run`.
                unsafe { st.uring.submission().push(&entry) }
                    .expect("submission queue has room: it is emptied on every submit");
                st.in_kernel += 1;
                pushed_any = true;
            }
            if pushed_any || !st.uring.submission().is_empty() {
                if let Err(e) = st.uring.submit() {
                    tracing::warn!(error = %e, "io_uring submit failed");
                }
            }
        }
        // Woken outside the borrow: a waker may run code that uses the ring.
        for w in wakers.drain(..) {
            w.wake();
        }
        self.state.borrow_mut().wakers = wakers;
    }

    /// Stops (or restarts) the kernel's eventfd signal for this ring's completions, so a test can
    /// make every wakeup of the driver go missing.
    #[cfg(test)]
    fn silence_completions(&self, silent: bool) {
        let mut st = self.state.borrow_mut();
        let cq = st.uring.completion();
        if silent {
            cq.disable_eventfd();
        } else {
            cq.enable_eventfd();
        }
    }

    fn in_flight(&self) -> usize {
        self.state.borrow().in_flight
    }
}

/// Waits for completions whenever operations are in flight; parks otherwise.
async fn drive(ring: Rc<Ring>, eventfd: BufferedFile) {
    // The read of the eventfd outlives a wait the sweeper does not cut short, so a signal that
    // arrives between waits is not lost.
    let mut signalled = None;
    loop {
        ring.reap();
        if ring.in_flight() == 0 {
            Idle { ring: &ring }.await;
            continue;
        }
        let kicked = ring.kick.generation();
        // The kernel bumps the eventfd on each completion; a read returns once it is non-zero,
        // so a completion posted after `reap` is never missed, unless its wakeup is (see the
        // module comment): then the sweeper's kick ends the wait.
        let read = signalled.get_or_insert_with(|| Box::pin(eventfd.read_at(0, 8)));
        match futures::future::select(read, ring.kick.wait_past(kicked)).await {
            Either::Left((result, _)) => {
                signalled = None;
                if let Err(e) = result {
                    tracing::warn!(error = %e, "reading the io_uring eventfd failed");
                    glommio::timer::sleep(Duration::from_millis(1)).await;
                }
            }
            // A read that was not answered for its signal may never be: start a new one.
            Either::Right(_) => signalled = None,
        }
    }
}

/// Keeps a timer pending on the shard: every `LATE_COMPLETION_CHECK` while operations are in
/// flight, looking for completions that waited a whole check without a reap (it reaps them and
/// kicks the driver), and every `IDLE_HEARTBEAT` otherwise.
async fn sweep(ring: Rc<Ring>) {
    // The reap count when completions were last seen waiting.
    let mut waiting_since: Option<u64> = None;
    loop {
        let busy = ring.in_flight() > 0;
        glommio::timer::sleep(if busy {
            LATE_COMPLETION_CHECK
        } else {
            IDLE_HEARTBEAT
        })
        .await;
        let (ready, reaps) = {
            let mut st = ring.state.borrow_mut();
            let ready = !st.uring.completion().is_empty();
            (ready, st.reaps)
        };
        waiting_since = match (ready, waiting_since) {
            (true, Some(seen)) if seen == reaps => {
                ring.state.borrow_mut().late_wakeups += 1;
                ring.reap();
                ring.kick.notify_all();
                None
            }
            (true, _) => Some(reaps),
            (false, _) => None,
        };
    }
}

/// Times this thread's ring found completions its driver was not woken for (see the module
/// comment); 0 on a thread that has no ring yet.
pub fn late_wakeups() -> u64 {
    CURRENT.with(|current| {
        current
            .borrow()
            .as_ref()
            .map_or(0, |ring| ring.state.borrow().late_wakeups)
    })
}

/// Resolves once an operation is in flight.
struct Idle<'a> {
    ring: &'a Rc<Ring>,
}

impl Future for Idle<'_> {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut st = self.ring.state.borrow_mut();
        if st.in_flight > 0 {
            return Poll::Ready(());
        }
        st.driver_waker = Some(cx.waker().clone());
        Poll::Pending
    }
}

/// One submitted operation; resolves to the kernel's result and the keepalive given to `run`.
pub struct Operation<K> {
    ring: Rc<Ring>,
    slot: usize,
    finished: Cell<bool>,
    _keep: std::marker::PhantomData<K>,
}

impl<K: Any> Future for Operation<K> {
    type Output = (i32, K);
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<(i32, K)> {
        let mut st = self.ring.state.borrow_mut();
        let st = &mut *st;
        match &mut st.slots[self.slot] {
            Slot::Waiting { waker, .. } => {
                *waker = Some(cx.waker().clone());
                Poll::Pending
            }
            Slot::Done { .. } => {
                let Slot::Done { result, keep } =
                    std::mem::replace(&mut st.slots[self.slot], Slot::Free)
                else {
                    unreachable!()
                };
                st.free.push(self.slot);
                self.finished.set(true);
                let keep = *keep
                    .downcast::<K>()
                    .expect("keepalive type of this operation");
                Poll::Ready((result, keep))
            }
            Slot::Free | Slot::Abandoned { .. } => {
                unreachable!("operation polled after completion")
            }
        }
    }
}

impl<K> Drop for Operation<K> {
    fn drop(&mut self) {
        if self.finished.get() {
            return;
        }
        let mut st = self.ring.state.borrow_mut();
        match std::mem::replace(&mut st.slots[self.slot], Slot::Free) {
            Slot::Waiting { keep, .. } => st.slots[self.slot] = Slot::Abandoned { _keep: keep },
            Slot::Done { .. } => st.free.push(self.slot),
            other => st.slots[self.slot] = other,
        }
    }
}

#[cfg(test)]
mod tests;
