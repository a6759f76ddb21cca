//! Streaming zstd and lz4 decoders that reuse their decompression contexts.
//!
//! The produce path inflates every compressed batch to check its records; batches are small
//! (a few KiB to 1 MiB), and creating a zstd or LZ4F context per batch costs as much as
//! inflating it (measured by `benches/record_checks.rs`). Each thread keeps a few contexts and
//! lends one to each decoder; a decoder gives it back, reset, when it is dropped.
//!
//! Lives on: any thread; the pools are thread-local, so shards never share a context.

use std::cell::RefCell;
use std::io::{self, Read};

/// Contexts kept per thread: one per batch being walked at once is plenty.
const POOLED_CONTEXTS_MAX: usize = 4;

fn invalid(what: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_string())
}

thread_local! {
    static ZSTD_CONTEXTS: RefCell<Vec<zstd_safe::DCtx<'static>>> = const { RefCell::new(Vec::new()) };
    static LZ4_CONTEXTS: RefCell<Vec<Lz4Context>> = const { RefCell::new(Vec::new()) };
}

/// A zstd stream (one or more frames) read from `input`.
pub(crate) struct ZstdReader<'a> {
    ctx: Option<zstd_safe::DCtx<'static>>,
    input: &'a [u8],
    at: usize,
    /// The last call ended a frame (or nothing has started one).
    frame_done: bool,
}

impl<'a> ZstdReader<'a> {
    pub fn new(input: &'a [u8]) -> ZstdReader<'a> {
        let ctx = ZSTD_CONTEXTS
            .with(|pool| pool.borrow_mut().pop())
            .unwrap_or_else(zstd_safe::DCtx::create);
        ZstdReader {
            ctx: Some(ctx),
            input,
            at: 0,
            frame_done: true,
        }
    }
}

impl Read for ZstdReader<'_> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let ctx = self.ctx.as_mut().expect("a context until dropped");
        loop {
            if self.at == self.input.len() && self.frame_done {
                return Ok(0);
            }
            let mut input = zstd_safe::InBuffer::around(self.input);
            input.set_pos(self.at);
            let mut output = zstd_safe::OutBuffer::around(&mut *out);
            let hint = ctx
                .decompress_stream(&mut output, &mut input)
                .map_err(|code| invalid(zstd_safe::get_error_name(code)))?;
            let progressed = input.pos() > self.at;
            self.at = input.pos();
            self.frame_done = hint == 0;
            let written = output.pos();
            if written > 0 {
                return Ok(written);
            }
            if self.at == self.input.len() && !self.frame_done && !progressed {
                return Err(invalid("zstd frame is cut short"));
            }
        }
    }
}

impl Drop for ZstdReader<'_> {
    fn drop(&mut self) {
        let Some(mut ctx) = self.ctx.take() else {
            return;
        };
        if ctx.reset(zstd_safe::ResetDirective::SessionOnly).is_ok() {
            ZSTD_CONTEXTS.with(|pool| {
                let mut pool = pool.borrow_mut();
                if pool.len() < POOLED_CONTEXTS_MAX {
                    pool.push(ctx);
                }
            });
        }
    }
}

/// An LZ4F decompression context, freed on drop.
struct Lz4Context(lz4_sys::LZ4FDecompressionContext);

impl Lz4Context {
    fn create() -> io::Result<Lz4Context> {
        let mut ctx = lz4_sys::LZ4FDecompressionContext(std::ptr::null_mut());
        // SAFETY: LZ4F writes a fresh context pointer into `ctx`; the version is the one the
        // linked library was built with.
        let code = unsafe { lz4_sys::LZ4F_createDecompressionContext(&mut ctx, LZ4F_VERSION) };
        lz4_check(code)?;
        Ok(Lz4Context(ctx))
    }
}

impl Drop for Lz4Context {
    fn drop(&mut self) {
        // SAFETY: the context came from LZ4F_createDecompressionContext and is freed once.
        unsafe {
            lz4_sys::LZ4F_freeDecompressionContext(self.0);
        }
    }
}

/// LZ4F_VERSION from lz4frame.h.
const LZ4F_VERSION: u32 = 100;

fn lz4_check(code: usize) -> io::Result<usize> {
    // SAFETY: LZ4F_isError and LZ4F_getErrorName read only the code; the name is a static
    // C string.
    unsafe {
        if lz4_sys::LZ4F_isError(code) != 0 {
            let name = std::ffi::CStr::from_ptr(lz4_sys::LZ4F_getErrorName(code));
            return Err(invalid(format!("lz4: {}", name.to_string_lossy())));
        }
    }
    Ok(code)
}

/// An LZ4 frame stream read from `input`.
pub(crate) struct Lz4Reader<'a> {
    ctx: Option<Lz4Context>,
    input: &'a [u8],
    at: usize,
    frame_done: bool,
}

impl<'a> Lz4Reader<'a> {
    pub fn new(input: &'a [u8]) -> io::Result<Lz4Reader<'a>> {
        let ctx = match LZ4_CONTEXTS.with(|pool| pool.borrow_mut().pop()) {
            Some(ctx) => ctx,
            None => Lz4Context::create()?,
        };
        Ok(Lz4Reader {
            ctx: Some(ctx),
            input,
            at: 0,
            frame_done: true,
        })
    }
}

impl Read for Lz4Reader<'_> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let ctx = self.ctx.as_ref().expect("a context until dropped");
        loop {
            if self.at == self.input.len() && self.frame_done {
                return Ok(0);
            }
            let rest = &self.input[self.at..];
            let mut src_size = rest.len();
            let mut dst_size = out.len();
            // SAFETY: src and dst are valid for the sizes passed; LZ4F writes back how much of
            // each it used, never more.
            let hint = lz4_check(unsafe {
                lz4_sys::LZ4F_decompress(
                    ctx.0,
                    out.as_mut_ptr(),
                    &mut dst_size,
                    rest.as_ptr(),
                    &mut src_size,
                    std::ptr::null(),
                )
            })?;
            self.at += src_size;
            self.frame_done = hint == 0;
            if dst_size > 0 {
                return Ok(dst_size);
            }
            if self.at == self.input.len() && !self.frame_done && src_size == 0 {
                return Err(invalid("lz4 frame is cut short"));
            }
        }
    }
}

impl Drop for Lz4Reader<'_> {
    fn drop(&mut self) {
        let Some(ctx) = self.ctx.take() else {
            return;
        };
        // SAFETY: resetting a valid context makes it ready for a new frame.
        unsafe { lz4_sys::LZ4F_resetDecompressionContext(ctx.0) };
        LZ4_CONTEXTS.with(|pool| {
            let mut pool = pool.borrow_mut();
            if pool.len() < POOLED_CONTEXTS_MAX {
                pool.push(ctx);
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::codec::compress;
    use crate::batch::Compression;

    fn read_all(mut r: impl Read) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        let mut buf = [0u8; 1000];
        loop {
            match r.read(&mut buf)? {
                0 => return Ok(out),
                n => out.extend_from_slice(&buf[..n]),
            }
        }
    }

    fn data() -> Vec<u8> {
        (0..300_000u32)
            .flat_map(|i| (i % 241).to_le_bytes())
            .collect()
    }

    #[test]
    fn pooled_contexts_decode_frame_after_frame() {
        let data = data();
        for codec in [Compression::Zstd, Compression::Lz4] {
            let packed = compress(codec, &data).unwrap();
            for _ in 0..3 {
                let got = match codec {
                    Compression::Zstd => read_all(ZstdReader::new(&packed)),
                    _ => read_all(Lz4Reader::new(&packed).unwrap()),
                };
                assert_eq!(got.unwrap(), data, "{codec:?}");
            }
            let two = [packed.clone(), packed.clone()].concat();
            let got = match codec {
                Compression::Zstd => read_all(ZstdReader::new(&two)),
                _ => read_all(Lz4Reader::new(&two).unwrap()),
            };
            assert_eq!(got.unwrap().len(), data.len() * 2, "{codec:?}: two frames");
        }
    }

    #[test]
    fn cut_and_corrupt_frames_are_errors_and_leave_the_pool_usable() {
        let data = data();
        for codec in [Compression::Zstd, Compression::Lz4] {
            let packed = compress(codec, &data).unwrap();
            let cut = &packed[..packed.len() / 2];
            let mut garbage = packed.clone();
            let middle = garbage.len() / 2;
            for b in &mut garbage[middle..middle + 64] {
                *b ^= 0xa5;
            }
            for bad in [cut, &garbage[..]] {
                let got = match codec {
                    Compression::Zstd => read_all(ZstdReader::new(bad)),
                    _ => read_all(Lz4Reader::new(bad).unwrap()),
                };
                assert!(got.is_err(), "{codec:?}");
            }
            let again = match codec {
                Compression::Zstd => read_all(ZstdReader::new(&packed)),
                _ => read_all(Lz4Reader::new(&packed).unwrap()),
            };
            assert_eq!(
                again.unwrap(),
                data,
                "{codec:?}: the pooled context was reset"
            );
        }
    }
}
