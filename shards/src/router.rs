//! Cross-core calls: run a closure on the shard that owns the data, get its result back.
//!
//! One bounded channel per ordered pair of shards, created before the shards start. A call to
//! the caller's own shard is a plain local call. Calls to one shard from one shard run in the
//! order they were made, which is what keeps one connection's pipelined produce requests in
//! order on the partitions they share.
//!
//! Lives on: every shard holds its own `Router`; the channel ends are created on the main
//! thread and handed to each shard before it starts.

use crate::placement::ShardId;
use crate::sync::{FifoGate, Latch};
use futures::channel::oneshot;
use futures::future::LocalBoxFuture;
use glommio::channels::shared_channel::{self, ConnectedSender, SharedReceiver, SharedSender};
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;

/// A unit of work sent to another shard, run there with that shard's state.
pub type Job<S> = Box<dyn FnOnce(Rc<S>) -> LocalBoxFuture<'static, ()> + Send>;

/// One shard's ends of the channel matrix, before it is connected on its executor.
pub struct Endpoints<S: 'static> {
    shard: ShardId,
    capacity: usize,
    senders: Vec<Option<SharedSender<Job<S>>>>,
    receivers: Vec<Option<SharedReceiver<Job<S>>>>,
}

/// Creates the channels between `shards` shards, each holding up to `capacity` calls in flight.
pub fn mesh<S: 'static>(shards: usize, capacity: usize) -> Vec<Endpoints<S>> {
    let mut senders: Vec<Vec<Option<SharedSender<Job<S>>>>> = (0..shards)
        .map(|_| (0..shards).map(|_| None).collect())
        .collect();
    let mut receivers: Vec<Vec<Option<SharedReceiver<Job<S>>>>> = (0..shards)
        .map(|_| (0..shards).map(|_| None).collect())
        .collect();
    for from in 0..shards {
        for to in 0..shards {
            if from != to {
                let (tx, rx) = shared_channel::new_bounded(capacity);
                senders[from][to] = Some(tx);
                receivers[to][from] = Some(rx);
            }
        }
    }
    senders
        .into_iter()
        .zip(receivers)
        .enumerate()
        .map(|(i, (senders, receivers))| Endpoints {
            shard: ShardId(i),
            capacity,
            senders,
            receivers,
        })
        .collect()
}

/// Calls made by this shard, for metrics.
#[derive(Default, Debug)]
pub struct RouterStats {
    pub local_calls: Cell<u64>,
    pub remote_calls: Cell<u64>,
    /// Remote calls that found the target's channel full and waited in the outbox.
    pub full_channel_waits: Cell<u64>,
}

pub struct Router<S: 'static> {
    shard: ShardId,
    shards: usize,
    outboxes: Vec<Option<Rc<Outbox<S>>>>,
    state: Rc<S>,
    stats: RouterStats,
    /// Calls from other shards wait for it: the state must be whole before it serves them.
    inbox_open: Rc<Latch>,
}

/// Calls waiting to enter one target's channel, in the order they were made.
///
/// A full channel must not let a later call overtake an earlier one, so calls queue here and a
/// pump task moves them into the channel one by one. The gate bounds the queue: callers beyond
/// it wait, in order.
struct Outbox<S: 'static> {
    sender: ConnectedSender<Job<S>>,
    queue: RefCell<VecDeque<Job<S>>>,
    gate: FifoGate,
    pumping: Cell<bool>,
}

impl<S: 'static> Outbox<S> {
    fn push(self: &Rc<Self>, job: Job<S>, stats: &RouterStats) {
        // Straight into the channel only when nothing is ahead: no queued call, and no call
        // the pump has taken out and is still waiting to send.
        let job = if self.queue.borrow().is_empty() && !self.pumping.get() {
            match self.sender.try_send(job) {
                Ok(()) => {
                    self.gate.release(1);
                    return;
                }
                Err(glommio::GlommioError::WouldBlock(glommio::ResourceType::Channel(job))) => job,
                Err(_) => {
                    self.gate.release(1); // the target stopped: the caller sees its answer dropped
                    return;
                }
            }
        } else {
            job
        };
        stats
            .full_channel_waits
            .set(stats.full_channel_waits.get() + 1);
        self.queue.borrow_mut().push_back(job);
        if !self.pumping.get() {
            self.pumping.set(true);
            let outbox = self.clone();
            glommio::spawn_local(async move {
                loop {
                    let next = outbox.queue.borrow_mut().pop_front();
                    let Some(job) = next else { break };
                    let _ = outbox.sender.send(job).await;
                    outbox.gate.release(1);
                }
                outbox.pumping.set(false);
            })
            .detach();
        }
    }
}

impl<S: 'static> Endpoints<S> {
    pub fn shard(&self) -> ShardId {
        self.shard
    }

    /// Connects the channels on this shard's executor. Calls from the others are served with
    /// `state` once the router's inbox is opened (`open_inbox`): until then they wait in the
    /// channels, so a shard still starting never runs another shard's call half-ready.
    pub async fn connect(self, state: Rc<S>) -> Router<S> {
        let shards = self.senders.len();
        // Each end waits for its peer to connect the other end: connect them all at once.
        let senders = futures::future::join_all(self.senders.into_iter().map(|s| async move {
            match s {
                Some(s) => Some(s.connect().await),
                None => None,
            }
        }));
        let receivers =
            futures::future::join_all(self.receivers.into_iter().flatten().map(|r| r.connect()));
        let (senders, receivers) = futures::future::join(senders, receivers).await;
        let inbox_open = Rc::new(Latch::default());
        for receiver in receivers {
            let state = state.clone();
            let inbox_open = inbox_open.clone();
            glommio::spawn_local(async move {
                inbox_open.wait().await;
                while let Some(job) = receiver.recv().await {
                    glommio::spawn_local(job(state.clone())).detach();
                }
            })
            .detach();
        }
        let capacity = self.capacity;
        Router {
            shard: self.shard,
            shards,
            outboxes: senders
                .into_iter()
                .map(|s| {
                    s.map(|sender| {
                        Rc::new(Outbox {
                            sender,
                            queue: RefCell::new(VecDeque::new()),
                            gate: FifoGate::new(capacity as u64),
                            pumping: Cell::new(false),
                        })
                    })
                })
                .collect(),
            state,
            stats: RouterStats::default(),
            inbox_open,
        }
    }
}

impl<S: 'static> Router<S> {
    pub fn shard(&self) -> ShardId {
        self.shard
    }

    pub fn shard_count(&self) -> usize {
        self.shards
    }

    pub fn stats(&self) -> &RouterStats {
        &self.stats
    }

    /// Starts serving the calls other shards send here (they wait until then).
    pub fn open_inbox(&self) {
        self.inbox_open.open();
    }

    /// Runs `f` on `target` with its state and returns the result. `None` when the target
    /// shard has stopped.
    pub async fn call<R, F>(&self, target: ShardId, f: F) -> Option<R>
    where
        R: Send + 'static,
        F: FnOnce(Rc<S>) -> LocalBoxFuture<'static, R> + Send + 'static,
    {
        if target == self.shard {
            self.stats.local_calls.set(self.stats.local_calls.get() + 1);
            return Some(f(self.state.clone()).await);
        }
        self.stats
            .remote_calls
            .set(self.stats.remote_calls.get() + 1);
        let (tx, rx) = oneshot::channel();
        let job: Job<S> = Box::new(move |state| {
            Box::pin(async move {
                let _ = tx.send(f(state).await);
            })
        });
        let outbox = self.outboxes.get(target.0)?.as_ref()?;
        outbox.gate.acquire(1).await;
        outbox.push(job, &self.stats);
        rx.await.ok()
    }

    /// Runs `f` on every shard (this one included) and collects the results in shard order.
    pub async fn broadcast<R, F>(&self, f: F) -> Vec<Option<R>>
    where
        R: Send + 'static,
        F: Fn(Rc<S>) -> LocalBoxFuture<'static, R> + Send + Sync + Clone + 'static,
    {
        let calls = (0..self.shards).map(|i| {
            let f = f.clone();
            self.call(ShardId(i), f)
        });
        futures::future::join_all(calls).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use glommio::{LocalExecutorBuilder, Placement};

    struct Counter {
        shard: usize,
        seen: RefCell<Vec<u32>>,
    }

    #[test]
    fn calls_run_on_the_target_shard_in_order() {
        let endpoints = mesh::<Counter>(2, 4);
        let handles: Vec<_> = endpoints
            .into_iter()
            .map(|ep| {
                LocalExecutorBuilder::new(Placement::Unbound)
                    .spawn(move || async move {
                        let me = ep.shard().0;
                        let state = Rc::new(Counter {
                            shard: me,
                            seen: RefCell::new(Vec::new()),
                        });
                        let router = ep.connect(state.clone()).await;
                        router.open_inbox();
                        if me == 0 {
                            // 100 calls through a channel of 4: waits, then in order.
                            let calls = (0..100u32).map(|i| {
                                router.call(ShardId(1), move |s: Rc<Counter>| {
                                    Box::pin(async move {
                                        s.seen.borrow_mut().push(i);
                                        s.shard
                                    })
                                })
                            });
                            let shards = futures::future::join_all(calls).await;
                            assert!(shards.iter().all(|s| *s == Some(1)));
                            let seen = router
                                .call(ShardId(1), |s: Rc<Counter>| {
                                    Box::pin(async move { s.seen.borrow().clone() })
                                })
                                .await
                                .unwrap();
                            assert_eq!(seen, (0..100).collect::<Vec<_>>());
                            let all = router
                                .broadcast(|s: Rc<Counter>| Box::pin(async move { s.shard }))
                                .await;
                            assert_eq!(all, vec![Some(0), Some(1)]);
                            router
                                .call(ShardId(1), |s: Rc<Counter>| {
                                    Box::pin(async move { s.seen.borrow_mut().push(u32::MAX) })
                                })
                                .await;
                        } else {
                            while state.seen.borrow().last() != Some(&u32::MAX) {
                                glommio::timer::sleep(std::time::Duration::from_millis(1)).await;
                            }
                        }
                    })
                    .unwrap()
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
    }
}
