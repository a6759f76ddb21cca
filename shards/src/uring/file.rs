//! A file descriptor shared by reference count, with its I/O done on the shard's ring.
//!
//! Lives on: any shard. The descriptor is immutable and `Send`, so an owner shard can hand a
//! segment's `File` to the shard serving a fetch; each shard submits to its own ring.

use super::ops::{check, iovecs_after, WriteChunk};
use super::{inline_write_max, Ring};
use io_uring::{opcode, types};
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

struct Inner {
    fd: OwnedFd,
    path: PathBuf,
}

/// An open file; clones share the descriptor, which closes with the last clone.
#[derive(Clone)]
pub struct File {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for File {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "File({})", self.inner.path.display())
    }
}

impl AsRawFd for File {
    fn as_raw_fd(&self) -> RawFd {
        self.inner.fd.as_raw_fd()
    }
}

fn c_path(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path holds a NUL byte"))
}

impl File {
    /// Opens `path` with `open(2)` flags through the ring.
    pub async fn open(path: &Path, flags: i32, mode: u32) -> io::Result<File> {
        let cpath = c_path(path)?;
        let entry = opcode::OpenAt::new(types::Fd(libc::AT_FDCWD), cpath.as_ptr())
            .flags(flags | libc::O_CLOEXEC)
            .mode(mode)
            .build();
        let (res, _cpath) = Ring::current().run(entry, cpath).await;
        let fd = check(res)?;
        Ok(File {
            // SAFETY: the kernel returned a fresh descriptor that nothing else owns.
            inner: Arc::new(Inner {
                fd: unsafe { OwnedFd::from_raw_fd(fd as RawFd) },
                path: path.to_path_buf(),
            }),
        })
    }

    /// Opens for reading and appending-by-position, creating the file when missing.
    pub async fn open_rw(path: &Path) -> io::Result<File> {
        File::open(path, libc::O_RDWR | libc::O_CREAT, 0o644).await
    }

    pub async fn open_read(path: &Path) -> io::Result<File> {
        File::open(path, libc::O_RDONLY, 0).await
    }

    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Size in bytes. `fstat` answers from the inode cache without I/O.
    pub fn size(&self) -> io::Result<u64> {
        // SAFETY: fstat writes into the zeroed struct we own.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        if unsafe { libc::fstat(self.as_raw_fd(), &mut st) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(st.st_size as u64)
    }

    /// Reads up to `len` bytes at `pos`; fewer only at end of file.
    pub async fn read_at(&self, pos: u64, len: usize) -> io::Result<Vec<u8>> {
        let mut buf: Vec<u8> = Vec::with_capacity(len);
        let mut filled = 0usize;
        while filled < len {
            let entry = opcode::Read::new(
                types::Fd(self.as_raw_fd()),
                // SAFETY: the spare capacity stays allocated in the keepalive.
                unsafe { buf.as_mut_ptr().add(filled) },
                (len - filled) as u32,
            )
            .offset(pos + filled as u64)
            .build();
            let (res, (back, _file)) = Ring::current().run(entry, (buf, self.clone())).await;
            buf = back;
            let n = check(res)? as usize;
            if n == 0 {
                break;
            }
            filled += n;
            // SAFETY: the kernel initialised `n` more bytes.
            unsafe { buf.set_len(filled) };
        }
        Ok(buf)
    }

    /// Writes every chunk, in order, starting at `pos`; retries short writes.
    ///
    /// A write of at most the shard's inline limit (`set_inline_write_max`) is made by this
    /// thread with `pwritev`. ext4 refuses non-blocking buffered writes, so io_uring hands
    /// every buffered write to one of its worker threads: for a small write the wake-up, the
    /// context switches and the completion cost more than the copy into the page cache
    /// itself, which the worker would do anyway. A larger write still goes to the ring, where
    /// the copy runs beside the shard's network work. The inline call can block the shard
    /// like any buffered write can block its caller (dirty-page throttling, memory reclaim);
    /// Kafka's request threads make the same call.
    pub async fn write_all_at(&self, pos: u64, chunks: Vec<WriteChunk>) -> io::Result<()> {
        let total: usize = chunks.iter().map(|c| c.as_slice().len()).sum();
        let mut written = 0usize;
        if total > 0 && total <= inline_write_max() {
            written = self.write_inline(pos, &chunks, total)?;
        }
        crate::stats::with_shard_io(|io| {
            let path = if written < total {
                &io.ring_writes
            } else {
                &io.inline_writes
            };
            path.set(path.get() + 1);
        });
        let mut chunks = chunks;
        while written < total {
            let iovecs = iovecs_after(&chunks, written);
            let entry = opcode::Writev::new(
                types::Fd(self.as_raw_fd()),
                iovecs.as_ptr(),
                iovecs.len() as u32,
            )
            .offset(pos + written as u64)
            .build();
            let (res, (back, _iov, _file)) = Ring::current()
                .run(entry, (chunks, iovecs, self.clone()))
                .await;
            chunks = back;
            let n = check(res)? as usize;
            if n == 0 {
                return Err(io::Error::new(io::ErrorKind::WriteZero, "write returned 0"));
            }
            written += n;
        }
        Ok(())
    }

    /// Writes with `pwritev` on this thread until done or until the kernel would block
    /// (EAGAIN), returning the bytes written; the ring writes the rest.
    fn write_inline(&self, pos: u64, chunks: &[WriteChunk], total: usize) -> io::Result<usize> {
        let mut written = 0usize;
        while written < total {
            let iovecs = iovecs_after(chunks, written);
            // SAFETY: the iovecs point into `chunks`, borrowed for the whole call.
            let n = unsafe {
                libc::pwritev(
                    self.as_raw_fd(),
                    iovecs.as_ptr(),
                    iovecs.len() as libc::c_int,
                    (pos + written as u64) as libc::off_t,
                )
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                match e.kind() {
                    io::ErrorKind::Interrupted => continue,
                    io::ErrorKind::WouldBlock => break,
                    _ => return Err(e),
                }
            }
            if n == 0 {
                return Err(io::Error::new(io::ErrorKind::WriteZero, "write returned 0"));
            }
            written += n as usize;
        }
        Ok(written)
    }

    pub async fn fdatasync(&self) -> io::Result<()> {
        let entry = opcode::Fsync::new(types::Fd(self.as_raw_fd()))
            .flags(types::FsyncFlags::DATASYNC)
            .build();
        self.timed_sync(entry).await
    }

    pub async fn fsync(&self) -> io::Result<()> {
        let entry = opcode::Fsync::new(types::Fd(self.as_raw_fd())).build();
        self.timed_sync(entry).await
    }

    /// Runs an fsync-like entry and records its latency in the shard's histogram.
    async fn timed_sync(&self, entry: io_uring::squeue::Entry) -> io::Result<()> {
        let started = std::time::Instant::now();
        let (res, _file) = Ring::current().run(entry, self.clone()).await;
        crate::stats::with_shard_io(|io| io.syncs.observe(started.elapsed()));
        check(res).map(drop)
    }

    pub async fn truncate(&self, len: u64) -> io::Result<()> {
        let entry = opcode::Ftruncate::new(types::Fd(self.as_raw_fd()), len).build();
        let (res, _file) = Ring::current().run(entry, self.clone()).await;
        check(res).map(drop)
    }

    /// Starts writeback of `len` bytes at `pos` without waiting for it (sync_file_range with
    /// SYNC_FILE_RANGE_WRITE): dirty pages go to the device steadily instead of all at the
    /// next fdatasync.
    pub async fn start_writeback(&self, pos: u64, len: u32) -> io::Result<()> {
        let entry = opcode::SyncFileRange::new(types::Fd(self.as_raw_fd()), len)
            .offset(pos)
            .flags(libc::SYNC_FILE_RANGE_WRITE)
            .build();
        let (res, _file) = Ring::current().run(entry, self.clone()).await;
        check(res).map(drop)
    }
}

/// Removes a file by name.
pub async fn unlink(path: &Path) -> io::Result<()> {
    let cpath = c_path(path)?;
    let entry = opcode::UnlinkAt::new(types::Fd(libc::AT_FDCWD), cpath.as_ptr()).build();
    let (res, _cpath) = Ring::current().run(entry, cpath).await;
    check(res).map(drop)
}

/// Renames `from` to `to`, replacing `to` atomically.
pub async fn rename(from: &Path, to: &Path) -> io::Result<()> {
    let cfrom = c_path(from)?;
    let cto = c_path(to)?;
    let entry = opcode::RenameAt::new(
        types::Fd(libc::AT_FDCWD),
        cfrom.as_ptr(),
        types::Fd(libc::AT_FDCWD),
        cto.as_ptr(),
    )
    .build();
    let (res, _paths) = Ring::current().run(entry, (cfrom, cto)).await;
    check(res).map(drop)
}

/// Creates one directory; an existing one is fine.
pub async fn mkdir(path: &Path) -> io::Result<()> {
    let cpath = c_path(path)?;
    let entry = opcode::MkDirAt::new(types::Fd(libc::AT_FDCWD), cpath.as_ptr())
        .mode(0o755)
        .build();
    let (res, _cpath) = Ring::current().run(entry, cpath).await;
    match check(res) {
        Err(e) if e.raw_os_error() == Some(libc::EEXIST) => Ok(()),
        other => other.map(drop),
    }
}

/// Makes a directory's entries (creations, renames, removals) durable.
pub async fn sync_dir(path: &Path) -> io::Result<()> {
    let dir = File::open(path, libc::O_RDONLY | libc::O_DIRECTORY, 0).await?;
    dir.fsync().await
}

/// Writes `contents` to `path` so that a crash leaves either the old file or the new one:
/// a temporary file, fsync, rename over the target, fsync of the directory.
pub async fn write_atomically(path: &Path, contents: Vec<u8>) -> io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let file = File::open(&tmp, libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC, 0o644).await?;
    file.write_all_at(0, vec![WriteChunk::Owned(contents)])
        .await?;
    file.fsync().await?;
    drop(file);
    rename(&tmp, path).await?;
    let parent = path.parent().unwrap_or(Path::new("."));
    sync_dir(parent).await
}
