//! Sending on a non-blocking socket through the shard's ring: vectored sends from memory (file
//! ranges go through `pipes`).
//!
//! A socket that cannot take more (EAGAIN) is polled for POLLOUT on the same ring, so a slow
//! reader parks only its own connection.

use super::ops::{check, iovecs_after, WriteChunk};
use super::Ring;
use io_uring::{opcode, types};
use std::any::Any;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::rc::Rc;
use std::time::Duration;

/// A connection's socket as its writer sends on it: the descriptor's number and what keeps it
/// open (the connection's stream, shared with its reader). Every operation in flight holds a
/// clone, so the descriptor is not closed, and its number not reused, under one, whatever the
/// reader does; and the connection costs one descriptor, not a duplicate per side.
#[derive(Clone)]
pub struct SocketFd {
    raw: RawFd,
    _owner: Rc<dyn Any>,
    /// How long a send may wait for the peer to take more before it fails.
    stall_limit: Option<Duration>,
}

impl SocketFd {
    /// The descriptor of `owner`, kept open by it.
    pub fn new<T: AsRawFd + 'static>(owner: T) -> SocketFd {
        SocketFd {
            raw: owner.as_raw_fd(),
            _owner: Rc::new(owner),
            stall_limit: None,
        }
    }

    /// Sends fail (TimedOut) once the socket has stayed full for `limit`: a peer that stops
    /// reading would otherwise hold the writer, and whatever it holds, for ever.
    pub fn with_stall_limit(mut self, limit: Option<Duration>) -> SocketFd {
        self.stall_limit = limit;
        self
    }

    pub fn raw(&self) -> RawFd {
        self.raw
    }

    /// Ends both directions, which also wakes the reader of the connection.
    pub fn shutdown(&self) {
        // SAFETY: plain syscall on our descriptor.
        unsafe { libc::shutdown(self.raw(), libc::SHUT_RDWR) };
    }
}

/// `op`, a wait for the socket to take more, given up (TimedOut) once it has waited the
/// socket's stall limit. A ring operation given up on stays in the ring, holding what it uses,
/// until the kernel ends it (a full socket's send waits inside io_uring, which polls for room
/// itself; the writer's shutdown of the socket ends it).
pub(crate) async fn within_stall_limit<T>(
    fd: &SocketFd,
    op: impl std::future::Future<Output = io::Result<T>>,
) -> io::Result<T> {
    let Some(limit) = fd.stall_limit else {
        return op.await;
    };
    match glommio::timer::timeout(limit, async {
        op.await.map_err(glommio::GlommioError::IoError)
    })
    .await
    {
        Ok(t) => Ok(t),
        Err(glommio::GlommioError::IoError(e)) => Err(e),
        Err(_) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("the peer took nothing for {limit:?}"),
        )),
    }
}

/// Waits until the socket takes more, at most its stall limit.
pub(crate) async fn wait_writable(fd: &SocketFd) -> io::Result<()> {
    within_stall_limit(fd, async {
        let (res, _keep) = super::ops::poll(fd.raw(), libc::POLLOUT as u32, fd.clone()).await;
        res.map(drop)
    })
    .await
}

/// Sends every chunk, in order.
pub async fn send_all(fd: &SocketFd, chunks: Vec<WriteChunk>) -> io::Result<()> {
    let total: usize = chunks.iter().map(|c| c.as_slice().len()).sum();
    let mut sent = 0usize;
    let mut chunks = chunks;
    while sent < total {
        let iovecs = iovecs_after(&chunks, sent);
        // SAFETY: zeroed msghdr is valid; we set the iovec fields.
        let mut msg: Box<libc::msghdr> = Box::new(unsafe { std::mem::zeroed() });
        msg.msg_iov = iovecs.as_ptr() as *mut libc::iovec;
        msg.msg_iovlen = iovecs.len();
        let entry = opcode::SendMsg::new(types::Fd(fd.raw()), &*msg as *const libc::msghdr)
            .flags(libc::MSG_NOSIGNAL as u32)
            .build();
        let send = Ring::current().run(entry, (chunks, iovecs, msg, fd.clone()));
        let (res, (back, _iov, _msg, _fd)) =
            within_stall_limit(fd, async { Ok(send.await) }).await?;
        chunks = back;
        match check(res) {
            Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "socket closed")),
            Ok(n) => sent += n as usize,
            Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => wait_writable(fd).await?,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
