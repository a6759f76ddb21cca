//! Sending on a non-blocking socket through the shard's ring: vectored sends from memory and
//! zero-copy splices of file ranges (page cache → pipe → socket).
//!
//! A socket that cannot take more (EAGAIN) is polled for POLLOUT on the same ring, so a slow
//! reader parks only its own connection.

use super::ops::{check, iovecs_after, WriteChunk};
use super::{File, Ring};
use io_uring::{opcode, types};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;

/// Bytes a connection's pipe holds; one splice moves at most this much.
const PIPE_BYTES: usize = 1 << 20;

/// A socket descriptor owned by the writer of a connection (a `dup` of the reader's), so it
/// stays valid for every operation in flight whatever the reader does.
#[derive(Clone)]
pub struct SocketFd(Arc<OwnedFd>);

impl SocketFd {
    /// Duplicates `fd`; the copy shares the socket and its flags.
    pub fn dup(fd: RawFd) -> io::Result<SocketFd> {
        // SAFETY: dup returns a new descriptor or -1.
        let new = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
        if new < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `new` is a fresh descriptor nothing else owns.
        Ok(SocketFd(Arc::new(unsafe { OwnedFd::from_raw_fd(new) })))
    }

    pub fn raw(&self) -> RawFd {
        self.0.as_raw_fd()
    }

    /// Ends both directions, which also wakes the reader of the connection.
    pub fn shutdown(&self) {
        // SAFETY: plain syscall on our descriptor.
        unsafe { libc::shutdown(self.raw(), libc::SHUT_RDWR) };
    }
}

async fn wait_writable(fd: &SocketFd) -> io::Result<()> {
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

/// A pipe for splicing, sized to `PIPE_BYTES` where the system allows.
pub struct Pipe {
    read: OwnedFd,
    write: OwnedFd,
    /// Bytes spliced in and not yet out (after an error mid-way).
    pending: usize,
}

impl Pipe {
    pub fn new() -> io::Result<Pipe> {
        let mut fds = [0i32; 2];
        // SAFETY: pipe2 fills both descriptors or fails.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: both are fresh descriptors.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // Best effort: a smaller pipe only means more splices.
        unsafe {
            libc::fcntl(
                write.as_raw_fd(),
                libc::F_SETPIPE_SZ,
                PIPE_BYTES as libc::c_int,
            )
        };
        Ok(Pipe {
            read,
            write,
            pending: 0,
        })
    }

    fn capacity(&self) -> usize {
        // SAFETY: F_GETPIPE_SZ only reads.
        let n = unsafe { libc::fcntl(self.write.as_raw_fd(), libc::F_GETPIPE_SZ) };
        if n > 0 {
            n as usize
        } else {
            64 * 1024
        }
    }
}

/// Sends `len` bytes of `file` from `position` to the socket without copying them through
/// user space: file → pipe (page cache pages are referenced, not copied) → socket.
pub async fn splice_to_socket(
    file: &File,
    position: u64,
    len: u64,
    fd: &SocketFd,
    pipe: &mut Pipe,
) -> io::Result<()> {
    let capacity = pipe.capacity() as u64;
    let mut done = 0u64;
    while done < len {
        let want = (len - done).min(capacity) as u32;
        let n = super::ops::splice_from_file(file, position + done, pipe.write.as_raw_fd(), want)
            .await?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "segment ended before the range",
            ));
        }
        pipe.pending += n as usize;
        while pipe.pending > 0 {
            let (res, _keep) = super::ops::splice_to(
                pipe.read.as_raw_fd(),
                fd.raw(),
                pipe.pending as u32,
                fd.clone(),
            )
            .await;
            match res {
                Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "socket closed")),
                Ok(m) => pipe.pending -= m as usize,
                Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => wait_writable(fd).await?,
                Err(e) => return Err(e),
            }
        }
        done += n as u64;
    }
    Ok(())
}
