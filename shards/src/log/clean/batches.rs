//! Reading a closed segment batch by batch, in large reads, validating every batch.

use crate::batch::{self, BatchHeader, BatchOrigin, LOG_OVERHEAD_BYTES};
use crate::error::{Error, Result};
use crate::uring::File;
use bytes::Bytes;

/// Bytes read from the segment at a time (a larger batch is read whole).
const READ_BYTES: usize = 1 << 20;

pub(crate) struct SegmentBatches {
    file: File,
    size: u64,
    /// File position of `buffer[0]`.
    buffer_at: u64,
    buffer: Bytes,
    /// File position of the next batch.
    next: u64,
}

impl SegmentBatches {
    pub fn new(file: File, size: u64) -> SegmentBatches {
        SegmentBatches {
            file,
            size,
            buffer_at: 0,
            buffer: Bytes::new(),
            next: 0,
        }
    }

    /// The next whole batch, its header and file position, and the bytes read from the file
    /// to get it (for the I/O budget); `None` at the end of the segment. A batch that fails
    /// validation is corruption: an error naming the file and position.
    pub async fn next(&mut self) -> Result<Option<(u64, BatchHeader, Bytes, u64)>> {
        if self.next >= self.size {
            return Ok(None);
        }
        let mut read = 0;
        let length_end = self.next + LOG_OVERHEAD_BYTES as u64;
        read += self.ensure(length_end).await?;
        let at = (self.next - self.buffer_at) as usize;
        let declared = i32::from_be_bytes(self.buffer[at + 8..at + 12].try_into().expect("4"));
        let total = LOG_OVERHEAD_BYTES as u64 + declared.max(0) as u64;
        let end = self.next + total;
        if declared < 0 || end > self.size {
            return Err(self.corrupt(self.next, "batch runs past the segment end"));
        }
        read += self.ensure(end).await?;
        let at = (self.next - self.buffer_at) as usize;
        let bytes = self.buffer.slice(at..at + total as usize);
        let header = batch::validate(&bytes, usize::MAX, BatchOrigin::Replica)
            .map_err(|e| self.corrupt(self.next, &e.to_string()))?;
        let position = self.next;
        self.next = end;
        Ok(Some((position, header, bytes, read)))
    }

    /// Makes the buffer reach file position `end`; returns the bytes read.
    async fn ensure(&mut self, end: u64) -> Result<u64> {
        if end <= self.buffer_at + self.buffer.len() as u64 && self.next >= self.buffer_at {
            return Ok(0);
        }
        if end > self.size {
            return Err(self.corrupt(self.next, "batch runs past the segment end"));
        }
        let want = ((end - self.next) as usize)
            .max(READ_BYTES)
            .min((self.size - self.next) as usize);
        let bytes = self
            .file
            .read_at(self.next, want)
            .await
            .map_err(|e| Error::io("read", self.file.path(), e))?;
        if (bytes.len() as u64) < end - self.next {
            return Err(self.corrupt(self.next, "segment shorter than it was"));
        }
        self.buffer_at = self.next;
        self.buffer = Bytes::from(bytes);
        Ok(self.buffer.len() as u64)
    }

    fn corrupt(&self, position: u64, reason: &str) -> Error {
        Error::Corrupt {
            path: self.file.path().to_path_buf(),
            position,
            reason: reason.to_string(),
        }
    }
}
