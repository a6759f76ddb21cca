//! A second io_uring ring per shard, for the operations glommio does not expose.
//!
//! glommio owns the shard's main rings but offers no vectored write from caller-owned buffers,
//! no splice and no fdatasync on descriptors it did not open. This ring runs beside it on the same
//! thread: operations are pushed and submitted at once, and a driver task sleeps in a glommio read
//! of the eventfd the kernel signals on every completion, so the shard parks in glommio's reactor
//! as usual and wakes for either ring.
//!
//! Lives on: every shard thread, one per glommio executor, created on first use. Only that thread
//! touches it. Buffers and descriptors an operation uses are owned by its slot until the kernel has
//! completed it, so dropping an operation's future early is safe.

mod direct;
mod file;
mod ops;
pub mod socket;

pub use direct::{align_up, AlignedBuf, DIRECT_ALIGNMENT};
pub use file::{mkdir, rename, sync_dir, unlink, write_atomically, File};
pub use ops::{splice, WriteChunk};

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
}

/// The per-shard auxiliary ring. Obtain it with [`Ring::current`].
pub struct Ring {
    state: RefCell<State>,
    executor_id: usize,
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
                in_flight: 0,
                in_kernel: 0,
                driver_waker: None,
            }),
            executor_id,
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
        let mut wakers = Vec::new();
        {
            let mut st = self.state.borrow_mut();
            let st = &mut *st;
            let completions: Vec<(u64, i32)> = st
                .uring
                .completion()
                .map(|c| (c.user_data(), c.result()))
                .collect();
            for (user_data, result) in completions {
                let idx = user_data as usize;
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
        for w in wakers {
            w.wake();
        }
    }

    fn in_flight(&self) -> usize {
        self.state.borrow().in_flight
    }
}

/// Waits for completions whenever operations are in flight; parks otherwise.
async fn drive(ring: Rc<Ring>, eventfd: BufferedFile) {
    loop {
        ring.reap();
        if ring.in_flight() == 0 {
            Idle { ring: &ring }.await;
            continue;
        }
        // The kernel bumps the eventfd on each completion; a read returns once it is non-zero,
        // so a completion posted after `reap` is never missed.
        if let Err(e) = eventfd.read_at(0, 8).await {
            tracing::warn!(error = %e, "reading the io_uring eventfd failed");
            glommio::timer::sleep(std::time::Duration::from_millis(1)).await;
        }
    }
}

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
