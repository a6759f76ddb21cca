//! Moving a connection to the shard that owns its partitions.
//!
//! The kernel spreads connections over the shards (SO_REUSEPORT), so half the time a client
//! whose requests all name partitions of one shard lands on the other, and every request then
//! crosses cores: the owner is woken, and each shard that parks first issues glommio's
//! process-wide memory barrier. Measured on the 2-core reference machine
//! (`perf/results/cross-core/`), that hop more than doubled the broker's CPU per GB of 100-byte
//! records and halved the rate of reading a hot backlog.
//!
//! When `connection_move_after_requests` (default 16) produce and fetch requests in a row
//! named only partitions of one other shard (transaction coordinator requests count for the
//! shard of their id's `__transaction_state` partition), the reader stops taking requests, the
//! writer sends every response still due, and the socket goes to that shard with the bytes
//! already read of the next request, the principal and the listener; that shard serves it from
//! then on. A transactional producer's coordinator connection (Kafka's and librdkafka's keep
//! one apart from their produce connections) then reaches its coordinator without a hop:
//! EndTxn under load on two shards took 0.38–0.54 ms at the client instead of 0.61–0.96 ms
//! (`perf/results/transactions/2026-12-07.txt`). The client sees a pause of one round trip of its pipeline, nothing else: its requests
//! keep their order, and those it had sent meanwhile wait in the socket. Requests that name
//! partitions of several shards end the streak, so a connection that uses both never moves,
//! and one that alternates cannot bounce between them. Why 16: at 64, a 2 GB read of a hot
//! backlog that moved ran at 2,273 MB/s, against 3,400–5,100 MB/s for reads that moved after
//! 16 fetches (`perf/results/connection-moves/`).
//!
//! Only plaintext connections move, and only once authenticated: a TLS session's state is the
//! shard's rustls connection. A fetch session stays in the old shard's cache; the client's
//! next incremental fetch is answered FETCH_SESSION_ID_NOT_FOUND and it opens a new one, as
//! after any reconnect.

use super::connection::{self, Moving};
use super::stream::SharedStream;
use crate::handlers::ConnectionState;
use crate::security::listener::ListenerSecurity;
use crate::security::principal::Principal;
use crate::shard::capacity::ConnectionSlot;
use crate::shard::routing;
use crate::shard::Shard;
use bytes::BytesMut;
use ferrite_shards::placement::ShardId;
use ferrite_shards::uring::socket::SocketFd;
use glommio::net::TcpStream;
use std::net::SocketAddr;
use std::os::fd::{BorrowedFd, FromRawFd, IntoRawFd, OwnedFd};
use std::rc::Rc;
use std::sync::Arc;

/// What a connection takes to its new shard.
pub struct Handoff {
    pub target: ShardId,
    pub peer: Option<SocketAddr>,
    fd: OwnedFd,
    /// Bytes read off the socket that no request has taken yet.
    buffered: BytesMut,
    client_host: String,
    listener: Arc<ListenerSecurity>,
    principal: Principal,
}

impl Handoff {
    /// The handoff of a connection whose reader stopped to move it; `None` (the connection
    /// closes) when its descriptor cannot be duplicated.
    pub fn of(
        moving: Moving,
        connection: &ConnectionState,
        peer: Option<SocketAddr>,
    ) -> Option<Handoff> {
        // SAFETY: the writer holds the descriptor open for the whole borrow.
        let borrowed = unsafe { BorrowedFd::borrow_raw(moving.writer.fd().raw()) };
        let fd = match borrowed.try_clone_to_owned() {
            Ok(fd) => fd,
            Err(e) => {
                tracing::warn!(error = %e, "cannot duplicate a connection to move it; closing it");
                moving.writer.fd().shutdown();
                return None;
            }
        };
        // The writer and the stream close their own descriptors; the socket lives on in `fd`.
        Some(Handoff {
            target: moving.target,
            peer,
            fd,
            buffered: moving.frames.into_buffered(),
            client_host: connection.client_host.to_string(),
            listener: connection.listener.clone(),
            principal: connection.principal.borrow().clone(),
        })
    }

    /// On the new shard: the stream, a descriptor for its writer, the connection's state and
    /// the bytes already read.
    pub fn open(self) -> (SharedStream, SocketFd, Rc<ConnectionState>, BytesMut) {
        // SAFETY: the descriptor is ours alone; the stream owns it from here on.
        let stream = SharedStream::new(unsafe { TcpStream::from_raw_fd(self.fd.into_raw_fd()) });
        let writer_fd = SocketFd::new(stream.clone());
        let connection =
            ConnectionState::moved(Rc::from(self.client_host), self.listener, self.principal);
        (stream, writer_fd, Rc::new(connection), self.buffered)
    }
}

/// The shard this connection should move to, checked between requests: the one that owned
/// every partition of its latest `connection_move_after_requests` produce, fetch and
/// transaction coordinator requests, when that is another.
pub fn target(shard: &Shard, connection: &ConnectionState) -> Option<ShardId> {
    let after = shard
        .config
        .shard(shard.id.0)
        .connection_move_after_requests;
    if after == 0 || connection.listener.tls.is_some() || !connection.authenticated() {
        return None;
    }
    // A throttled connection serves its mute here first.
    if connection.muted_until.get().is_some() {
        return None;
    }
    connection.owned_elsewhere(shard.id, after)
}

/// After a connection's stay on this shard: it moves on with its place under
/// `max.connections`, or that place is given back.
pub async fn finish(shard: &Shard, next: Option<Handoff>, slot: ConnectionSlot) {
    let Some(handoff) = next else {
        drop(slot);
        return;
    };
    let target = handoff.target;
    let sent = routing::on_shard(shard, target, move |s| async move {
        let span = super::connection_span(handoff.peer);
        glommio::spawn_local(tracing::Instrument::instrument(
            adopt(s, handoff, slot),
            span,
        ))
        .detach();
    })
    .await;
    if sent.is_none() {
        tracing::debug!(%target, "the shard a connection was moving to has stopped; it closes");
    }
}

/// Serves a connection moved here until it ends or moves again.
async fn adopt(shard: Rc<Shard>, handoff: Handoff, slot: ConnectionSlot) {
    let stats = &shard.stats;
    stats
        .connections_moved_in
        .set(stats.connections_moved_in.get() + 1);
    stats.connections_open.set(stats.connections_open.get() + 1);
    let next = connection::resume(shard.clone(), handoff).await;
    stats.connections_open.set(stats.connections_open.get() - 1);
    Box::pin(finish(&shard, next, slot)).await;
}
