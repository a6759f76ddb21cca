//! Reading Kafka frames (a 4-byte big-endian size, then the request) off a connection.
//!
//! The size is checked before a byte of the body is read: negative or above
//! `socket.request.max.bytes` closes the connection. Frames come out as slices of one receive
//! buffer, so a Produce request's records reach the log without another copy.

use bytes::{Bytes, BytesMut};
use futures::AsyncReadExt;
use std::io;

/// Bytes asked of the socket per read while no frame is known to need more, when the last
/// read filled what it asked for (requests are streaming in).
const READ_CHUNK_BYTES: usize = 64 * 1024;
/// The most a read that finds a frame's size asks for because the last frame was that large:
/// the largest request Kafka's producers send by default (`max.request.size`, 1 MiB), so one
/// very large request does not leave every later read reserving as much.
const READ_AHEAD_BYTES_MAX: usize = 1 << 20;
/// Asked instead when the last read did not fill its ask: the client has sent all it had, and
/// the connection may now sit idle. A read must be given initialized memory, so whatever is
/// asked is zeroed, and resident, while the connection waits: 4 KiB rather than 64 per idle
/// connection (10,000 idle connections: 40 MiB rather than 640).
const IDLE_READ_CHUNK_BYTES: usize = 4 * 1024;

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

/// A stream frames are read from. A read through `AsyncRead` must be handed initialized
/// memory, so the buffer is zeroed before it: one byte zeroed for every byte received, since
/// each large request leaves in a new allocation (about 2% of the broker's CPU with 100-byte
/// records). A plain socket also reads what has already arrived straight into the buffer's
/// unused capacity, without waiting and without the zeroing.
pub trait FrameSource: futures::AsyncRead + Unpin {
    /// Whether [`read_ready`](FrameSource::read_ready) can read anything.
    const READS_READY: bool = false;

    /// Appends to `buf` at most `ask` bytes of what has arrived, without waiting (`buf` has
    /// room for them). `None` when nothing has: the caller waits through `AsyncRead`.
    fn read_ready(&mut self, _buf: &mut BytesMut, _ask: usize) -> Option<io::Result<usize>> {
        None
    }
}

/// A TLS session decrypts into the memory it is handed: only through `AsyncRead`.
impl<T: futures::AsyncRead + Unpin> FrameSource for futures::io::ReadHalf<T> {}

pub struct FrameReader {
    buf: BytesMut,
    max_frame_bytes: usize,
    /// The last read filled what it asked for.
    streaming: bool,
    /// `buf`'s memory up to this length (from its start) has been initialized, by a zeroing
    /// or a read, since its allocation last changed. A large frame comes in over several
    /// reads, each asking for the rest of the frame; without this every read zeroed the whole
    /// rest again: one 64 MiB request in 16 KiB pieces cost 1.2 s of broker CPU, now 0.2 s
    /// (`perf/large-request.py`). Now each byte is zeroed once (still about 4% of the CPU of
    /// 1 KiB produce, whose 1 MiB requests mostly arrive in one read).
    initialized: usize,
    /// The size of the last frame handed out, its 4 size bytes included. While requests
    /// stream in, the read that finds the next frame's size asks for at least this much (up
    /// to `READ_AHEAD_BYTES_MAX`), so the memory it reads into holds a frame as large whole.
    last_frame_bytes: usize,
}

impl FrameReader {
    pub fn new(max_frame_bytes: usize) -> FrameReader {
        FrameReader {
            buf: BytesMut::with_capacity(IDLE_READ_CHUNK_BYTES),
            max_frame_bytes,
            streaming: false,
            initialized: 0,
            last_frame_bytes: 0,
        }
    }

    /// A reader that starts with `buffered`, bytes already taken off the socket (a connection
    /// moved from another shard with part of its next request read).
    pub fn with_buffered(max_frame_bytes: usize, buffered: BytesMut) -> FrameReader {
        FrameReader {
            initialized: buffered.len(),
            buf: buffered,
            max_frame_bytes,
            streaming: false,
            last_frame_bytes: 0,
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

    /// Reads until at least `want` bytes are buffered, each read asking for at least
    /// `read_ahead` bytes beyond what is buffered.
    async fn fill<R: FrameSource>(
        &mut self,
        stream: &mut R,
        want: usize,
        read_ahead: usize,
    ) -> Result<(), FrameError> {
        while self.buf.len() < want {
            let have = self.buf.len();
            let ask = (want - have).max(read_ahead);
            // An ask no larger than a wait's is left to the wait alone (in memory initialized
            // before, or a few KiB zeroed), so an idle connection's next request costs no recv
            // that finds nothing.
            let reads_ready = R::READS_READY && ask > IDLE_READ_CHUNK_BYTES;
            let ready = if reads_ready {
                self.reserve_for(ask);
                stream.read_ready(&mut self.buf, ask)
            } else {
                None
            };
            let (n, asked) = match ready {
                Some(read) => {
                    let n = read?;
                    self.initialized = self.initialized.max(self.buf.len());
                    (n, ask)
                }
                // Nothing has arrived yet (or the stream reads only through AsyncRead): wait
                // for it with a read into initialized memory. A stream that reads what is
                // ready asks here only for an idle connection's chunk, memory this buffer has
                // initialized before; the rest of a large frame is then read ready, unzeroed.
                None => {
                    let ask = if reads_ready {
                        ask.min(IDLE_READ_CHUNK_BYTES)
                    } else {
                        ask
                    };
                    self.grow_initialized(have + ask);
                    let n = match stream.read(&mut self.buf[have..]).await {
                        Ok(n) => n,
                        Err(e) => {
                            self.buf.truncate(have);
                            return Err(e.into());
                        }
                    };
                    self.buf.truncate(have + n);
                    (n, ask)
                }
            };
            self.streaming = n == asked;
            if n == 0 {
                return Err(FrameError::Closed);
            }
        }
        Ok(())
    }

    /// Makes room for `ask` more bytes; what a reallocation did not copy is not initialized.
    fn reserve_for(&mut self, ask: usize) {
        let before = (self.buf.as_ptr(), self.buf.capacity());
        self.buf.reserve(ask);
        if (self.buf.as_ptr(), self.buf.capacity()) != before {
            self.initialized = self.buf.len();
        }
    }

    /// Makes `buf` `len` long, zeroing only memory not initialized yet; returns how many
    /// bytes it zeroed.
    fn grow_initialized(&mut self, len: usize) -> usize {
        let reusable = self.initialized.min(len).min(self.buf.capacity());
        if reusable > self.buf.len() {
            // SAFETY: within capacity, and the memory up to `initialized` of this allocation
            // was initialized (zeroed or read into) and only truncated away since; nothing
            // has reallocated it (every path that may reallocate resets `initialized`).
            unsafe { self.buf.set_len(reusable) };
        }
        let before = (self.buf.as_ptr(), self.buf.capacity());
        let zeroed = len.saturating_sub(self.buf.len());
        self.buf.resize(len, 0);
        if (self.buf.as_ptr(), self.buf.capacity()) != before {
            // Reallocated: only what was copied and what resize zeroed is initialized.
            self.initialized = len;
        } else {
            self.initialized = self.initialized.max(len);
        }
        zeroed
    }

    /// The size of the next frame, validated; the body is not read yet.
    ///
    /// This read may take in several frames at once (requests streaming in: a chunk, or the
    /// last frame's size if larger); a large body's read takes only the rest of its frame. Whatever
    /// a read takes beyond its frame is copied to new memory when a later read needs more
    /// room than is left after it, the frames before it still in use: reading a body only to
    /// its end left up to a chunk of the next frame behind after every large request, and
    /// growing the buffer under a body copied what was read of it (together 3% of the
    /// broker's CPU with 100-byte records, `perf record --call-graph dwarf`).
    pub async fn next_size<R: FrameSource>(&mut self, stream: &mut R) -> Result<usize, FrameError> {
        // Only a stream read ready takes the last frame's size: its memory is neither zeroed
        // nor touched before a read fills it. A TLS session's is zeroed, and stays resident.
        let read_ahead = match (self.streaming, R::READS_READY) {
            (false, _) => IDLE_READ_CHUNK_BYTES,
            (true, true) => READ_CHUNK_BYTES.max(self.last_frame_bytes.min(READ_AHEAD_BYTES_MAX)),
            (true, false) => READ_CHUNK_BYTES,
        };
        self.fill(stream, 4, read_ahead.min(self.max_frame_bytes))
            .await?;
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
    pub async fn body<R: FrameSource>(
        &mut self,
        stream: &mut R,
        size: usize,
    ) -> Result<Bytes, FrameError> {
        // A small frame's read may take in the frames after it too (one read for many small
        // requests); a large one's stops at its end.
        let read_ahead = if self.streaming && 4 + size < READ_CHUNK_BYTES {
            READ_CHUNK_BYTES.min(self.max_frame_bytes)
        } else {
            0
        };
        self.fill(stream, 4 + size, read_ahead).await?;
        let mut frame = self.buf.split_to(4 + size);
        let _ = frame.split_to(4);
        self.initialized = self.initialized.saturating_sub(4 + size);
        self.last_frame_bytes = 4 + size;
        Ok(frame.freeze())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::pin::Pin;
    use std::task::{Context, Poll};

    /// A piece of what a socket will deliver: arrived already, or only after a wait.
    enum Arrival {
        Arrived(Vec<u8>),
        Later(Vec<u8>),
    }

    /// A socket. Through `AsyncRead` it hands out one piece a read (as much of it as the read
    /// asks for) and records each ask. With `READS_READY`, what has arrived is also read ready
    /// (all of it up to the ask, as recv reads); what arrives later only after a wait.
    struct Socket<const READS_READY: bool> {
        arrivals: std::collections::VecDeque<Arrival>,
        waited_asks: Vec<usize>,
        read_ready_bytes: usize,
    }

    impl<const READS_READY: bool> Socket<READS_READY> {
        fn new(arrivals: impl IntoIterator<Item = Arrival>) -> Self {
            Socket {
                arrivals: arrivals.into_iter().collect(),
                waited_asks: Vec::new(),
                read_ready_bytes: 0,
            }
        }
    }

    /// A socket read only through `AsyncRead`, `pieces` one per read.
    fn waiting_socket(pieces: impl IntoIterator<Item = Vec<u8>>) -> Socket<false> {
        Socket::new(pieces.into_iter().map(Arrival::Later))
    }

    impl<const READS_READY: bool> futures::AsyncRead for Socket<READS_READY> {
        fn poll_read(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &mut [u8],
        ) -> Poll<io::Result<usize>> {
            self.waited_asks.push(buf.len());
            let mut piece = match self.arrivals.pop_front() {
                Some(Arrival::Later(piece) | Arrival::Arrived(piece)) => piece,
                None => return Poll::Ready(Ok(0)),
            };
            let n = piece.len().min(buf.len());
            buf[..n].copy_from_slice(&piece[..n]);
            if n < piece.len() {
                self.arrivals
                    .push_front(Arrival::Arrived(piece.split_off(n)));
            }
            Poll::Ready(Ok(n))
        }
    }

    impl FrameSource for Socket<false> {}

    impl FrameSource for Socket<true> {
        const READS_READY: bool = true;

        fn read_ready(&mut self, buf: &mut BytesMut, ask: usize) -> Option<io::Result<usize>> {
            assert!(buf.capacity() - buf.len() >= ask, "no room for the ask");
            // Like recv: everything that has arrived, up to the ask.
            let mut n = 0;
            while n < ask {
                if !matches!(self.arrivals.front(), Some(Arrival::Arrived(_))) {
                    break;
                }
                let Some(Arrival::Arrived(mut piece)) = self.arrivals.pop_front() else {
                    unreachable!("just matched")
                };
                let take = piece.len().min(ask - n);
                buf.extend_from_slice(&piece[..take]);
                if take < piece.len() {
                    self.arrivals
                        .push_front(Arrival::Arrived(piece.split_off(take)));
                }
                n += take;
            }
            if n == 0 {
                return None;
            }
            self.read_ready_bytes += n;
            Some(Ok(n))
        }
    }

    fn frame(body: &[u8]) -> Vec<u8> {
        let mut f = (body.len() as u32).to_be_bytes().to_vec();
        f.extend_from_slice(body);
        f
    }

    async fn next(reader: &mut FrameReader, socket: &mut impl FrameSource) -> Bytes {
        let size = reader.next_size(socket).await.unwrap();
        reader.body(socket, size).await.unwrap()
    }

    #[test]
    fn a_connection_between_small_requests_waits_with_a_small_read() {
        futures::executor::block_on(async {
            let mut socket = waiting_socket([frame(b"metadata"), frame(b"produce")]);
            let mut reader = FrameReader::new(100 << 20);
            assert_eq!(&next(&mut reader, &mut socket).await[..], b"metadata");
            assert_eq!(&next(&mut reader, &mut socket).await[..], b"produce");
            assert!(
                socket
                    .waited_asks
                    .iter()
                    .all(|&ask| ask <= IDLE_READ_CHUNK_BYTES),
                "reads asked for {:?}",
                socket.waited_asks
            );
        });
    }

    #[test]
    fn requests_streaming_in_are_read_in_large_chunks_and_come_out_whole() {
        futures::executor::block_on(async {
            let bodies: Vec<Vec<u8>> = (0..40u8).map(|i| vec![i; 1000 + i as usize]).collect();
            let stream: Vec<u8> = bodies.iter().flat_map(|b| frame(b)).collect();
            let mut socket = waiting_socket([stream]);
            let mut reader = FrameReader::new(100 << 20);
            for body in &bodies {
                assert_eq!(&next(&mut reader, &mut socket).await[..], &body[..]);
            }
            // The first read fills its small ask; the next asks for a whole chunk.
            assert_eq!(socket.waited_asks[0], IDLE_READ_CHUNK_BYTES);
            assert!(
                socket.waited_asks.contains(&READ_CHUNK_BYTES),
                "{:?}",
                socket.waited_asks
            );
            assert!(socket.waited_asks.len() <= 3, "{:?}", socket.waited_asks);
        });
    }

    #[test]
    fn a_large_frame_read_in_pieces_comes_out_whole() {
        futures::executor::block_on(async {
            let big: Vec<u8> = (0..(1usize << 20)).map(|i| (i % 251) as u8).collect();
            let small = b"next".to_vec();
            let stream: Vec<u8> = [frame(&big), frame(&small), frame(&big)].concat();
            // 128 KiB a read, as loopback tends to deliver a 1 MiB request.
            let mut socket = waiting_socket(stream.chunks(128 << 10).map(<[u8]>::to_vec));
            let mut reader = FrameReader::new(100 << 20);
            assert_eq!(&next(&mut reader, &mut socket).await[..], &big[..]);
            assert_eq!(&next(&mut reader, &mut socket).await[..], &small[..]);
            assert_eq!(&next(&mut reader, &mut socket).await[..], &big[..]);
            // Each read still asks for the rest of its frame (one read per piece)...
            assert!(socket.waited_asks.len() <= 20, "{:?}", socket.waited_asks);
            // ...which adds up to several times the data.
            let asked: usize = socket.waited_asks.iter().sum();
            assert!(
                asked > 4 * stream.len(),
                "asks {asked} for {} bytes",
                stream.len()
            );
        });
    }

    #[test]
    fn large_requests_streaming_in_are_read_each_into_memory_that_holds_it_whole() {
        futures::executor::block_on(async {
            let bodies: Vec<Vec<u8>> = (0..5u8).map(|i| vec![i; 94 << 10]).collect();
            let stream: Vec<u8> = bodies.iter().flat_map(|b| frame(b)).collect();
            let mut socket = Socket::<true>::new([Arrival::Arrived(stream)]);
            let mut reader = FrameReader::new(100 << 20);
            assert_eq!(&next(&mut reader, &mut socket).await[..], &bodies[0][..]);
            for body in &bodies[1..] {
                let size = reader.next_size(&mut socket).await.unwrap();
                let read_into = reader.buf.as_ptr();
                let frame = reader.body(&mut socket, size).await.unwrap();
                assert_eq!(&frame[..], &body[..]);
                // The body was not moved to bigger memory after its first bytes were read...
                assert_eq!(frame.as_ptr(), read_into.wrapping_add(4));
                // ...and no part of the next frame was taken, to be copied once this one's
                // memory is full.
                assert!(reader.buf.is_empty(), "{} bytes left", reader.buf.len());
            }
        });
    }

    #[test]
    fn memory_a_read_left_unfilled_is_not_zeroed_again() {
        let mut reader = FrameReader::new(100 << 20);
        assert_eq!(reader.grow_initialized(1 << 20), 1 << 20);
        // A read filled 128 KiB of the ask; the next read asks for the rest again.
        reader.buf.truncate(128 << 10);
        assert_eq!(reader.grow_initialized(1 << 20), 0);
        reader.buf.truncate(256 << 10);
        assert_eq!(reader.grow_initialized((1 << 20) + 10), 10);
        // A frame handed out: what follows it in the same memory stays initialized.
        let _frame = reader.buf.split_to(512 << 10);
        reader.initialized -= 512 << 10;
        reader.buf.truncate(0);
        assert_eq!(reader.grow_initialized(64 << 10), 0);
        // Growing past the allocation zeroes only beyond what this one had initialized.
        reader.buf.truncate(0);
        let left = (1 << 20) + 10 - (512 << 10);
        assert_eq!(reader.grow_initialized(4 << 20), (4 << 20) - left);
        assert_eq!(reader.initialized, 4 << 20);
    }

    #[test]
    fn what_has_arrived_is_read_without_zeroing_and_waits_ask_a_small_chunk() {
        futures::executor::block_on(async {
            let big: Vec<u8> = (0..(1usize << 20)).map(|i| (i % 251) as u8).collect();
            let first = frame(&big);
            let mut arrivals: std::collections::VecDeque<Arrival> =
                [Arrival::Later(first[..1000].to_vec())].into();
            // The rest of the large frame has arrived, in 128 KiB pieces, but for one wait.
            for (i, piece) in first[1000..].chunks(128 << 10).enumerate() {
                let piece = piece.to_vec();
                arrivals.push_back(if i == 3 {
                    Arrival::Later(piece)
                } else {
                    Arrival::Arrived(piece)
                });
            }
            arrivals.push_back(Arrival::Later(frame(b"metadata")));
            arrivals.push_back(Arrival::Arrived(frame(b"produce")));
            let mut socket = Socket::<true>::new(arrivals);
            let mut reader = FrameReader::new(100 << 20);
            assert_eq!(&next(&mut reader, &mut socket).await[..], &big[..]);
            assert_eq!(&next(&mut reader, &mut socket).await[..], b"metadata");
            assert_eq!(&next(&mut reader, &mut socket).await[..], b"produce");
            // Only the waits went through initialized memory, each asking a small chunk: for
            // the frame's first piece, for the piece that came later, and for each small
            // frame. The rest of the megabyte was read ready.
            assert_eq!(socket.waited_asks.len(), 4, "{:?}", socket.waited_asks);
            assert!(
                socket
                    .waited_asks
                    .iter()
                    .all(|&ask| ask <= IDLE_READ_CHUNK_BYTES),
                "{:?}",
                socket.waited_asks
            );
            assert!(
                socket.read_ready_bytes > 3 * (1 << 20) / 4,
                "{}",
                socket.read_ready_bytes
            );
            assert!(reader.initialized <= reader.buf.capacity());
        });
    }
}
