//! A wake-all event for tasks on one shard.
//!
//! Used where many tasks wait for "something changed" (new data for long-polling fetches, work
//! for a log's writer). A generation counter makes it race-free: a waiter records the generation
//! it has seen and waits for a later one, so a notification between the check and the wait is
//! not lost. A waiter that gives up (its future dropped, e.g. by a timeout) removes itself, so
//! the waiter list never outgrows the number of live waiters.
//!
//! [`FifoGate`] bounds a queue while keeping its order: callers are admitted strictly in the
//! order they asked, so a bound never lets a later append overtake an earlier one.
//!
//! Lives on: one shard; not `Send`.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

#[derive(Default)]
pub struct Notify {
    generation: Cell<u64>,
    waiters: RefCell<Vec<Option<Waker>>>,
    free: RefCell<Vec<usize>>,
}

impl Notify {
    pub fn new() -> Notify {
        Notify::default()
    }

    /// The current generation; pass it to [`Notify::wait_past`].
    pub fn generation(&self) -> u64 {
        self.generation.get()
    }

    /// Wakes every waiter.
    pub fn notify_all(&self) {
        self.generation.set(self.generation.get() + 1);
        let wakers: Vec<Waker> = self
            .waiters
            .borrow_mut()
            .iter_mut()
            .filter_map(Option::take)
            .collect();
        for w in wakers {
            w.wake();
        }
    }

    /// Resolves once the generation has moved past `seen`.
    pub fn wait_past(&self, seen: u64) -> Wait<'_> {
        Wait {
            notify: self,
            seen,
            slot: None,
        }
    }

    fn register(&self, slot: &mut Option<usize>, waker: &Waker) {
        let mut waiters = self.waiters.borrow_mut();
        match *slot {
            Some(i) => waiters[i] = Some(waker.clone()),
            None => {
                let i = match self.free.borrow_mut().pop() {
                    Some(i) => i,
                    None => {
                        waiters.push(None);
                        waiters.len() - 1
                    }
                };
                waiters[i] = Some(waker.clone());
                *slot = Some(i);
            }
        }
    }

    fn unregister(&self, slot: usize) {
        self.waiters.borrow_mut()[slot] = None;
        self.free.borrow_mut().push(slot);
    }
}

pub struct Wait<'a> {
    notify: &'a Notify,
    seen: u64,
    slot: Option<usize>,
}

impl Future for Wait<'_> {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        if this.notify.generation.get() > this.seen {
            if let Some(slot) = this.slot.take() {
                this.notify.unregister(slot);
            }
            return Poll::Ready(());
        }
        this.notify.register(&mut this.slot, cx.waker());
        Poll::Pending
    }
}

impl Drop for Wait<'_> {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            self.notify.unregister(slot);
        }
    }
}

/// Opens once; every waiter, before or after, then passes.
#[derive(Default)]
pub struct Latch {
    open: Cell<bool>,
    opened: Notify,
}

impl Latch {
    pub fn open(&self) {
        self.open.set(true);
        self.opened.notify_all();
    }

    pub async fn wait(&self) {
        loop {
            let seen = self.opened.generation();
            if self.open.get() {
                return;
            }
            self.opened.wait_past(seen).await;
        }
    }
}

/// Admits callers in arrival order while at most `capacity` units are held.
///
/// A caller whose request alone exceeds the capacity is admitted when nothing else is held.
/// A caller that gives up while waiting (its future dropped) gives up its place in line.
///
/// Only the caller at the head of the line can be admitted, so only it is woken: a release,
/// an admission or a departure wakes one waiter, never the whole line. (With a wake-all, 1,000
/// callers queued on one gate cost 501,500 polls, the test below; a produce naming 1,000
/// partitions can queue that many router calls on one shard's outbox.)
pub struct FifoGate {
    capacity: u64,
    used: Cell<u64>,
    next_ticket: Cell<u64>,
    serving: Cell<u64>,
    abandoned: RefCell<BTreeSet<u64>>,
    /// The waker of every caller waiting in line, by ticket.
    waiting: RefCell<BTreeMap<u64, Waker>>,
}

impl FifoGate {
    pub fn new(capacity: u64) -> FifoGate {
        FifoGate {
            capacity,
            used: Cell::new(0),
            next_ticket: Cell::new(0),
            serving: Cell::new(0),
            abandoned: RefCell::new(BTreeSet::new()),
            waiting: RefCell::new(BTreeMap::new()),
        }
    }

    pub fn used(&self) -> u64 {
        self.used.get()
    }

    /// Waits for this caller's turn and for room, then holds `units` until `release`. The
    /// caller's place in line is taken when the returned future is first polled.
    pub fn acquire(&self, units: u64) -> Admission<'_> {
        Admission {
            gate: self,
            ticket: None,
            units,
            admitted: false,
        }
    }

    pub fn release(&self, units: u64) {
        debug_assert!(self.used.get() >= units);
        self.used.set(self.used.get().saturating_sub(units));
        self.wake_head();
    }

    /// Wakes the caller now at the head of the line, if it is waiting.
    fn wake_head(&self) {
        self.skip_abandoned();
        if let Some(w) = self.waiting.borrow().get(&self.serving.get()) {
            w.wake_by_ref();
        }
    }

    fn skip_abandoned(&self) {
        let mut abandoned = self.abandoned.borrow_mut();
        while abandoned.remove(&self.serving.get()) {
            self.serving.set(self.serving.get() + 1);
        }
    }
}

/// A caller's place in a [`FifoGate`]'s line; resolves when it is admitted. Dropped before
/// that, it leaves the line and lets the next caller through.
pub struct Admission<'a> {
    gate: &'a FifoGate,
    ticket: Option<u64>,
    units: u64,
    admitted: bool,
}

impl Future for Admission<'_> {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let gate = this.gate;
        let ticket = *this.ticket.get_or_insert_with(|| {
            let t = gate.next_ticket.get();
            gate.next_ticket.set(t + 1);
            t
        });
        gate.skip_abandoned();
        let used = gate.used.get();
        let room = used == 0 || used + this.units <= gate.capacity;
        if gate.serving.get() == ticket && room {
            gate.used.set(used + this.units);
            gate.serving.set(ticket + 1);
            gate.waiting.borrow_mut().remove(&ticket);
            this.admitted = true;
            // The next caller may fit too.
            gate.wake_head();
            return Poll::Ready(());
        }
        gate.waiting.borrow_mut().insert(ticket, cx.waker().clone());
        Poll::Pending
    }
}

impl Drop for Admission<'_> {
    fn drop(&mut self) {
        let Some(ticket) = self.ticket.filter(|_| !self.admitted) else {
            return; // admitted, or never in line
        };
        let gate = self.gate;
        gate.waiting.borrow_mut().remove(&ticket);
        gate.abandoned.borrow_mut().insert(ticket);
        gate.wake_head();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;
    use std::time::Duration;

    #[test]
    fn the_gate_admits_in_order_and_skips_those_who_left() {
        glommio::LocalExecutor::default().run(async {
            let gate = Rc::new(FifoGate::new(10));
            let order = Rc::new(RefCell::new(Vec::new()));
            gate.acquire(10).await; // full
            let waiters: Vec<_> = [8u64, 1, 5, 1]
                .into_iter()
                .enumerate()
                .map(|(i, units)| {
                    let gate = gate.clone();
                    let order = order.clone();
                    glommio::spawn_local(async move {
                        gate.acquire(units).await;
                        order.borrow_mut().push(i);
                        glommio::timer::sleep(Duration::from_millis(1)).await;
                        gate.release(units);
                    })
                })
                .collect();
            // One caller gives up while waiting.
            let quitter = glommio::timer::timeout(Duration::from_millis(2), async {
                gate.acquire(1).await;
                Ok(())
            });
            glommio::timer::sleep(Duration::from_millis(1)).await;
            assert!(quitter.await.is_err());
            gate.release(10);
            for w in waiters {
                w.await;
            }
            assert_eq!(
                *order.borrow(),
                vec![0, 1, 2, 3],
                "small requests do not overtake"
            );
            gate.acquire(50).await; // larger than the capacity: admitted when empty
            assert_eq!(gate.used(), 50);
        });
    }

    /// Counts the polls of the future it wraps.
    struct Counted<'a, F> {
        inner: Pin<Box<F>>,
        polls: &'a Cell<u64>,
    }

    impl<F: Future> Future for Counted<'_, F> {
        type Output = F::Output;
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
            self.polls.set(self.polls.get() + 1);
            self.inner.as_mut().poll(cx)
        }
    }

    /// Lets every other ready task run once before going on.
    struct YieldOnce(bool);

    impl Future for YieldOnce {
        type Output = ();
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            if self.0 {
                return Poll::Ready(());
            }
            self.0 = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }

    #[test]
    fn a_long_line_is_woken_one_caller_at_a_time() {
        glommio::LocalExecutor::default().run(async {
            const CALLERS: u64 = 1000;
            let gate = Rc::new(FifoGate::new(1));
            let polls = Rc::new(Cell::new(0u64));
            gate.acquire(1).await; // full: everyone below waits in line
            let callers: Vec<_> = (0..CALLERS)
                .map(|_| {
                    let (gate, polls) = (gate.clone(), polls.clone());
                    glommio::spawn_local(async move {
                        let admission = Box::pin(gate.acquire(1));
                        Counted {
                            inner: admission,
                            polls: &polls,
                        }
                        .await;
                        YieldOnce(false).await; // hold across a turn of the executor
                        gate.release(1);
                    })
                })
                .collect();
            glommio::timer::sleep(Duration::from_millis(1)).await;
            gate.release(1);
            for c in callers {
                c.await;
            }
            assert_eq!(gate.used(), 0);
            // A poll to join the line, one when it reaches the head (the caller before took
            // its room) and one when admitted: three each. A wake-all gate polls every caller
            // still waiting at each release, about CALLERS² / 2 in all.
            assert!(
                polls.get() <= 3 * CALLERS + 10,
                "{} polls for {CALLERS} callers",
                polls.get()
            );
        });
    }

    #[test]
    fn waiters_wake_on_notify_and_leave_when_dropped() {
        glommio::LocalExecutor::default().run(async {
            let n = Rc::new(Notify::new());
            let seen = n.generation();
            let n2 = n.clone();
            let waiter = glommio::spawn_local(async move { n2.wait_past(seen).await });
            glommio::timer::sleep(Duration::from_millis(1)).await;
            n.notify_all();
            waiter.await;
            // A notification before the wait starts is not lost.
            let seen = n.generation();
            n.notify_all();
            n.wait_past(seen).await;
            // Timed-out waits do not pile up.
            for _ in 0..100 {
                let g = n.generation();
                let _ = glommio::timer::timeout(Duration::from_micros(10), async {
                    n.wait_past(g).await;
                    Ok(())
                })
                .await;
            }
            assert!(n.waiters.borrow().iter().all(Option::is_none));
            assert!(n.waiters.borrow().len() <= 1);
        });
    }
}
