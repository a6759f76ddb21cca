//! One file per Kafka API. This one decodes a request frame, checks its API and version against
//! what Ferrite advertises, and hands it to the API's handler.
//!
//! An API Ferrite does not implement, an unsupported version, or a body that does not decode
//! closes the connection, as Kafka does; the one exception is ApiVersions in an unsupported
//! version, answered in v0 with UNSUPPORTED_VERSION so the client can retry lower (KIP-511).
//! Every refusal is logged at debug with the API, version, client id and reason, and counted.

mod acls;
mod add_offsets_to_txn;
mod add_partitions_to_txn;
mod alter_configs;
mod alter_partition_reassignments;
mod api_versions;
mod authorize;
mod authorized_operations;
mod client_quotas;
mod create_partitions;
mod create_topics;
#[cfg(test)]
mod decode_fuzz;
mod delete_groups;
mod delete_records;
mod delete_topics;
mod describe_cluster;
mod describe_configs;
mod describe_groups;
mod describe_log_dirs;
mod describe_producers;
mod describe_transactions;
mod elect_leaders;
mod end_txn;
pub mod errors;
mod fetch;
mod find_coordinator;
mod heartbeat;
mod init_producer_id;
mod join_group;
mod leave_group;
mod list_groups;
mod list_offsets;
mod list_transactions;
mod metadata;
mod offset_commit;
mod offset_delete;
mod offset_fetch;
mod offset_for_leader_epoch;
mod produce;
mod produce_checks;
mod sasl;
mod sync_group;
mod throttle;
mod txn_offset_commit;
mod user_scram_credentials;
mod write_txn_markers;

use crate::protocol::errors::ErrorCode;
use crate::protocol::versions::{supported, SUPPORTED};
use crate::protocol::OutChunk;
use crate::protocol::{self, legacy, PeekedHeader};
use crate::security::listener::ListenerSecurity;
use crate::security::principal::Principal;
use crate::security::sasl::Exchange;
use crate::shard::Shard;
use bytes::Bytes;
use ferrite_shards::placement::ShardId;
use futures::future::LocalBoxFuture;
use kafka_protocol::messages::{ApiKey, RequestKind};
use kafka_protocol::protocol::{Encodable, HeaderVersion};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

/// What goes back on the connection.
pub enum Response {
    /// A whole encoded frame.
    Frame(Bytes),
    /// A frame in pieces (fetch data as file ranges).
    Chunks(Vec<OutChunk>),
    /// Nothing (produce with acks=0).
    Nothing,
    /// Close the connection, for this reason.
    Close(String),
    /// Send this frame, then close the connection (a failed authentication).
    FrameThenClose(Bytes, String),
}

/// Where a connection stands with SASL.
pub enum SaslState {
    /// The listener has no SASL.
    NotRequired,
    /// A SASL listener before SaslHandshake.
    AwaitingHandshake,
    /// After SaslHandshake; v0 sends the tokens as raw frames.
    Exchanging {
        exchange: Exchange,
        raw_tokens: bool,
    },
    Authenticated,
}

/// What the requests of one connection share.
pub struct ConnectionState {
    /// Where the connection comes from, as Kafka shows it: "/" and the peer's address.
    pub client_host: Rc<str>,
    /// Until when the connection is not read (KIP-219: a throttled client is muted for its
    /// throttle time after its response).
    pub muted_until: Cell<Option<Instant>>,
    /// The listener the connection came in on.
    pub listener: Arc<ListenerSecurity>,
    /// Who the connection is: `User:ANONYMOUS` until SASL or a client certificate says.
    pub principal: RefCell<Principal>,
    pub sasl: RefCell<SaslState>,
    /// The shard that owned every partition of this connection's latest produce and fetch
    /// requests, and how many such requests in a row it owned (see `server::handoff`).
    owner_streak: Cell<(Option<ShardId>, u32)>,
    /// The connection's span has been given the client id (`name_client`).
    client_named: Cell<bool>,
}

impl ConnectionState {
    pub fn new(client_host: Rc<str>, listener: Arc<ListenerSecurity>) -> ConnectionState {
        let sasl = if listener.protocol.uses_sasl() {
            SaslState::AwaitingHandshake
        } else {
            SaslState::NotRequired
        };
        ConnectionState {
            client_host,
            muted_until: Cell::new(None),
            listener,
            principal: RefCell::new(Principal::anonymous()),
            sasl: RefCell::new(sasl),
            owner_streak: Cell::new((None, 0)),
            client_named: Cell::new(false),
        }
    }

    /// Gives the connection's span (the current one: a request's task runs in it) the client
    /// id of the connection's first request. Kafka's clients keep one id per connection; one
    /// that changes it is shown with the first, and each request's own id is in its span at
    /// debug level.
    fn name_client(&self, client_id: &str) {
        if !self.client_named.replace(true) && !client_id.is_empty() {
            tracing::Span::current().record("client", tracing::field::display(client_id));
        }
    }

    /// The state of an authenticated connection moved here from another shard.
    pub fn moved(
        client_host: Rc<str>,
        listener: Arc<ListenerSecurity>,
        principal: Principal,
    ) -> ConnectionState {
        // Only authenticated connections move (`server::handoff::target`).
        let sasl = if listener.protocol.uses_sasl() {
            SaslState::Authenticated
        } else {
            SaslState::NotRequired
        };
        ConnectionState {
            sasl: RefCell::new(sasl),
            principal: RefCell::new(principal),
            ..ConnectionState::new(client_host, listener)
        }
    }

    /// Records who owns the partitions a produce or fetch names, or the transaction coordinator
    /// a coordinator request goes to: `Some(shard)` when one shard owns them all, `None` when
    /// they are spread (or unknown), which ends the streak.
    pub fn note_owner(&self, owner: Option<ShardId>) {
        let (last, count) = self.owner_streak.get();
        self.owner_streak.set(match owner {
            Some(s) if last == Some(s) => (last, count.saturating_add(1)),
            Some(s) => (Some(s), 1),
            None => (None, 0),
        });
    }

    /// The one shard that has owned what at least `requests` produce, fetch and transaction
    /// coordinator requests in a row named, when that is not `here`.
    pub fn owned_elsewhere(&self, here: ShardId, requests: u32) -> Option<ShardId> {
        match self.owner_streak.get() {
            (Some(s), count) if s != here && count >= requests => Some(s),
            _ => None,
        }
    }

    /// Whether requests other than the SASL exchange may be served.
    pub fn authenticated(&self) -> bool {
        matches!(
            &*self.sasl.borrow(),
            SaslState::NotRequired | SaslState::Authenticated
        )
    }

    /// Whether the next frame is a raw SASL token (after SaslHandshake v0), not a request.
    pub fn expects_raw_token(&self) -> bool {
        matches!(
            &*self.sasl.borrow(),
            SaslState::Exchanging {
                raw_tokens: true,
                ..
            }
        )
    }
}

/// The shard that owns every one of `partitions` in the current metadata, if one does.
pub fn single_owner<'a>(
    shard: &Shard,
    mut partitions: impl Iterator<Item = (&'a str, i32)>,
) -> Option<ShardId> {
    let metadata = shard.metadata();
    let (topic, index) = partitions.next()?;
    let owner = metadata.partition(topic, index)?.shard;
    partitions
        .all(|(t, i)| metadata.partition(t, i).is_some_and(|p| p.shard == owner))
        .then_some(owner)
}

/// The request as handlers see it.
pub struct Request {
    pub api_key: ApiKey,
    pub version: i16,
    pub correlation_id: i32,
    /// The client's `client.id` ("" when it sent none).
    pub client_id: String,
    /// Where the connection comes from, as Kafka shows it: "/" and the peer's address.
    pub client_host: Rc<str>,
    /// The whole request frame's size in bytes (what a produce quota counts).
    pub size: usize,
    pub connection: Rc<ConnectionState>,
}

impl Request {
    /// Counts this coordinator request towards moving its connection to the shard that
    /// coordinates `transactional_id` (`server::handoff`): a transactional producer's
    /// coordinator connection carries only these, two or more a transaction, and each one
    /// served from the other shard waits for a round of both shards' work.
    pub fn note_transaction_coordinator(&self, shard: &Shard, transactional_id: &str) {
        self.connection
            .note_owner(crate::transactions::coordinator_shard(
                shard,
                transactional_id,
            ));
    }

    /// Mutes the connection for `ms` from now (a throttled response, KIP-219).
    pub fn mute_for(&self, ms: i32) {
        if ms <= 0 {
            return;
        }
        let until = Instant::now() + std::time::Duration::from_millis(ms as u64);
        let muted = &self.connection.muted_until;
        if muted.get().is_none_or(|m| m < until) {
            muted.set(Some(until));
        }
    }

    /// Encodes `body` as this request's response.
    pub fn respond<R: Encodable + HeaderVersion>(&self, api_key: ApiKey, body: &R) -> Response {
        match protocol::encode_response(api_key, self.version, self.correlation_id, body) {
            Ok(frame) => Response::Frame(frame),
            Err(e) => Response::Close(format!(
                "encoding the {api_key:?} v{} response failed: {e:#}",
                self.version
            )),
        }
    }
}

/// Whether the client that sent `frame` on `connection` has any client quota (the
/// connection is then served one request at a time and muted when throttled).
pub fn has_client_quota(shard: &Shard, connection: &ConnectionState, frame: &[u8]) -> bool {
    let principal = connection.principal.borrow();
    throttle::has_quota(shard, &principal.name, || protocol::peek_client_id(frame))
}

/// A raw SASL token (after SaslHandshake v0), answered with the next raw token.
pub async fn handle_raw_sasl_token(
    shard: Rc<Shard>,
    token: Bytes,
    connection: Rc<ConnectionState>,
) -> Response {
    sasl::raw_token(&shard, &connection, &token).await
}

/// Decodes and serves one request frame, and counts it in the shard's metrics.
pub async fn handle(shard: Rc<Shard>, frame: Bytes, connection: Rc<ConnectionState>) -> Response {
    let started = Instant::now();
    let peek = protocol::peek_header(&frame);
    // A refcount, not a copy: the client id is read only if the request is refused.
    let request_bytes = frame.clone();
    let response = dispatch(&shard, frame, peek, connection).await;
    let refused = matches!(response, Response::Close(_) | Response::FrameThenClose(..));
    if let Response::Close(reason) = &response {
        tracing::debug!(
            api = peek.map(|p| p.api_key),
            version = peek.map(|p| p.api_version),
            client = %protocol::peek_client_id(&request_bytes),
            %reason,
            "request refused: closing the connection"
        );
    }
    shard
        .metrics
        .request_done(peek.map(|p| p.api_key), started.elapsed(), refused);
    response
}

/// A request frame decoded: its header's fields and its body.
#[derive(Debug)]
struct Decoded {
    api_key: ApiKey,
    version: i16,
    correlation_id: i32,
    client_id: String,
    body: RequestKind,
}

/// Decodes a request frame (header and body), or says what to answer instead: an
/// UNSUPPORTED_VERSION response for ApiVersions, a closed connection for anything else that
/// does not decode. Touches nothing but the frame, so it can be fuzzed on its own.
fn decode(mut frame: Bytes, peek: Option<PeekedHeader>) -> Result<Decoded, Response> {
    let Some(peek) = peek else {
        return Err(Response::Close(format!(
            "a {}-byte frame is too short for a request header",
            frame.len()
        )));
    };
    let Some((api_key, min, max)) = supported(peek.api_key) else {
        return Err(Response::Close(format!(
            "API key {} is not supported",
            peek.api_key
        )));
    };
    let version = peek.api_version;
    if !(min..=max).contains(&version) {
        return Err(unsupported_version(api_key, peek, min, max));
    }
    let header = kafka_protocol::protocol::decode_request_header_from_buffer(&mut frame)
        .map_err(|e| Response::Close(format!("bad request header: {e:#}")))?;
    let body = RequestKind::decode(api_key, &mut frame, version)
        .map_err(|e| Response::Close(format!("bad {api_key:?} v{version} request: {e:#}")))?;
    Ok(Decoded {
        api_key,
        version,
        correlation_id: peek.correlation_id,
        client_id: header.client_id.map(|c| c.to_string()).unwrap_or_default(),
        body,
    })
}

async fn dispatch(
    shard: &Rc<Shard>,
    frame: Bytes,
    peek: Option<PeekedHeader>,
    connection: Rc<ConnectionState>,
) -> Response {
    let size = frame.len();
    let decoded = match decode(frame, peek) {
        Ok(d) => d,
        Err(answer) => {
            if let (Some(peek), Response::Frame(_)) = (peek, &answer) {
                errors::refused(
                    shard,
                    ApiKey::ApiVersions,
                    ErrorCode::UNSUPPORTED_VERSION,
                    &format_args!("ApiVersions v{}", peek.api_version),
                );
            }
            return answer;
        }
    };
    let Decoded {
        api_key,
        version,
        correlation_id,
        client_id,
        body,
    } = decoded;
    if let Some(refusal) = gate(&connection, api_key) {
        return refusal;
    }
    tracing::trace!(shard = %shard.id, ?api_key, version, correlation_id, "request");
    let req = Request {
        api_key,
        version,
        correlation_id,
        client_id,
        client_host: connection.client_host.clone(),
        size,
        connection,
    };
    req.connection.name_client(&req.client_id);
    // At debug level only: creating a span costs every request a registry slot and its fields
    // formatted into a string, 4.9% of the broker's samples at 20,000 small requests a second
    // (`perf record` of `perf/connections.sh 10000`). Kafka too logs each request's header at
    // debug (`kafka.request.logger`); at info an event carries its shard and connection.
    let span = tracing::debug_span!("request", api = ?api_key, v = version, corr = req.correlation_id, client = %req.client_id);
    let started = Instant::now();
    let handler = serve(shard, &req, body);
    let response = tracing::Instrument::instrument(handler, span).await;
    throttle::record_request_time(shard, &req, started.elapsed());
    response
}

/// The handler's future for a request, boxed at its own size and not yet started (it runs
/// inside the request's span when polled). Awaited inline in one match, every request's
/// future would be as large as the largest handler's: see `task_size` below.
fn serve<'a>(
    shard: &'a Rc<Shard>,
    req: &'a Request,
    body: RequestKind,
) -> LocalBoxFuture<'a, Response> {
    match body {
        RequestKind::Produce(r) => Box::pin(produce::handle(shard, req, r)),
        RequestKind::Fetch(r) => Box::pin(fetch::handle(shard, req, r)),
        RequestKind::ListOffsets(r) => Box::pin(list_offsets::handle(shard, req, r)),
        RequestKind::Metadata(r) => Box::pin(metadata::handle(shard, req, r)),
        RequestKind::FindCoordinator(r) => Box::pin(find_coordinator::handle(shard, req, r)),
        RequestKind::JoinGroup(r) => Box::pin(join_group::handle(shard, req, r)),
        RequestKind::SyncGroup(r) => Box::pin(sync_group::handle(shard, req, r)),
        RequestKind::Heartbeat(r) => Box::pin(heartbeat::handle(shard, req, r)),
        RequestKind::LeaveGroup(r) => Box::pin(leave_group::handle(shard, req, r)),
        RequestKind::OffsetCommit(r) => Box::pin(offset_commit::handle(shard, req, r)),
        RequestKind::OffsetFetch(r) => Box::pin(offset_fetch::handle(shard, req, r)),
        RequestKind::ListGroups(r) => Box::pin(list_groups::handle(shard, req, r)),
        RequestKind::DescribeGroups(r) => Box::pin(describe_groups::handle(shard, req, r)),
        RequestKind::DeleteGroups(r) => Box::pin(delete_groups::handle(shard, req, r)),
        RequestKind::ApiVersions(r) => Box::pin(async move { api_versions::handle(shard, req, r) }),
        RequestKind::CreateTopics(r) => Box::pin(create_topics::handle(shard, req, r)),
        RequestKind::DeleteTopics(r) => Box::pin(delete_topics::handle(shard, req, r)),
        RequestKind::InitProducerId(r) => Box::pin(init_producer_id::handle(shard, req, r)),
        RequestKind::AddPartitionsToTxn(r) => {
            Box::pin(add_partitions_to_txn::handle(shard, req, r))
        }
        RequestKind::EndTxn(r) => Box::pin(end_txn::handle(shard, req, r)),
        RequestKind::AddOffsetsToTxn(r) => Box::pin(add_offsets_to_txn::handle(shard, req, r)),
        RequestKind::TxnOffsetCommit(r) => Box::pin(txn_offset_commit::handle(shard, req, r)),
        RequestKind::DescribeProducers(r) => Box::pin(describe_producers::handle(shard, req, r)),
        RequestKind::DescribeTransactions(r) => {
            Box::pin(describe_transactions::handle(shard, req, r))
        }
        RequestKind::ListTransactions(r) => Box::pin(list_transactions::handle(shard, req, r)),
        RequestKind::WriteTxnMarkers(r) => Box::pin(write_txn_markers::handle(shard, req, r)),
        RequestKind::DescribeConfigs(r) => {
            Box::pin(async move { describe_configs::handle(shard, req, r) })
        }
        RequestKind::SaslHandshake(r) => {
            Box::pin(async move { sasl::handle_handshake(shard, req, r) })
        }
        RequestKind::CreateAcls(r) => Box::pin(acls::handle_create(shard, req, r)),
        RequestKind::DescribeAcls(r) => {
            Box::pin(async move { acls::handle_describe(shard, req, r) })
        }
        RequestKind::DeleteAcls(r) => Box::pin(acls::handle_delete(shard, req, r)),
        RequestKind::SaslAuthenticate(r) => Box::pin(sasl::handle_authenticate(shard, req, r)),
        RequestKind::DescribeCluster(r) => {
            Box::pin(async move { describe_cluster::handle(shard, req, r) })
        }
        RequestKind::DeleteRecords(r) => Box::pin(delete_records::handle(shard, req, r)),
        RequestKind::DescribeLogDirs(r) => Box::pin(describe_log_dirs::handle(shard, req, r)),
        RequestKind::OffsetDelete(r) => Box::pin(offset_delete::handle(shard, req, r)),
        RequestKind::ElectLeaders(r) => Box::pin(elect_leaders::handle(shard, req, r)),
        RequestKind::AlterConfigs(r) => Box::pin(alter_configs::handle_legacy(shard, req, r)),
        RequestKind::IncrementalAlterConfigs(r) => {
            Box::pin(alter_configs::handle_incremental(shard, req, r))
        }
        RequestKind::CreatePartitions(r) => Box::pin(create_partitions::handle(shard, req, r)),
        RequestKind::DescribeClientQuotas(r) => {
            Box::pin(async move { client_quotas::handle_describe(shard, req, r) })
        }
        RequestKind::DescribeUserScramCredentials(r) => {
            Box::pin(async move { user_scram_credentials::handle_describe(shard, req, r) })
        }
        RequestKind::AlterUserScramCredentials(r) => {
            Box::pin(user_scram_credentials::handle_alter(shard, req, r))
        }
        RequestKind::AlterClientQuotas(r) => Box::pin(client_quotas::handle_alter(shard, req, r)),
        RequestKind::AlterPartitionReassignments(r) => {
            Box::pin(alter_partition_reassignments::handle_alter(shard, req, r))
        }
        RequestKind::ListPartitionReassignments(r) => {
            Box::pin(async move { alter_partition_reassignments::handle_list(shard, req, r) })
        }
        RequestKind::OffsetForLeaderEpoch(r) => {
            Box::pin(offset_for_leader_epoch::handle(shard, req, r))
        }
        other => Box::pin(std::future::ready(Response::Close(format!(
            "{other:?} is decoded but has no handler"
        )))),
    }
}

/// Kafka's `SaslServerAuthenticator`: until a SASL listener's client has authenticated, only
/// ApiVersions (before the handshake), SaslHandshake and SaslAuthenticate are served; any
/// other request closes the connection.
fn gate(connection: &ConnectionState, api_key: ApiKey) -> Option<Response> {
    let allowed = match &*connection.sasl.borrow() {
        SaslState::NotRequired | SaslState::Authenticated => true,
        SaslState::AwaitingHandshake => {
            matches!(api_key, ApiKey::ApiVersions | ApiKey::SaslHandshake)
        }
        SaslState::Exchanging { .. } => api_key == ApiKey::SaslAuthenticate,
    };
    (!allowed).then(|| {
        Response::Close(format!(
            "{api_key:?} on SASL listener {} before authentication",
            connection.listener.name
        ))
    })
}

fn unsupported_version(api_key: ApiKey, peek: PeekedHeader, min: i16, max: i16) -> Response {
    let version = peek.api_version;
    match api_key {
        ApiKey::ApiVersions => Response::Frame(legacy::api_versions_unsupported(
            peek.correlation_id,
            min,
            max,
        )),
        _ => Response::Close(format!(
            "{api_key:?} v{version} is not supported (only v{min} to v{max})"
        )),
    }
}

#[cfg(test)]
mod task_size {
    /// The size of the future an async fn returns, found without calling it.
    fn future_size<A, B, C, Fut, F: FnOnce(A, B, C) -> Fut>(_f: F) -> usize {
        std::mem::size_of::<Fut>()
    }

    /// Every request is spawned as a task holding `handle`'s future. glibc serves allocations
    /// of up to 1,032 bytes from its per-thread cache; a larger one first consolidates the fast
    /// bins. With each handler awaited inline, the future was as large as the largest
    /// handler's (TxnOffsetCommit's, 4.2 KiB) plus the decoding around it, 5.5 KiB for every
    /// request; with 10,000 connections malloc_consolidate, reached from that allocation,
    /// took 2% of the broker's CPU and glibc's allocator 14% in all. `serve` boxes each handler's future at its own size instead. The
    /// bound leaves room for glommio's task header (about 64 bytes) and the connection's
    /// wrapper around the future.
    #[test]
    fn a_requests_task_fits_the_allocators_thread_cache() {
        let request = future_size(super::handle);
        let sasl_token = future_size(super::handle_raw_sasl_token);
        assert!(
            request <= 900 && sasl_token <= 900,
            "a request's future is {request} bytes and a SASL token's {sasl_token}: box the \
             handler that grew it (see serve)"
        );
    }
}
