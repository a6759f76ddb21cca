//! Reading Kafka frames (a 4-byte big-endian size, then the request) off a connection.
//!
//! The size is checked before a byte of the body is read: negative or above
//! `socket.request.max.bytes` closes the connection. Frames come out as slices of one receive
//! buffer, so a Produce request's records reach the log without another copy.

use bytes::{Bytes, BytesMut};
use futures::AsyncReadExt;
use std::io;

/// Bytes asked of the socket per read while no frame is known to need more.
const READ_CHUNK_BYTES: usize = 64 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("connection closed")]
    Closed,
    #[error("frame size {0} is negative")]
    Negative(i32),
    #[error("frame size {size} exceeds socket.request.max.bytes {max}")]
    Oversized { size: usize, max: usize },
    #[error("idle for longer than connections.max.idle.ms")]
    Idle,
    #[error(transparent)]
    Io(#[from] io::Error),
}

pub struct FrameReader {
    buf: BytesMut,
    max_frame_bytes: usize,
}

impl FrameReader {
    pub fn new(max_frame_bytes: usize) -> FrameReader {
        FrameReader {
            buf: BytesMut::with_capacity(READ_CHUNK_BYTES),
            max_frame_bytes,
        }
    }

    /// A reader that starts with `buffered`, bytes already taken off the socket (a connection
    /// moved from another shard with part of its next request read).
    pub fn with_buffered(max_frame_bytes: usize, buffered: BytesMut) -> FrameReader {
        FrameReader {
            buf: buffered,
            max_frame_bytes,
        }
    }

    /// The bytes read from the socket and not yet handed out as a frame.
    pub fn into_buffered(self) -> BytesMut {
        self.buf
    }

    /// The largest frame accepted from now on.
    pub fn set_max_frame_bytes(&mut self, max: usize) {
        self.max_frame_bytes = max;
    }

    /// Reads until at least `want` bytes are buffered.
    async fn fill<R: futures::AsyncRead + Unpin>(
        &mut self,
        stream: &mut R,
        want: usize,
    ) -> Result<(), FrameError> {
        while self.buf.len() < want {
            let have = self.buf.len();
            let ask = (want - have).max(READ_CHUNK_BYTES.min(self.max_frame_bytes));
            self.buf.resize(have + ask, 0);
            let n = match stream.read(&mut self.buf[have..]).await {
                Ok(n) => n,
                Err(e) => {
                    self.buf.truncate(have);
                    return Err(e.into());
                }
            };
            self.buf.truncate(have + n);
            if n == 0 {
                return Err(FrameError::Closed);
            }
        }
        Ok(())
    }

    /// The size of the next frame, validated; the body is not read yet.
    pub async fn next_size<R: futures::AsyncRead + Unpin>(
        &mut self,
        stream: &mut R,
    ) -> Result<usize, FrameError> {
        self.fill(stream, 4).await?;
        let size = i32::from_be_bytes(self.buf[..4].try_into().expect("4 bytes"));
        if size < 0 {
            return Err(FrameError::Negative(size));
        }
        let size = size as usize;
        if size > self.max_frame_bytes {
            return Err(FrameError::Oversized {
                size,
                max: self.max_frame_bytes,
            });
        }
        Ok(size)
    }

    /// The body of the frame whose size `next_size` returned.
    pub async fn body<R: futures::AsyncRead + Unpin>(
        &mut self,
        stream: &mut R,
        size: usize,
    ) -> Result<Bytes, FrameError> {
        self.fill(stream, 4 + size).await?;
        let mut frame = self.buf.split_to(4 + size);
        let _ = frame.split_to(4);
        if self.buf.capacity() < READ_CHUNK_BYTES {
            self.buf.reserve(READ_CHUNK_BYTES);
        }
        Ok(frame.freeze())
    }
}
