//! Writing responses: protocol bytes and log chunks, in order, on the connection's socket.
//!
//! Memory pieces go out together in one vectored send. A file range goes out by splice from
//! the page cache (zero copy) through a pipe the shard lends (`PipePool`), or is read into
//! memory and sent: with `fetch.zero.copy.enable=false` (the copying path, kept to measure
//! against), or when every pipe of the shard is lent. Over TLS every byte is encrypted in user
//! space (this kernel has no kTLS), so file ranges are always read into memory first.

use super::stream::SharedStream;
use crate::protocol::OutChunk;
use ferrite_shards::log::Chunk;
use ferrite_shards::uring::pipes::PipePool;
use ferrite_shards::uring::socket::{self, SocketFd};
use ferrite_shards::uring::WriteChunk;
use futures::AsyncWriteExt;
use std::io;
use std::rc::Rc;

/// The write half of a TLS connection (the reader holds the other half).
pub type TlsWriteHalf = futures::io::WriteHalf<futures_rustls::server::TlsStream<SharedStream>>;

/// Sends for one connection; holds its socket descriptor open.
pub struct ConnectionWriter {
    fd: SocketFd,
    /// The shard's splice pipes; `None` sends file ranges from memory.
    pipes: Option<Rc<PipePool>>,
    tls: Option<TlsWriteHalf>,
    pub bytes_sent: u64,
}

impl ConnectionWriter {
    pub fn new(fd: SocketFd, pipes: Option<Rc<PipePool>>) -> ConnectionWriter {
        ConnectionWriter {
            fd,
            pipes,
            tls: None,
            bytes_sent: 0,
        }
    }

    /// A writer that encrypts through `tls`; `fd` is still the socket (to shut it down).
    pub fn tls(fd: SocketFd, tls: TlsWriteHalf) -> ConnectionWriter {
        ConnectionWriter {
            fd,
            pipes: None,
            tls: Some(tls),
            bytes_sent: 0,
        }
    }

    pub fn fd(&self) -> &SocketFd {
        &self.fd
    }

    pub async fn send(&mut self, chunks: Vec<OutChunk>) -> io::Result<()> {
        let mut pending: Vec<WriteChunk> = Vec::new();
        for chunk in chunks {
            match chunk {
                OutChunk::Bytes(b) => pending.push(WriteChunk::Shared(b)),
                OutChunk::Log(Chunk::Memory(b)) => pending.push(WriteChunk::Shared(b)),
                OutChunk::Log(Chunk::Batch { stamp, body }) => {
                    pending.push(WriteChunk::Stamp(stamp));
                    pending.push(WriteChunk::Shared(body));
                }
                OutChunk::Log(Chunk::File {
                    file,
                    position,
                    len,
                }) => {
                    self.flush(&mut pending).await?;
                    if let Some(pipes) = &self.pipes {
                        pipes
                            .send_file_range(&file, position, len, &self.fd)
                            .await?;
                        self.bytes_sent += len;
                    } else {
                        let bytes = file.read_at(position, len as usize).await?;
                        if bytes.len() as u64 != len {
                            return Err(io::Error::new(
                                io::ErrorKind::UnexpectedEof,
                                "segment ended before the range",
                            ));
                        }
                        pending.push(WriteChunk::Owned(bytes));
                        self.flush(&mut pending).await?;
                    }
                }
            }
        }
        self.flush(&mut pending).await
    }

    async fn flush(&mut self, pending: &mut Vec<WriteChunk>) -> io::Result<()> {
        if pending.is_empty() {
            return Ok(());
        }
        let chunks = std::mem::take(pending);
        self.bytes_sent += chunks
            .iter()
            .map(|c| c.as_slice().len() as u64)
            .sum::<u64>();
        match &mut self.tls {
            None => socket::send_all(&self.fd, chunks).await,
            Some(tls) => {
                // One plaintext buffer, so TLS records are full-sized rather than one per
                // small piece; encrypting copies every byte anyway.
                let mut plain =
                    Vec::with_capacity(chunks.iter().map(|c| c.as_slice().len()).sum::<usize>());
                for chunk in &chunks {
                    plain.extend_from_slice(chunk.as_slice());
                }
                tls.write_all(&plain).await?;
                tls.flush().await
            }
        }
    }
}
