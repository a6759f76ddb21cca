//! O_DIRECT writes on the shard's own ring: block-aligned buffers, whole-block writes.
//!
//! Why not glommio's DMA files: on this kernel and ext4, glommio's reactor turned each DMA
//! write into a burst of iterations (≈125,000 per second, each arming and cancelling a
//! preemption timer, and each cancel walking the io-wq workers that run the writes), measured
//! at 1.76 M submissions per GiB written against 50 k for the buffered path on this ring. Here
//! a write is one submission and the shard sleeps until its completion bumps the ring's eventfd.

use super::ops::check;
use super::{File, Ring};
use io_uring::{opcode, types};
use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::ptr::NonNull;

/// Memory, file-position and length alignment of O_DIRECT I/O: 4 KiB satisfies both 512-byte
/// and 4 KiB logical-block devices.
pub const DIRECT_ALIGNMENT: u64 = 4096;

/// A zeroed heap buffer aligned for O_DIRECT, its length a multiple of the alignment.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    len: usize,
}

impl AlignedBuf {
    /// `len` rounded up to the alignment, zeroed.
    pub fn zeroed(len: usize) -> AlignedBuf {
        let len = align_up(len as u64) as usize;
        let layout = Self::layout(len);
        // SAFETY: the layout has a non-zero size (at least one block).
        let ptr = unsafe { alloc_zeroed(layout) };
        let ptr = NonNull::new(ptr).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        AlignedBuf { ptr, len }
    }

    fn layout(len: usize) -> Layout {
        Layout::from_size_align(
            len.max(DIRECT_ALIGNMENT as usize),
            DIRECT_ALIGNMENT as usize,
        )
        .expect("an aligned layout")
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: ptr points to len initialised bytes owned by self.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `zeroed` with this layout.
        unsafe { dealloc(self.ptr.as_ptr(), Self::layout(self.len)) }
    }
}

/// `n` rounded up to a whole number of blocks.
pub fn align_up(n: u64) -> u64 {
    n.div_ceil(DIRECT_ALIGNMENT) * DIRECT_ALIGNMENT
}

impl File {
    /// Opens an existing file for O_DIRECT reads and writes.
    pub async fn open_direct(path: &Path) -> io::Result<File> {
        File::open(path, libc::O_RDWR | libc::O_DIRECT, 0).await
    }

    /// Writes the whole buffer at `pos` (both aligned). The buffer stays with the operation
    /// until the kernel is done with it, even if this future is dropped.
    pub async fn write_aligned_at(&self, buf: AlignedBuf, pos: u64) -> io::Result<()> {
        debug_assert_eq!(pos % DIRECT_ALIGNMENT, 0);
        let len = buf.len();
        let entry = opcode::Write::new(types::Fd(self.as_raw_fd()), buf.ptr.as_ptr(), len as u32)
            .offset(pos)
            .build();
        let (res, _keep) = Ring::current().run(entry, (buf, self.clone())).await;
        let written = check(res)? as usize;
        if written < len {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                "short O_DIRECT write",
            ));
        }
        Ok(())
    }

    /// Reserves the first `len` bytes and grows the file size to cover them (fallocate mode
    /// 0): O_DIRECT writes inside the file size do not extend it, which ext4 would serialise.
    pub async fn allocate(&self, len: u64) -> io::Result<()> {
        let entry = opcode::Fallocate::new(types::Fd(self.as_raw_fd()), len)
            .offset(0)
            .mode(0)
            .build();
        let (res, _file) = Ring::current().run(entry, self.clone()).await;
        check(res).map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_aligned_zeroed_and_whole_blocks() {
        let mut b = AlignedBuf::zeroed(5000);
        assert_eq!(b.len(), 8192);
        assert_eq!(b.ptr.as_ptr() as usize % DIRECT_ALIGNMENT as usize, 0);
        assert!(b.as_mut_slice().iter().all(|&x| x == 0));
        assert_eq!(align_up(0), 0);
        assert_eq!(align_up(4096), 4096);
        assert_eq!(align_up(4097), 8192);
    }

    #[test]
    fn an_aligned_write_reaches_the_file() {
        crate::testing::run_local(|| async {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("direct");
            std::fs::write(&path, b"").unwrap();
            let file = File::open_direct(&path).await.unwrap();
            file.allocate(1 << 20).await.unwrap();
            let mut buf = AlignedBuf::zeroed(8192);
            buf.as_mut_slice()[..5].copy_from_slice(b"hello");
            file.write_aligned_at(buf, 4096).await.unwrap();
            let back = std::fs::read(&path).unwrap();
            assert_eq!(back.len(), 1 << 20, "allocate grows the file size");
            assert_eq!(&back[4096..4101], b"hello");
        });
    }
}
