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

/// A connection's socket as its writer sends on it: the descriptor's number and what keeps it
/// open (the connection's stream, shared with its reader). Every operation in flight holds a
/// clone, so the descriptor is not closed, and its number not reused, under one, whatever the
/// reader does; and the connection costs one descriptor, not a duplicate per side.
#[derive(Clone)]
pub struct SocketFd {
    raw: RawFd,
    _owner: Rc<dyn Any>,
}

impl SocketFd {
    /// The descriptor of `owner`, kept open by it.
    pub fn new<T: AsRawFd + 'static>(owner: T) -> SocketFd {
        SocketFd {
            raw: owner.as_raw_fd(),
            _owner: Rc::new(owner),
        }
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

pub(crate) async fn wait_writable(fd: &SocketFd) -> io::Result<()> {
    let (res, _keep) = super::ops::poll(fd.raw(), libc::POLLOUT as u32, fd.clone()).await;
    res.map(drop)
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
        let (res, (back, _iov, _msg, _fd)) = Ring::current()
            .run(entry, (chunks, iovecs, msg, fd.clone()))
            .await;
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
