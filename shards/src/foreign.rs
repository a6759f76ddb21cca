//! Values handed to a shard by a thread that is not a shard: ZooKeeper's control thread
//! answering a shard's request or publishing a new cluster view, the main thread telling the
//! shards to stop.
//!
//! A futures channel would wake the shard task's waker on the sending thread, and glommio 0.9's
//! wakers are not safe for that: a waker dropped on another thread takes the task's reference
//! count to zero and back, and the shard may free the task in between, leaving a queued waker
//! that points at freed memory (`router.rs` tells of the crash this caused between shards).
//! So nothing crosses threads here but the values and an eventfd: the sender queues under a
//! lock and writes the eventfd, and the receiving shard reads the eventfd through its own
//! reactor and takes what is queued. Every waker stays on its shard. That read relies on the
//! reactor waking for it; where glommio's reactor was seen to sleep through a wakeup, the
//! shard's ring sweeper (`uring/mod.rs`) wakes it at least every 100 ms.
//!
//! [`channel`]: a stream of values for one receiving task ([`Receiver::listen`] on its shard).
//! [`reply`]: the answer to one request, made on the asking shard; the answers of all requests
//! from one shard share that shard's inbox (one eventfd per shard, not one per request).
//!
//! Lives on: [`Sender`] and [`Reply`] on any thread; [`Listener`] and [`Answer`] on one shard.

use futures::channel::oneshot;
use glommio::io::BufferedFile;
use std::any::Any;
use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::marker::PhantomData;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::pin::Pin;
use std::rc::{Rc, Weak};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

struct Shared<T> {
    queue: Mutex<VecDeque<T>>,
    senders: AtomicUsize,
    listening: AtomicBool,
    /// Written once per value sent and when the last sender goes.
    doorbell: OwnedFd,
}

impl<T> Shared<T> {
    fn ring(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64 to an eventfd we own. It can only fail if
        // the counter were about to overflow u64, which a reader resets long before.
        unsafe {
            libc::write(
                self.doorbell.as_raw_fd(),
                (&one as *const u64).cast(),
                std::mem::size_of::<u64>(),
            )
        };
    }

    fn pop(&self) -> Option<T> {
        self.queue.lock().expect("foreign queue lock").pop_front()
    }
}

/// A stream of values from other threads to one task on a shard.
pub fn channel<T: Send>() -> std::io::Result<(Sender<T>, Receiver<T>)> {
    // SAFETY: eventfd returns a new descriptor or -1, checked below.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let shared = Arc::new(Shared {
        queue: Mutex::new(VecDeque::new()),
        senders: AtomicUsize::new(1),
        listening: AtomicBool::new(true),
        // SAFETY: fd is a new descriptor owned from here on.
        doorbell: unsafe { OwnedFd::from_raw_fd(fd) },
    });
    Ok((
        Sender {
            shared: shared.clone(),
        },
        Receiver {
            shared,
            handed_on: false,
        },
    ))
}

/// The sending end; any thread, cloned freely.
pub struct Sender<T> {
    shared: Arc<Shared<T>>,
}

impl<T> Sender<T> {
    /// Queues `value` for the receiver; gives it back if the receiver is gone.
    pub fn send(&self, value: T) -> Result<(), T> {
        if !self.shared.listening.load(Ordering::Acquire) {
            return Err(value);
        }
        self.shared
            .queue
            .lock()
            .expect("foreign queue lock")
            .push_back(value);
        self.shared.ring();
        Ok(())
    }
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Self {
        self.shared.senders.fetch_add(1, Ordering::AcqRel);
        Sender {
            shared: self.shared.clone(),
        }
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        if self.shared.senders.fetch_sub(1, Ordering::AcqRel) == 1 {
            // The receiver learns there is nothing more to come.
            self.shared.ring();
        }
    }
}

/// The receiving end before it reaches its shard; `Send`, so it can be handed to a shard
/// thread as it starts.
pub struct Receiver<T> {
    shared: Arc<Shared<T>>,
    /// Set once a Listener carries on in its place.
    handed_on: bool,
}

impl<T> Receiver<T> {
    /// Starts listening on this shard.
    pub fn listen(mut self) -> std::io::Result<Listener<T>> {
        // SAFETY: dup of a descriptor we own; the copy is owned by the BufferedFile.
        let fd = unsafe { libc::dup(self.shared.doorbell.as_raw_fd()) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: fd is a new descriptor, owned from here on by the BufferedFile.
        let doorbell = unsafe { BufferedFile::from_raw_fd(fd) };
        self.handed_on = true;
        Ok(Listener {
            shared: self.shared.clone(),
            doorbell,
        })
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        if !self.handed_on {
            self.shared.listening.store(false, Ordering::Release);
        }
    }
}

/// The receiving end on its shard.
pub struct Listener<T> {
    shared: Arc<Shared<T>>,
    doorbell: BufferedFile,
}

impl<T> Listener<T> {
    /// The next value, in the order sent; `None` once every sender is gone and nothing is
    /// left. Cancel-safe: dropping the future loses no value.
    pub async fn recv(&self) -> Option<T> {
        loop {
            if let Some(value) = self.shared.pop() {
                return Some(value);
            }
            if self.shared.senders.load(Ordering::Acquire) == 0 {
                // A value sent before the last sender went is queued by now.
                return self.shared.pop();
            }
            // Returns once the eventfd is non-zero and resets it. A value sent after the queue
            // was found empty rings after that, so the read returns; a ring already counted
            // for a value taken above only costs one more look at the queue.
            if let Err(e) = self.doorbell.read_at(0, 8).await {
                tracing::warn!(error = %e, "reading a foreign channel's eventfd failed");
                glommio::timer::sleep(std::time::Duration::from_millis(1)).await;
            }
        }
    }
}

impl<T> Drop for Listener<T> {
    fn drop(&mut self) {
        self.shared.listening.store(false, Ordering::Release);
    }
}

/// An answer on its way to the shard that asked: the request's number and its value, `None`
/// when the [`Reply`] was dropped unanswered.
type Delivery = (u64, Option<Box<dyn Any + Send>>);

/// The shard's side of every [`reply`] made on it.
struct Inbox {
    executor_id: usize,
    sender: Sender<Delivery>,
    /// The callers still waiting, by request number.
    waiting: RefCell<HashMap<u64, oneshot::Sender<Box<dyn Any + Send>>>>,
    next: Cell<u64>,
}

thread_local! {
    static INBOX: RefCell<Option<Rc<Inbox>>> = const { RefCell::new(None) };
}

impl Inbox {
    /// This shard's inbox, created with its dispatcher on first use.
    fn current() -> Rc<Inbox> {
        let executor_id = glommio::executor().id();
        INBOX.with(|current| {
            let mut current = current.borrow_mut();
            if let Some(inbox) = current.as_ref().filter(|i| i.executor_id == executor_id) {
                return inbox.clone();
            }
            let (sender, receiver) = channel().expect("an eventfd for the shard's inbox");
            let listener = receiver.listen().expect("listening on the shard's inbox");
            let inbox = Rc::new(Inbox {
                executor_id,
                sender,
                waiting: RefCell::new(HashMap::new()),
                next: Cell::new(0),
            });
            glommio::spawn_local(dispatch(listener, Rc::downgrade(&inbox))).detach();
            *current = Some(inbox.clone());
            inbox
        })
    }
}

/// Hands each delivery to the caller waiting for it, on this shard; a delivery for a caller
/// that gave up is dropped.
async fn dispatch(listener: Listener<Delivery>, inbox: Weak<Inbox>) {
    while let Some((id, value)) = listener.recv().await {
        let Some(inbox) = inbox.upgrade() else { return };
        let caller = inbox.waiting.borrow_mut().remove(&id);
        if let (Some(caller), Some(value)) = (caller, value) {
            let _ = caller.send(value);
        }
    }
}

/// A request's answer channel, made on the asking shard: the [`Reply`] goes with the request
/// to the other thread, the [`Answer`] is awaited here.
pub fn reply<T: Send + 'static>() -> (Reply<T>, Answer<T>) {
    let inbox = Inbox::current();
    let id = inbox.next.get();
    inbox.next.set(id + 1);
    let (tx, rx) = oneshot::channel();
    inbox.waiting.borrow_mut().insert(id, tx);
    let reply = Reply {
        sender: inbox.sender.clone(),
        id,
        answered: false,
        _value: PhantomData,
    };
    (
        reply,
        Answer {
            id,
            inbox,
            rx,
            _value: PhantomData,
        },
    )
}

/// Answers one request from any thread; dropped unanswered, the caller gets `None` at once.
pub struct Reply<T> {
    sender: Sender<Delivery>,
    id: u64,
    answered: bool,
    _value: PhantomData<fn(T)>,
}

impl<T: Send + 'static> Reply<T> {
    pub fn send(mut self, value: T) {
        self.answered = true;
        let _ = self.sender.send((self.id, Some(Box::new(value))));
    }
}

impl<T> Drop for Reply<T> {
    fn drop(&mut self) {
        if !self.answered {
            let _ = self.sender.send((self.id, None));
        }
    }
}

/// The asking shard's wait for its [`Reply`]: `None` if it was dropped unanswered. Dropping
/// it takes the request off the inbox's waiting list.
pub struct Answer<T> {
    id: u64,
    inbox: Rc<Inbox>,
    rx: oneshot::Receiver<Box<dyn Any + Send>>,
    _value: PhantomData<fn() -> T>,
}

impl<T: 'static> Future for Answer<T> {
    type Output = Option<T>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        Pin::new(&mut self.rx).poll(cx).map(|answered| {
            answered
                .ok()
                .map(|value| *value.downcast::<T>().expect("the answer's type"))
        })
    }
}

impl<T> Drop for Answer<T> {
    fn drop(&mut self) {
        self.inbox.waiting.borrow_mut().remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use glommio::LocalExecutorBuilder;
    use std::time::Duration;

    fn on_a_shard<F: Future<Output = ()> + 'static>(body: impl FnOnce() -> F + Send + 'static) {
        LocalExecutorBuilder::default()
            .spawn(body)
            .unwrap()
            .join()
            .unwrap();
    }

    #[test]
    fn values_from_other_threads_arrive_in_order_and_the_stream_ends_with_its_senders() {
        let (sender, receiver) = channel::<u32>().unwrap();
        let senders: Vec<_> = (0..4)
            .map(|t| {
                let sender = sender.clone();
                std::thread::spawn(move || {
                    for i in 0..500 {
                        sender.send(t * 1000 + i).unwrap();
                        if i % 100 == 0 {
                            std::thread::sleep(Duration::from_millis(1));
                        }
                    }
                })
            })
            .collect();
        drop(sender);
        on_a_shard(move || async move {
            let listener = receiver.listen().unwrap();
            let mut next = [0u32; 4];
            while let Some(v) = listener.recv().await {
                let (t, i) = ((v / 1000) as usize, v % 1000);
                assert_eq!(i, next[t], "values of one sender in order");
                next[t] += 1;
            }
            assert_eq!(next, [500; 4]);
        });
        for s in senders {
            s.join().unwrap();
        }
    }

    #[test]
    fn a_sender_whose_listener_is_gone_gets_its_value_back() {
        let (sender, receiver) = channel::<u32>().unwrap();
        on_a_shard(move || async move {
            drop(receiver.listen().unwrap());
        });
        assert_eq!(sender.send(7), Err(7));
        let (sender, receiver) = channel::<u32>().unwrap();
        drop(receiver);
        assert_eq!(sender.send(8), Err(8));
    }

    #[test]
    fn replies_from_another_thread_reach_their_callers_and_callers_that_gave_up_leave_nothing() {
        on_a_shard(|| async {
            let (requests, answering) = std::sync::mpsc::channel::<(u32, Reply<u32>)>();
            // Answers the requests backwards, from a thread that is not a shard; drops the
            // reply of request 13 unanswered.
            let answerer = std::thread::spawn(move || {
                let mut all: Vec<_> = answering.iter().collect();
                all.reverse();
                for (n, reply) in all {
                    std::thread::sleep(Duration::from_micros(200));
                    if n != 13 {
                        reply.send(n * 2);
                    }
                }
            });
            let mut answers = Vec::new();
            for n in 0..40u32 {
                let (reply, answer) = reply::<u32>();
                requests.send((n, reply)).unwrap();
                answers.push(answer);
            }
            // Callers 30 and up give up at once.
            answers.truncate(30);
            assert_eq!(Inbox::current().waiting.borrow().len(), 30);
            drop(requests);
            let got = futures::future::join_all(answers).await;
            let expected: Vec<_> = (0..30u32).map(|n| (n != 13).then_some(n * 2)).collect();
            assert_eq!(got, expected);
            answerer.join().unwrap();
            // The abandoned callers' late answers found no one and were dropped.
            glommio::timer::sleep(Duration::from_millis(20)).await;
            assert!(Inbox::current().waiting.borrow().is_empty());
        });
    }
}
