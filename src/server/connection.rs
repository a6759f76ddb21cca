//! One client connection, on the shard that accepted it.
//!
//! The reader takes frames off the socket and starts each request at once, in arrival order,
//! so clients may pipeline; the writer sends the responses in that same order. Two bounds keep
//! memory in check: the shard's budget of request bytes read but not yet answered (the reader
//! waits for room before reading a body), and the number of requests one connection may have
//! in flight (`connection_inflight_max`; beyond it the reader stops reading).
//!
//! On a TLS listener the handshake comes first (bounded in time; a client that does not speak
//! TLS is dropped); a client certificate names the principal. On a SASL listener requests are
//! taken one at a time, frames bounded by `sasl.server.max.receive.size`, until the client
//! has authenticated (`handlers::sasl`).

use super::frame::{FrameError, FrameReader, FrameSource};
use super::handoff::{self, Handoff};
use super::send::ConnectionWriter;
use super::stream::SharedStream;
use crate::config::ShardSettings;
use crate::handlers::{self, ConnectionState, Response};
use crate::protocol::OutChunk;
use crate::security::listener::ListenerSecurity;
use crate::security::principal::{self, Principal};
use crate::shard::Shard;
use ferrite_shards::placement::ShardId;
use ferrite_shards::sync::FifoGate;
use ferrite_shards::uring::socket::SocketFd;
use futures::future::Either;
use glommio::channels::local_channel::{self, LocalReceiver, LocalSender};
use glommio::net::TcpStream;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

/// Request bytes held against the shard's budget until the response is sent.
struct Budget {
    gate: Rc<FifoGate>,
    units: u64,
}

impl Drop for Budget {
    fn drop(&mut self) {
        self.gate.release(self.units);
    }
}

struct InFlight {
    response: glommio::task::JoinHandle<Response>,
    _budget: Budget,
}

/// How long a client has to finish the TLS handshake.
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves one connection from `peer` (its address, when the kernel gave it) on `listener`
/// until it ends, or until it is to move to the shard that owns its partitions: then the
/// handoff for that shard comes back.
pub async fn serve(
    shard: Rc<Shard>,
    stream: TcpStream,
    peer: Option<SocketAddr>,
    listener: Arc<ListenerSecurity>,
) -> Option<Handoff> {
    let client_host: Rc<str> = match peer {
        Some(a) => Rc::from(format!("/{}", a.ip())),
        None => Rc::from("/unknown"),
    };
    let peer_addr = peer;
    let peer = peer_name(peer);
    let _ = stream.set_nodelay(true);
    let settings = shard.config.shard(shard.id.0).clone();
    set_buffer_sizes(&stream, &settings);
    let stall_limit = send_stall_limit(&shard);
    // TLS writes go through glommio's stream: the same limit there.
    let _ = stream.set_write_timeout(stall_limit);
    let stream = SharedStream::new(stream);
    let fd = SocketFd::new(stream.clone()).with_stall_limit(stall_limit);
    let connection = Rc::new(ConnectionState::new(client_host, listener.clone()));
    let frames = FrameReader::new(shard.config.broker.socket_request_max_bytes);
    let Some(acceptor) = &listener.tls else {
        return serve_plaintext(&shard, stream, fd, connection, peer_addr, frames).await;
    };
    let handshake = glommio::timer::timeout(TLS_HANDSHAKE_TIMEOUT, async {
        acceptor
            .accept(stream)
            .await
            .map_err(glommio::GlommioError::IoError)
    });
    let tls = match handshake.await {
        Ok(tls) => tls,
        Err(e) => {
            let failed = &shard.stats.tls_handshakes_failed;
            failed.set(failed.get() + 1);
            tracing::info!(%peer, listener = %listener.name, error = %e, "TLS handshake failed");
            return None;
        }
    };
    if let Some(cert) = tls.get_ref().1.peer_certificates().and_then(|c| c.first()) {
        let mapped =
            principal::subject_dn(cert).and_then(|dn| listener.principal_mapper.map(&dn).ok_or(dn));
        match mapped {
            Ok(name) => {
                let principal = Principal::user(name);
                tracing::debug!(%principal, "client certificate");
                *connection.principal.borrow_mut() = principal;
            }
            Err(dn) => {
                tracing::info!(%peer, %dn, "no ssl.principal.mapping.rules rule matches the client certificate");
                return None;
            }
        }
    }
    let (reader, writer) = futures::AsyncReadExt::split(tls);
    let writer = ConnectionWriter::tls(fd, writer);
    // A TLS session's state stays with the shard that holds it: these connections never move.
    let _ = run(&shard, reader, writer, connection, &settings, peer, frames).await;
    None
}

/// Serves, on this shard, a plaintext connection moved here from another shard.
pub async fn resume(shard: Rc<Shard>, handoff: Handoff) -> Option<Handoff> {
    let peer = handoff.peer;
    let (stream, fd, connection, buffered) = handoff.open();
    let fd = fd.with_stall_limit(send_stall_limit(&shard));
    let frames = FrameReader::with_buffered(shard.config.broker.socket_request_max_bytes, buffered);
    serve_plaintext(&shard, stream, fd, connection, peer, frames).await
}

/// Serves a plaintext connection on this shard, newly accepted or moved here, until it ends or
/// is to move on (then its handoff comes back).
async fn serve_plaintext(
    shard: &Rc<Shard>,
    stream: SharedStream,
    fd: SocketFd,
    connection: Rc<ConnectionState>,
    peer: Option<SocketAddr>,
    frames: FrameReader,
) -> Option<Handoff> {
    let settings = shard.config.shard(shard.id.0).clone();
    let pipes = shard
        .config
        .broker
        .fetch_zero_copy
        .then(|| shard.pipes.clone());
    let writer = ConnectionWriter::new(fd, pipes);
    let moving = run(
        shard,
        stream,
        writer,
        connection.clone(),
        &settings,
        peer_name(peer),
        frames,
    );
    Handoff::of(moving.await?, &connection, peer)
}

/// How long a response may wait for a client that takes nothing before the connection is
/// closed: Kafka closes a connection with no progress for `connections.max.idle.ms`, and a
/// client that stops reading would otherwise hold the connection's writer (and the splice
/// pipe it may have borrowed) for ever.
fn send_stall_limit(shard: &Shard) -> Option<Duration> {
    let ms = shard.config.broker.connections_max_idle_ms;
    (ms > 0).then(|| Duration::from_millis(ms as u64))
}

/// The peer's address as logs show it.
fn peer_name(peer: Option<SocketAddr>) -> String {
    peer.map(|a| a.to_string()).unwrap_or_else(|| "?".into())
}

/// Why the reader stopped.
enum ReaderEnd {
    /// The connection ends, for this reason.
    Close(String),
    /// The connection moves to the shard that owns its partitions (`handoff`).
    Move(ShardId),
}

/// A connection whose reader stopped to move it, with every response written.
pub struct Moving {
    pub target: ShardId,
    pub writer: ConnectionWriter,
    pub frames: FrameReader,
}

/// Reads requests from `reader` and writes their responses with `writer` until either ends,
/// or until the reader stops to move the connection: then, once the writer has sent every
/// response, what the move needs comes back, with the socket left open.
async fn run<R: FrameSource>(
    shard: &Rc<Shard>,
    reader: R,
    writer: ConnectionWriter,
    connection: Rc<ConnectionState>,
    settings: &ShardSettings,
    peer: String,
    mut frames: FrameReader,
) -> Option<Moving> {
    let (tx, rx) = local_channel::new_bounded(settings.connection_inflight_max);
    let write_task = glommio::spawn_local(write_responses(shard.clone(), writer, rx, peer.clone()));
    let end = read_requests(shard, reader, tx, connection, &mut frames).await;
    // The writer ends once it has sent the response of every request read.
    let writer = write_task.await;
    match (end, writer) {
        (ReaderEnd::Move(target), Some(writer)) => Some(Moving {
            target,
            writer,
            frames,
        }),
        (end, writer) => {
            let why = match end {
                ReaderEnd::Close(why) => why,
                ReaderEnd::Move(_) => "the writer closed the connection".into(),
            };
            tracing::debug!(shard = %shard.id, %peer, reason = %why, "connection reader done");
            if let Some(writer) = writer {
                writer.fd().shutdown();
            }
            None
        }
    }
}

/// The tuning file's socket buffer sizes; 0 leaves the kernel's autotuning alone.
fn set_buffer_sizes(stream: &TcpStream, settings: &ShardSettings) {
    for (option, bytes) in [
        (libc::SO_SNDBUF, settings.socket_send_buffer_bytes),
        (libc::SO_RCVBUF, settings.socket_receive_buffer_bytes),
    ] {
        if bytes == 0 {
            continue;
        }
        let value = bytes.min(i32::MAX as usize) as libc::c_int;
        // SAFETY: setsockopt reads an int from a pointer valid for the call.
        let rc = unsafe {
            libc::setsockopt(
                stream.as_raw_fd(),
                libc::SOL_SOCKET,
                option,
                &value as *const libc::c_int as *const libc::c_void,
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            tracing::warn!(option, bytes, error = %std::io::Error::last_os_error(), "setting a socket buffer size failed");
        }
    }
}

async fn read_requests<R: FrameSource>(
    shard: &Rc<Shard>,
    mut stream: R,
    tx: LocalSender<InFlight>,
    connection: Rc<ConnectionState>,
    frames: &mut FrameReader,
) -> ReaderEnd {
    let broker = &shard.config.broker;
    let idle = Duration::from_millis(broker.connections_max_idle_ms as u64);
    // The connection's span: each request's task runs in it, so what a handler logs after its
    // first wait still names the connection.
    let span = tracing::Span::current();
    loop {
        if shard.is_shutting_down() {
            return ReaderEnd::Close("broker shutting down".into());
        }
        if let Some(target) = handoff::target(shard, &connection) {
            return ReaderEnd::Move(target);
        }
        // Before authentication a frame is a SASL request or token: Kafka bounds those by
        // sasl.server.max.receive.size, far below socket.request.max.bytes.
        let authenticated = connection.authenticated();
        frames.set_max_frame_bytes(if authenticated {
            broker.socket_request_max_bytes
        } else {
            broker.sasl_max_receive_bytes
        });
        let size = match next_size(shard, frames, &mut stream, idle).await {
            Ok(size) => size,
            Err(e) => return ReaderEnd::Close(e.to_string()),
        };
        // Wait for room in the shard's request budget before reading the body.
        let units = (size as u64).max(1);
        shard.request_budget.acquire(units).await;
        let budget = Budget {
            gate: shard.request_budget.clone(),
            units,
        };
        let frame = match frames.body(&mut stream, size).await {
            Ok(f) => f,
            Err(e) => return ReaderEnd::Close(e.to_string()),
        };
        let stats = &shard.stats;
        stats.bytes_in.set(stats.bytes_in.get() + 4 + size as u64);
        // A client with a quota is served as Kafka serves every connection: one request at a
        // time, then muted for its throttle time, so it cannot pipeline past its quota before
        // the first throttled response is out. Everyone else pipelines.
        // Until it has authenticated, a client is served one request at a time too: each step
        // of the exchange decides what the next frame may be.
        let one_at_a_time =
            !authenticated || handlers::has_client_quota(shard, &connection, &frame);
        let handled = if connection.expects_raw_token() {
            Either::Left(handlers::handle_raw_sasl_token(
                shard.clone(),
                frame,
                connection.clone(),
            ))
        } else {
            Either::Right(handlers::handle(shard.clone(), frame, connection.clone()))
        };
        let handled = tracing::Instrument::instrument(handled, span.clone());
        let (response, done) = if one_at_a_time {
            let (done_tx, done_rx) = futures::channel::oneshot::channel::<()>();
            let response = glommio::spawn_local(async move {
                let response = handled.await;
                let _ = done_tx.send(());
                response
            });
            (response.detach(), Some(done_rx))
        } else {
            (glommio::spawn_local(handled).detach(), None)
        };
        if tx
            .send(InFlight {
                response,
                _budget: budget,
            })
            .await
            .is_err()
        {
            return ReaderEnd::Close("the writer closed the connection".into());
        }
        if let Some(done) = done {
            let _ = done.await;
            wait_unmuted(shard, &connection).await;
        }
    }
}

/// A throttled client's requests are not taken until its throttle time has passed (KIP-219:
/// the broker mutes the connection; clients from that KIP on also wait themselves).
async fn wait_unmuted(shard: &Shard, connection: &ConnectionState) {
    let Some(until) = connection.muted_until.take() else {
        return;
    };
    let now = std::time::Instant::now();
    if until <= now {
        return;
    }
    let seen = shard.shutdown_started.generation();
    let sleep = glommio::timer::sleep(until - now);
    let stop = shard.shutdown_started.wait_past(seen);
    futures::pin_mut!(sleep, stop);
    futures::future::select(sleep, stop).await;
}

/// The next frame's size; also returns when the connection idles too long or the broker stops.
async fn next_size<R: FrameSource>(
    shard: &Shard,
    frames: &mut FrameReader,
    stream: &mut R,
    idle: Duration,
) -> Result<usize, FrameError> {
    let seen = shard.shutdown_started.generation();
    let read = glommio::timer::timeout(idle, async { Ok(frames.next_size(stream).await) });
    let stop = shard.shutdown_started.wait_past(seen);
    futures::pin_mut!(read, stop);
    match futures::future::select(read, stop).await {
        futures::future::Either::Left((Ok(r), _)) => r,
        futures::future::Either::Left((Err(_), _)) => Err(FrameError::Idle),
        futures::future::Either::Right(_) => Err(FrameError::Closed),
    }
}

/// What ends a connection after a response.
enum Closing {
    /// A handler asked for it, for this reason.
    Asked(String),
    /// The handler's task was dropped (the shard is stopping).
    Gone,
}

/// The pieces a response sends, and whether the connection ends after them.
fn response_parts(response: Option<Response>) -> (Vec<OutChunk>, Option<Closing>) {
    match response {
        Some(Response::Frame(f)) => (vec![OutChunk::Bytes(f)], None),
        Some(Response::Chunks(c)) => (c, None),
        Some(Response::Nothing) => (Vec::new(), None),
        Some(Response::Close(reason)) => (Vec::new(), Some(Closing::Asked(reason))),
        Some(Response::FrameThenClose(frame, reason)) => {
            (vec![OutChunk::Bytes(frame)], Some(Closing::Asked(reason)))
        }
        None => (Vec::new(), Some(Closing::Gone)),
    }
}

/// Sends each response in request order. Returns the writer when the reader ended the
/// connection's requests (the socket still open); after a failed send or a response that
/// closes the connection, shuts the socket down (which wakes a reader blocked on it) and
/// returns nothing.
///
/// Responses that are complete when the writer gets to them go out together in one send:
/// a pipelining producer's requests that one log write completed, or requests answered at
/// once (ApiVersions, Metadata) sent in a row, cost one `sendmsg` and one delivery to the
/// client instead of one each. Order is kept: gathering stops at the first response still
/// being worked on, which is sent first the next time round.
async fn write_responses(
    shard: Rc<Shard>,
    mut writer: ConnectionWriter,
    rx: LocalReceiver<InFlight>,
    peer: String,
) -> Option<ConnectionWriter> {
    use futures::FutureExt;
    // A request taken off the channel whose response was not ready when the last send was
    // gathered.
    let mut waiting: Option<InFlight> = None;
    loop {
        let first = match waiting.take() {
            Some(in_flight) => in_flight,
            None => match rx.recv().await {
                Some(in_flight) => in_flight,
                // The reader is done and every response is out.
                None => return Some(writer),
            },
        };
        let InFlight {
            response,
            _budget: budget,
        } = first;
        // Each budget is held until its response is sent.
        let mut budgets = vec![budget];
        let (mut chunks, mut closing) = response_parts(response.await);
        let mut responses = u64::from(!chunks.is_empty());
        while closing.is_none() {
            let InFlight {
                mut response,
                _budget: budget,
            } = match rx.recv().now_or_never() {
                Some(Some(in_flight)) => in_flight,
                // Nothing more yet, or the reader is done (the next recv says so again).
                _ => break,
            };
            match (&mut response).now_or_never() {
                Some(ready) => {
                    budgets.push(budget);
                    let (more, ends) = response_parts(ready);
                    responses += u64::from(!more.is_empty());
                    chunks.extend(more);
                    closing = ends;
                }
                None => {
                    waiting = Some(InFlight {
                        response,
                        _budget: budget,
                    });
                    break;
                }
            }
        }
        if !chunks.is_empty() {
            let before = writer.bytes_sent;
            let sent = writer.send(chunks).await;
            let stats = &shard.stats;
            stats
                .bytes_out
                .set(stats.bytes_out.get() + writer.bytes_sent - before);
            stats.response_sends.set(stats.response_sends.get() + 1);
            stats
                .responses_sent
                .set(stats.responses_sent.get() + responses);
            if let Err(e) = sent {
                tracing::debug!(shard = %shard.id, %peer, error = %e, "sending a response failed");
                break;
            }
        }
        drop(budgets);
        match closing {
            None => {}
            Some(Closing::Asked(reason)) => {
                tracing::info!(shard = %shard.id, %peer, %reason, "closing connection");
                break;
            }
            Some(Closing::Gone) => break,
        }
    }
    // Wakes the reader if it is blocked on the socket.
    writer.fd().shutdown();
    drop(rx);
    None
}
