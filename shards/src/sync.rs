//! A wake-all event for tasks on one shard.
//!
//! Used where many tasks wait for "something changed" (new data for long-polling fetches, work
//! for a log's writer). A generation counter makes it race-free: a waiter records the generation
//! it has seen and waits for a later one, so a notification between the check and the wait is
//! not lost. A waiter that gives up (its future dropped, e.g. by a timeout) removes itself, so
//! the waiter list never outgrows the number of live waiters.
//!
//! Lives on: one shard; not `Send`.

use std::cell::{Cell, RefCell};
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;
    use std::time::Duration;

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
