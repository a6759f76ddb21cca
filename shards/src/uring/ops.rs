//! Operations on the shard's auxiliary ring that are not file methods.

use super::{File, Ring};
use bytes::Bytes;
use io_uring::{opcode, types};
use std::io;
use std::os::fd::{AsRawFd, RawFd};

/// Turns a completion result into the byte count or the errno.
pub(crate) fn check(res: i32) -> io::Result<u32> {
    if res < 0 {
        Err(io::Error::from_raw_os_error(-res))
    } else {
        Ok(res as u32)
    }
}

/// One piece of a vectored write; the ring holds it until the kernel is done.
pub enum WriteChunk {
    /// A batch's rewritten prefix (baseOffset, batchLength, partitionLeaderEpoch).
    Stamp(crate::batch::Stamp),
    /// Bytes as a client sent them, shared with the request buffer.
    Shared(Bytes),
    Owned(Vec<u8>),
}

impl WriteChunk {
    pub fn as_slice(&self) -> &[u8] {
        match self {
            WriteChunk::Stamp(s) => s,
            WriteChunk::Shared(b) => b,
            WriteChunk::Owned(v) => v,
        }
    }
}

/// iovecs for `chunks` after their first `skip` bytes (resuming after a short write), at most
/// IOV_MAX of them; the rest go in a later call.
pub(crate) fn iovecs_after(chunks: &[WriteChunk], mut skip: usize) -> Vec<libc::iovec> {
    const IOV_MAX: usize = 1024;
    let mut out = Vec::with_capacity(chunks.len().min(IOV_MAX));
    for chunk in chunks {
        let s = chunk.as_slice();
        if skip >= s.len() {
            skip -= s.len();
            continue;
        }
        let s = &s[skip..];
        skip = 0;
        out.push(libc::iovec {
            iov_base: s.as_ptr() as *mut libc::c_void,
            iov_len: s.len(),
        });
        if out.len() == IOV_MAX {
            break;
        }
    }
    out
}

/// Moves up to `len` bytes from `input` at `offset` into the pipe `pipe_write` without copying
/// through user space. Returns the bytes moved. `keep` (what holds `pipe_write` open) is held
/// until the kernel is done.
pub async fn splice_from_file<K: 'static>(
    input: &File,
    offset: u64,
    pipe_write: RawFd,
    len: u32,
    keep: K,
) -> io::Result<u32> {
    let entry = opcode::Splice::new(
        types::Fd(input.as_raw_fd()),
        offset as i64,
        types::Fd(pipe_write),
        -1,
        len,
    )
    .build();
    let (res, _kept) = Ring::current().run(entry, (input.clone(), keep)).await;
    check(res)
}

/// Moves up to `len` bytes from `pipe_read` to `output` (a socket). `keep` is held until the
/// kernel is done with both descriptors.
pub async fn splice_to<K: 'static>(
    pipe_read: RawFd,
    output: RawFd,
    len: u32,
    keep: K,
) -> (io::Result<u32>, K) {
    let entry = opcode::Splice::new(types::Fd(pipe_read), -1, types::Fd(output), -1, len).build();
    let (res, keep) = Ring::current().run(entry, keep).await;
    (check(res), keep)
}

/// Waits until `fd` reports one of `events` (POLLIN, POLLOUT).
pub async fn poll<K: 'static>(fd: RawFd, events: u32, keep: K) -> (io::Result<u32>, K) {
    let entry = opcode::PollAdd::new(types::Fd(fd), events).build();
    let (res, keep) = Ring::current().run(entry, keep).await;
    (check(res), keep)
}

/// Re-exported for callers that splice: the two halves above.
pub mod splice {
    pub use super::{poll, splice_from_file, splice_to};
}
