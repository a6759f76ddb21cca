//! A connection's TCP stream, shared by its reader and its writer.
//!
//! The reader reads through glommio's stream (or, what has already arrived, with its own
//! recv into the frame buffer: `FrameSource`); the writer sends on the same descriptor through
//! the shard's own ring (`SocketFd`), holding a clone of this handle, as does every operation
//! it has in flight. The descriptor closes when the last of them lets go: one descriptor per
//! connection, where a duplicate for the writer made two.
//!
//! Lives on: the connection's shard (`Rc`). Each poll borrows the stream only for its own
//! length, and a thread polls one future at a time, so the borrows never overlap.

use super::frame::FrameSource;
use bytes::BytesMut;
use futures::{AsyncRead, AsyncWrite};
use glommio::net::TcpStream;
use std::cell::RefCell;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

#[derive(Clone)]
pub struct SharedStream(Rc<RefCell<TcpStream>>);

impl SharedStream {
    pub fn new(stream: TcpStream) -> SharedStream {
        SharedStream(Rc::new(RefCell::new(stream)))
    }
}

impl AsRawFd for SharedStream {
    fn as_raw_fd(&self) -> RawFd {
        self.0.borrow().as_raw_fd()
    }
}

impl AsyncRead for SharedStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut *self.0.borrow_mut()).poll_read(cx, buf)
    }
}

/// One non-blocking recv(2) straight into the buffer's unused capacity.
impl FrameSource for SharedStream {
    const READS_READY: bool = true;

    fn read_ready(&mut self, buf: &mut BytesMut, ask: usize) -> Option<io::Result<usize>> {
        let spare = buf.spare_capacity_mut();
        let len = ask.min(spare.len());
        // SAFETY: recv writes at most `len` bytes into memory `buf` owns beyond its length,
        // and never reads it.
        let n = unsafe {
            libc::recv(
                self.as_raw_fd(),
                spare.as_mut_ptr().cast(),
                len,
                libc::MSG_DONTWAIT,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => None,
                _ => Some(Err(e)),
            };
        }
        let n = n as usize;
        // SAFETY: the kernel has written these `n` bytes, within the capacity.
        unsafe { buf.set_len(buf.len() + n) };
        Some(Ok(n))
    }
}

impl AsyncWrite for SharedStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut *self.0.borrow_mut()).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0.borrow_mut()).poll_flush(cx)
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0.borrow_mut()).poll_close(cx)
    }
}
