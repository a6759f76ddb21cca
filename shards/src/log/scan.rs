//! Walking the batches of a segment file: header by header to locate, or batch by batch with
//! full validation to recover.

use crate::batch::{self, BatchHeader, BatchOrigin, HEADER_BYTES, LOG_OVERHEAD_BYTES};
use crate::error::{Error, Result};
use crate::uring::File;

/// How much a header walk reads at once: several small batches' headers per read.
const WALK_WINDOW_BYTES: usize = 16 * 1024;
/// How much a validating scan reads at once.
const SCAN_CHUNK_BYTES: usize = 1 << 20;

/// Reads batch headers through a read-ahead window, so walking many small batches costs few reads.
pub(crate) struct HeaderWalker<'a> {
    file: &'a File,
    window: Vec<u8>,
    window_pos: u64,
}

impl<'a> HeaderWalker<'a> {
    pub fn new(file: &'a File) -> HeaderWalker<'a> {
        HeaderWalker {
            file,
            window: Vec::new(),
            window_pos: 0,
        }
    }

    /// The header of the batch at `pos`, if a whole batch fits before `limit`.
    pub async fn header_at(&mut self, pos: u64, limit: u64) -> Result<Option<BatchHeader>> {
        if pos + HEADER_BYTES as u64 > limit {
            return Ok(None);
        }
        let in_window = pos >= self.window_pos
            && pos + HEADER_BYTES as u64 <= self.window_pos + self.window.len() as u64;
        if !in_window {
            let len = WALK_WINDOW_BYTES.min((limit - pos) as usize);
            self.window = self
                .file
                .read_at(pos, len)
                .await
                .map_err(|e| Error::io("read", self.file.path(), e))?;
            self.window_pos = pos;
            if self.window.len() < HEADER_BYTES {
                return Err(self.corrupt(pos, "segment shorter than its recorded size"));
            }
        }
        let at = (pos - self.window_pos) as usize;
        let header = BatchHeader::parse(&self.window[at..])?;
        if header.batch_length < 0 || pos + header.total_bytes() as u64 > limit {
            return Err(self.corrupt(pos, "batch length runs past the segment end"));
        }
        Ok(Some(header))
    }

    fn corrupt(&self, position: u64, reason: &str) -> Error {
        Error::Corrupt {
            path: self.file.path().to_path_buf(),
            position,
            reason: reason.to_string(),
        }
    }
}

/// Where a validating scan stopped.
#[derive(Debug)]
pub(crate) struct ScanEnd {
    /// Position after the last valid batch.
    pub valid_end: u64,
    /// Why the scan stopped before `to`, if it did.
    pub stopped_by: Option<String>,
}

/// Validates every batch of `file` between `from` and `to`, calling `each(position, header)` for
/// each valid one, and stops at the first byte that is not part of a valid batch whose offsets
/// ascend within `offsets` (from the expected first offset to the segment's bound). The CRC
/// does not cover a batch's base offset: the bound is what catches a damaged one.
pub(crate) async fn scan_valid(
    file: &File,
    from: u64,
    to: u64,
    offsets: std::ops::Range<i64>,
    mut each: impl FnMut(u64, &BatchHeader),
) -> Result<ScanEnd> {
    let mut pos = from;
    let mut next_offset = offsets.start;
    let mut buf: Vec<u8> = Vec::new();
    let mut buf_pos = from;
    loop {
        if pos >= to {
            return Ok(ScanEnd {
                valid_end: pos,
                stopped_by: None,
            });
        }
        let stop = |reason: String| ScanEnd {
            valid_end: pos,
            stopped_by: Some(reason),
        };
        let remaining = to - pos;
        if remaining < HEADER_BYTES as u64 {
            return Ok(stop(format!("{remaining} trailing bytes")));
        }
        let buffered = |buf: &Vec<u8>, buf_pos: u64, need: u64| {
            pos >= buf_pos && pos + need <= buf_pos + buf.len() as u64
        };
        if !buffered(&buf, buf_pos, HEADER_BYTES as u64) {
            buf = read(file, pos, SCAN_CHUNK_BYTES.min(remaining as usize)).await?;
            buf_pos = pos;
        }
        let at = (pos - buf_pos) as usize;
        let header = BatchHeader::parse(&buf[at..])?;
        let total = LOG_OVERHEAD_BYTES as u64 + header.batch_length.max(0) as u64;
        if header.batch_length < (HEADER_BYTES - LOG_OVERHEAD_BYTES) as i32 || total > remaining {
            return Ok(stop(format!(
                "batch length {} does not fit",
                header.batch_length
            )));
        }
        if !buffered(&buf, buf_pos, total) {
            buf = read(
                file,
                pos,
                (total as usize).max(SCAN_CHUNK_BYTES.min(remaining as usize)),
            )
            .await?;
            buf_pos = pos;
        }
        let at = (pos - buf_pos) as usize;
        let bytes = &buf[at..at + total as usize];
        let header = match batch::validate(bytes, usize::MAX, BatchOrigin::Replica) {
            Ok(h) => h,
            Err(e) => return Ok(stop(e.to_string())),
        };
        if header.base_offset < next_offset {
            return Ok(stop(format!(
                "batch offset {} is below the expected {next_offset}",
                header.base_offset
            )));
        }
        if header.last_offset() >= offsets.end {
            return Ok(stop(format!(
                "batch offsets {}..={} run past the segment's bound {}",
                header.base_offset,
                header.last_offset(),
                offsets.end
            )));
        }
        each(pos, &header);
        next_offset = header.last_offset() + 1;
        pos += total;
    }
}

async fn read(file: &File, pos: u64, len: usize) -> Result<Vec<u8>> {
    file.read_at(pos, len)
        .await
        .map_err(|e| Error::io("read", file.path(), e))
}
