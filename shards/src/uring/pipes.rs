//! Zero-copy sends of file ranges (page cache → pipe → socket), through pipes a shard lends.
//!
//! A pipe is two descriptors. Kept per connection, it made every connection cost three
//! descriptors where its socket alone costs one, and 10,000 connections would have needed
//! 30,000. So each shard keeps a pool of at most `max` pipes and lends one for the length of
//! one file range. A pipe is taken back only when the range went through whole and left it
//! empty: one cut short (an error, a closed socket, a send given up) may still hold that
//! connection's bytes, so it is closed instead and never reaches another connection. When every
//! pipe is lent, the range is read into memory and sent (counted: `copied_bytes`), so a slow
//! reader holding a pipe never makes another connection wait.
//!
//! Lives on: one shard's thread (`Rc`, `Cell`).

use super::ops::{self, WriteChunk};
use super::socket::{send_all, wait_writable, within_stall_limit, SocketFd};
use super::File;
use std::cell::{Cell, RefCell};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::rc::Rc;

/// Bytes a pipe holds; one splice moves at most this much.
const PIPE_BYTES: usize = 1 << 20;

/// A pipe's two ends. Operations in flight hold them, so an operation abandoned half way never
/// finds its descriptor closed and its number reused.
struct PipeEnds {
    read: OwnedFd,
    write: OwnedFd,
}

/// A pipe for splicing, sized to `PIPE_BYTES` where the system allows.
struct Pipe {
    ends: Rc<PipeEnds>,
    capacity: usize,
}

impl Pipe {
    fn new() -> io::Result<Pipe> {
        let mut fds = [0i32; 2];
        // SAFETY: pipe2 fills both descriptors or fails.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: both are fresh descriptors.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // Best effort: a smaller pipe only means more splices.
        // SAFETY: fcntl on our own descriptor.
        let capacity = unsafe {
            libc::fcntl(
                write.as_raw_fd(),
                libc::F_SETPIPE_SZ,
                PIPE_BYTES as libc::c_int,
            );
            libc::fcntl(write.as_raw_fd(), libc::F_GETPIPE_SZ)
        };
        Ok(Pipe {
            ends: Rc::new(PipeEnds { read, write }),
            capacity: if capacity > 0 {
                capacity as usize
            } else {
                64 * 1024
            },
        })
    }
}

/// One shard's splice pipes.
pub struct PipePool {
    free: RefCell<Vec<Pipe>>,
    /// Pipes open now, lent or free.
    open: Cell<usize>,
    max: usize,
    copied_bytes: Cell<u64>,
}

impl PipePool {
    /// A pool that opens pipes as they are first needed, `max` at most.
    pub fn new(max: usize) -> Rc<PipePool> {
        Rc::new(PipePool {
            free: RefCell::new(Vec::new()),
            open: Cell::new(0),
            max,
            copied_bytes: Cell::new(0),
        })
    }

    /// File bytes sent from memory because every pipe was lent.
    pub fn copied_bytes(&self) -> u64 {
        self.copied_bytes.get()
    }

    /// Pipes open now, lent or free.
    pub fn open(&self) -> usize {
        self.open.get()
    }

    /// Sends `len` bytes of `file` from `position` on the socket: spliced through a lent pipe,
    /// or read into memory and sent when none is free (or none can be opened).
    pub async fn send_file_range(
        self: &Rc<Self>,
        file: &File,
        position: u64,
        len: u64,
        socket: &SocketFd,
    ) -> io::Result<()> {
        match self.lend() {
            Some(mut lent) => {
                splice_to_socket(file, position, len, socket, &lent).await?;
                lent.drained = true;
                Ok(())
            }
            None => {
                self.copied_bytes.set(self.copied_bytes.get() + len);
                // A pipe's worth at a time: a busy shard holds no more memory per send than
                // its pipes would.
                let mut done = 0u64;
                while done < len {
                    let want = (len - done).min(PIPE_BYTES as u64) as usize;
                    let bytes = file.read_at(position + done, want).await?;
                    if bytes.len() != want {
                        return Err(io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            "segment ended before the range",
                        ));
                    }
                    send_all(socket, vec![WriteChunk::Owned(bytes)]).await?;
                    done += want as u64;
                }
                Ok(())
            }
        }
    }

    fn lend(self: &Rc<Self>) -> Option<LentPipe> {
        let pipe = match self.free.borrow_mut().pop() {
            Some(pipe) => pipe,
            None if self.open.get() < self.max => match Pipe::new() {
                Ok(pipe) => {
                    self.open.set(self.open.get() + 1);
                    pipe
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot open a splice pipe; copying instead");
                    return None;
                }
            },
            None => return None,
        };
        Some(LentPipe {
            pipe: Some(pipe),
            pool: self.clone(),
            drained: false,
        })
    }
}

/// A pipe out of the pool for one file range; back in it when dropped, if the range left it
/// empty (`drained`), closed otherwise.
struct LentPipe {
    pipe: Option<Pipe>,
    pool: Rc<PipePool>,
    drained: bool,
}

impl std::ops::Deref for LentPipe {
    type Target = Pipe;
    fn deref(&self) -> &Pipe {
        self.pipe.as_ref().expect("a lent pipe until dropped")
    }
}

impl Drop for LentPipe {
    fn drop(&mut self) {
        let pipe = self.pipe.take().expect("dropped once");
        if self.drained {
            self.pool.free.borrow_mut().push(pipe);
        } else {
            self.pool.open.set(self.pool.open.get() - 1);
        }
    }
}

/// Sends `len` bytes of `file` from `position` to the socket without copying them through
/// user space: file → pipe (page cache pages are referenced, not copied) → socket. Returns
/// once the pipe is empty again.
async fn splice_to_socket(
    file: &File,
    position: u64,
    len: u64,
    fd: &SocketFd,
    pipe: &Pipe,
) -> io::Result<()> {
    let mut done = 0u64;
    while done < len {
        let want = (len - done).min(pipe.capacity as u64) as u32;
        let write_end = pipe.ends.write.as_raw_fd();
        let n = ops::splice_from_file(file, position + done, write_end, want, pipe.ends.clone())
            .await?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "segment ended before the range",
            ));
        }
        let mut in_pipe = n as usize;
        while in_pipe > 0 {
            let splice = ops::splice_to(
                pipe.ends.read.as_raw_fd(),
                fd.raw(),
                in_pipe as u32,
                (fd.clone(), pipe.ends.clone()),
            );
            let (res, _kept) = within_stall_limit(fd, async { Ok(splice.await) }).await?;
            match res {
                Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "socket closed")),
                Ok(m) => in_pipe -= m as usize,
                Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => wait_writable(fd).await?,
                Err(e) => return Err(e),
            }
        }
        done += n as u64;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::run_local as run;
    use std::io::Read;
    use std::os::unix::net::UnixStream;

    /// A file of `len` bytes counting up (mod 251), so any byte out of place shows.
    async fn counting_file(dir: &std::path::Path, len: usize) -> File {
        let f = File::open_rw(&dir.join("segment")).await.unwrap();
        let bytes: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        f.write_all_at(0, vec![WriteChunk::Owned(bytes)])
            .await
            .unwrap();
        f
    }

    /// A connected pair: the broker's end (non-blocking, as accepted sockets are) and the
    /// client's.
    fn connection() -> (SocketFd, UnixStream) {
        let (broker, client) = UnixStream::pair().unwrap();
        broker.set_nonblocking(true).unwrap();
        (SocketFd::new(broker), client)
    }

    fn read_exactly(client: &mut UnixStream, len: usize) -> Vec<u8> {
        let mut got = vec![0u8; len];
        client.read_exact(&mut got).unwrap();
        got
    }

    #[test]
    fn a_pipe_serves_range_after_range_and_goes_back_to_the_pool() {
        let dir = tempfile::tempdir().unwrap();
        run(|| async move {
            let f = counting_file(dir.path(), 10_000).await;
            let pool = PipePool::new(1);
            let (socket, mut client) = connection();
            for (position, len) in [(0u64, 4_000u64), (4_000, 6_000)] {
                pool.send_file_range(&f, position, len, &socket)
                    .await
                    .unwrap();
                let got = read_exactly(&mut client, len as usize);
                let want: Vec<u8> = (position..position + len)
                    .map(|i| (i % 251) as u8)
                    .collect();
                assert_eq!(got, want);
            }
            assert_eq!(pool.open(), 1, "the one pipe was lent twice");
            assert_eq!(pool.copied_bytes(), 0);
        });
    }

    #[test]
    fn with_every_pipe_lent_a_range_is_copied_and_arrives_whole() {
        let dir = tempfile::tempdir().unwrap();
        run(|| async move {
            // Over two pipes' worth, so it goes out in pieces; a reader thread takes them.
            let len = 2 * PIPE_BYTES + 3_000;
            let f = counting_file(dir.path(), len + 100).await;
            let pool = PipePool::new(1);
            let lent = pool.lend().unwrap();
            let (socket, mut client) = connection();
            let reader = std::thread::spawn(move || read_exactly(&mut client, len));
            pool.send_file_range(&f, 100, len as u64, &socket)
                .await
                .unwrap();
            let want: Vec<u8> = (100..100 + len).map(|i| (i % 251) as u8).collect();
            assert!(
                reader.join().unwrap() == want,
                "the copied range arrived whole"
            );
            assert_eq!(pool.copied_bytes(), len as u64);
            drop(lent);
        });
    }

    #[test]
    fn a_pipe_left_holding_bytes_is_closed_not_lent_to_the_next_connection() {
        let dir = tempfile::tempdir().unwrap();
        run(|| async move {
            // More than the socket's buffer takes: the send parks with bytes in the pipe.
            let len = 8 << 20;
            let f = counting_file(dir.path(), len).await;
            let pool = PipePool::new(1);
            let (stuck, _unread) = connection();
            let send = pool.send_file_range(&f, 0, len as u64, &stuck);
            let given_up = glommio::timer::timeout(std::time::Duration::from_millis(200), async {
                send.await.map_err(glommio::GlommioError::IoError)
            })
            .await;
            assert!(given_up.is_err(), "the unread socket cannot take 8 MiB");
            assert_eq!(pool.open(), 0, "the pipe it held was closed");
            // The next connection gets its own range and nothing of the first one's.
            let (socket, mut client) = connection();
            pool.send_file_range(&f, 1_000, 500, &socket).await.unwrap();
            let want: Vec<u8> = (1_000..1_500).map(|i| (i % 251) as u8).collect();
            assert_eq!(read_exactly(&mut client, 500), want);
            assert_eq!(pool.open(), 1);
        });
    }
}
