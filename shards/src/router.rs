//! Cross-core calls: run a closure on the shard that owns the data, get its result back.
//!
//! One bounded channel per ordered pair of shards carries calls, and one per pair carries
//! their answers back, all created before the shards start. A call to the caller's own shard
//! is a plain local call. Calls to one shard from one shard run in the order they were made,
//! which is what keeps one connection's pipelined produce requests in order on the partitions
//! they share.
//!
//! Answers come back through a channel, not through a cross-thread oneshot, so no task's waker
//! ever leaves its shard: glommio's wakers are not thread-safe. A task woken from another
//! shard goes through glommio's foreign-wake queue, and its reference count can be dropped to
//! zero by the other thread while the owner frees the task — a queued waker then points at
//! freed memory. That crashed the broker (SIGSEGV in `process_foreign_wakes`, on a request
//! task woken by the shard that answered its produce) about once in 30 runs of 16 partitions
//! at 1 GB/s. glommio's shared channels keep each side's wakers on its own shard and only
//! signal the other shard's eventfd. Threads that are not shards answer through
//! `foreign.rs` for the same reason.
//!
//! Lives on: every shard holds its own `Router`; the channel ends are created on the main
//! thread and handed to each shard before it starts.

use crate::placement::ShardId;
use crate::sync::{FifoGate, Latch};
use futures::channel::oneshot;
use futures::future::LocalBoxFuture;
use glommio::channels::shared_channel::{self, ConnectedSender, SharedReceiver, SharedSender};
use std::any::Any;
use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::rc::Rc;

/// What a call's closure returns, boxed to travel back to the caller's shard.
type Answer = Box<dyn Any + Send>;

/// A unit of work sent to another shard, run there with that shard's state.
pub type Job<S> = Box<dyn FnOnce(Rc<S>) -> LocalBoxFuture<'static, Answer> + Send>;

/// A call on its way to its target, with the number its answer comes back under.
pub struct Call<S> {
    id: u64,
    job: Job<S>,
}

/// A call's answer on its way back to the caller's shard.
pub struct Reply {
    id: u64,
    answer: Answer,
}

/// A matrix of channels between shards: `[from][to]`, `None` on the diagonal.
type Ends<T> = Vec<Vec<Option<T>>>;

/// One shard's ends of the channel matrices, before they are connected on its executor.
pub struct Endpoints<S: 'static> {
    shard: ShardId,
    capacity: usize,
    /// Calls to each shard, and the calls each shard makes here.
    call_senders: Vec<Option<SharedSender<Call<S>>>>,
    call_receivers: Vec<Option<SharedReceiver<Call<S>>>>,
    /// Answers to the calls each shard made here, and the answers to this shard's calls.
    reply_senders: Vec<Option<SharedSender<Reply>>>,
    reply_receivers: Vec<Option<SharedReceiver<Reply>>>,
}

/// Channels from every shard to every other, `capacity` messages each: `(senders[from][to],
/// receivers[to][from])`.
fn matrix<T: Send + Sized>(
    shards: usize,
    capacity: usize,
) -> (Ends<SharedSender<T>>, Ends<SharedReceiver<T>>) {
    let mut senders: Ends<SharedSender<T>> = (0..shards)
        .map(|_| (0..shards).map(|_| None).collect())
        .collect();
    let mut receivers: Ends<SharedReceiver<T>> = (0..shards)
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
    (senders, receivers)
}

/// Creates the channels between `shards` shards, each holding up to `capacity` calls in flight.
pub fn mesh<S: 'static>(shards: usize, capacity: usize) -> Vec<Endpoints<S>> {
    let (call_senders, call_receivers) = matrix::<Call<S>>(shards, capacity);
    let (reply_senders, reply_receivers) = matrix::<Reply>(shards, capacity);
    call_senders
        .into_iter()
        .zip(call_receivers)
        .zip(reply_senders.into_iter().zip(reply_receivers))
        .enumerate()
        .map(
            |(i, ((call_senders, call_receivers), (reply_senders, reply_receivers)))| Endpoints {
                shard: ShardId(i),
                capacity,
                call_senders,
                call_receivers,
                reply_senders,
                reply_receivers,
            },
        )
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
    /// The number the next remote call's answer comes back under.
    next_call: Cell<u64>,
}

/// Calls waiting to enter one target's channel, in the order they were made, and the calls
/// sent there whose answers have not come back.
///
/// A full channel must not let a later call overtake an earlier one, so calls queue here and a
/// pump task moves them into the channel one by one. The gate bounds the queue: callers beyond
/// it wait, in order.
struct Outbox<S: 'static> {
    sender: ConnectedSender<Call<S>>,
    queue: RefCell<VecDeque<Call<S>>>,
    gate: FifoGate,
    pumping: Cell<bool>,
    /// Where each answer goes; a caller that gave up has dropped its end.
    waiting: RefCell<HashMap<u64, oneshot::Sender<Answer>>>,
}

impl<S: 'static> Outbox<S> {
    fn push(self: &Rc<Self>, call: Call<S>, stats: &RouterStats) {
        // Straight into the channel only when nothing is ahead: no queued call, and no call
        // the pump has taken out and is still waiting to send.
        let call = if self.queue.borrow().is_empty() && !self.pumping.get() {
            match self.sender.try_send(call) {
                Ok(()) => {
                    self.gate.release(1);
                    return;
                }
                Err(glommio::GlommioError::WouldBlock(glommio::ResourceType::Channel(call))) => {
                    call
                }
                Err(e) => {
                    // The target stopped: its caller sees no answer.
                    self.gate.release(1);
                    if let glommio::GlommioError::Closed(glommio::ResourceType::Channel(call)) = e {
                        self.unanswered(call.id);
                    }
                    return;
                }
            }
        } else {
            call
        };
        stats
            .full_channel_waits
            .set(stats.full_channel_waits.get() + 1);
        self.queue.borrow_mut().push_back(call);
        if !self.pumping.get() {
            self.pumping.set(true);
            let outbox = self.clone();
            glommio::spawn_local(async move {
                loop {
                    let next = outbox.queue.borrow_mut().pop_front();
                    let Some(call) = next else { break };
                    let id = call.id;
                    if outbox.sender.send(call).await.is_err() {
                        outbox.unanswered(id);
                    }
                    outbox.gate.release(1);
                }
                outbox.pumping.set(false);
            })
            .detach();
        }
    }

    /// A call that will never be answered: its caller gets `None`.
    fn unanswered(&self, id: u64) {
        self.waiting.borrow_mut().remove(&id);
    }

    /// Hands answers to their callers until the target stops; then every call still waiting
    /// is unanswered.
    async fn receive_answers(
        self: Rc<Self>,
        replies: glommio::channels::shared_channel::ConnectedReceiver<Reply>,
    ) {
        while let Some(reply) = replies.recv().await {
            if let Some(caller) = self.waiting.borrow_mut().remove(&reply.id) {
                let _ = caller.send(reply.answer);
            }
        }
        self.waiting.borrow_mut().clear();
    }
}

/// Connects every end in `ends` (each waits for its peer to connect the other end, so they
/// are connected all at once), keeping their places.
async fn connect_senders<T: Send + Sized + 'static>(
    ends: Vec<Option<SharedSender<T>>>,
) -> Vec<Option<ConnectedSender<T>>> {
    futures::future::join_all(ends.into_iter().map(|s| async move {
        match s {
            Some(s) => Some(s.connect().await),
            None => None,
        }
    }))
    .await
}

async fn connect_receivers<T: Send + Sized + 'static>(
    ends: Vec<Option<SharedReceiver<T>>>,
) -> Vec<Option<glommio::channels::shared_channel::ConnectedReceiver<T>>> {
    futures::future::join_all(ends.into_iter().map(|r| async move {
        match r {
            Some(r) => Some(r.connect().await),
            None => None,
        }
    }))
    .await
}

impl<S: 'static> Endpoints<S> {
    pub fn shard(&self) -> ShardId {
        self.shard
    }

    /// Connects the channels on this shard's executor. Calls from the others are served with
    /// `state` once the router's inbox is opened (`open_inbox`): until then they wait in the
    /// channels, so a shard still starting never runs another shard's call half-ready.
    pub async fn connect(self, state: Rc<S>) -> Router<S> {
        let shards = self.call_senders.len();
        let (call_senders, call_receivers, reply_senders, reply_receivers) = futures::join!(
            connect_senders(self.call_senders),
            connect_receivers(self.call_receivers),
            connect_senders(self.reply_senders),
            connect_receivers(self.reply_receivers),
        );
        let inbox_open = Rc::new(Latch::default());
        for (calls, replies) in call_receivers.into_iter().zip(reply_senders) {
            let (Some(calls), Some(replies)) = (calls, replies) else {
                continue;
            };
            let replies = Rc::new(replies);
            let state = state.clone();
            let inbox_open = inbox_open.clone();
            glommio::spawn_local(async move {
                inbox_open.wait().await;
                while let Some(call) = calls.recv().await {
                    let state = state.clone();
                    let replies = replies.clone();
                    glommio::spawn_local(async move {
                        let answer = (call.job)(state).await;
                        // The caller's shard has stopped if this fails: nobody is waiting.
                        let _ = replies
                            .send(Reply {
                                id: call.id,
                                answer,
                            })
                            .await;
                    })
                    .detach();
                }
            })
            .detach();
        }
        let capacity = self.capacity;
        let outboxes: Vec<Option<Rc<Outbox<S>>>> = call_senders
            .into_iter()
            .map(|s| {
                s.map(|sender| {
                    Rc::new(Outbox {
                        sender,
                        queue: RefCell::new(VecDeque::new()),
                        gate: FifoGate::new(capacity as u64),
                        pumping: Cell::new(false),
                        waiting: RefCell::new(HashMap::new()),
                    })
                })
            })
            .collect();
        for (outbox, replies) in outboxes.iter().zip(reply_receivers) {
            if let (Some(outbox), Some(replies)) = (outbox, replies) {
                glommio::spawn_local(outbox.clone().receive_answers(replies)).detach();
            }
        }
        Router {
            shard: self.shard,
            shards,
            outboxes,
            state,
            stats: RouterStats::default(),
            inbox_open,
            next_call: Cell::new(0),
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
        let outbox = self.outboxes.get(target.0)?.as_ref()?;
        let id = self.next_call.get();
        self.next_call.set(id + 1);
        let job: Job<S> =
            Box::new(move |state| Box::pin(async move { Box::new(f(state).await) as Answer }));
        let (answered, answer) = oneshot::channel();
        outbox.waiting.borrow_mut().insert(id, answered);
        // A caller that gives up here, or while its call runs, leaves its entry to be removed
        // by the answer (or by the target's stop).
        outbox.gate.acquire(1).await;
        outbox.push(Call { id, job }, &self.stats);
        let answer = answer.await.ok()?;
        Some(
            *answer
                .downcast::<R>()
                .expect("an answer of the call's own type"),
        )
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
    use std::time::Duration;

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

    /// Answers come back out of order (the target runs calls concurrently) and each reaches
    /// its own caller; callers that gave up leave nothing waiting once their answers arrive.
    #[test]
    fn answers_find_their_callers_and_abandoned_calls_leave_nothing_waiting() {
        let endpoints = mesh::<Counter>(2, 8);
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
                        if me == 1 {
                            while state.seen.borrow().last() != Some(&u32::MAX) {
                                glommio::timer::sleep(Duration::from_millis(1)).await;
                            }
                            return;
                        }
                        // The later the call, the sooner its answer.
                        let calls = (0..50u32).map(|i| {
                            router.call(ShardId(1), move |_: Rc<Counter>| {
                                Box::pin(async move {
                                    let wait = u64::from(50 - i) * 100;
                                    glommio::timer::sleep(Duration::from_micros(wait)).await;
                                    i
                                })
                            })
                        });
                        let answers = futures::future::join_all(calls).await;
                        assert_eq!(answers, (0..50).map(Some).collect::<Vec<_>>());
                        // Callers that give up before their answers come.
                        for _ in 0..20 {
                            let call = router.call(ShardId(1), |_: Rc<Counter>| {
                                Box::pin(async move {
                                    glommio::timer::sleep(Duration::from_millis(5)).await;
                                })
                            });
                            let gave_up =
                                glommio::timer::timeout(Duration::from_millis(1), async {
                                    call.await;
                                    Ok(())
                                })
                                .await;
                            assert!(gave_up.is_err(), "the call was slower than its caller");
                        }
                        let outbox = router.outboxes[1].as_ref().unwrap();
                        assert!(!outbox.waiting.borrow().is_empty());
                        glommio::timer::sleep(Duration::from_millis(50)).await;
                        assert!(
                            outbox.waiting.borrow().is_empty(),
                            "answered calls still waiting"
                        );
                        router
                            .call(ShardId(1), |s: Rc<Counter>| {
                                Box::pin(async move { s.seen.borrow_mut().push(u32::MAX) })
                            })
                            .await;
                    })
                    .unwrap()
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
    }
}
