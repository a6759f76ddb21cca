//! Client quotas in the request path: the connection's quota of each kind (found in the
//! metadata's client quotas, Kafka's order), its rate recorded (`shard::client_quotas`), and
//! the throttle time put in the response and on the connection (muted for that long).
//!
//! A user quota applies to the connection's principal name: the SASL user, the (mapped)
//! client certificate subject, or `ANONYMOUS` (Kafka's unauthenticated principal).

use super::Request;
use crate::metadata::client_quotas::{self, QuotaKey};
use crate::shard::client_quotas::QuotaKind;
use crate::shard::Shard;
use ferrite_shards::types::now_ms;

fn config_key(kind: QuotaKind) -> &'static str {
    match kind {
        QuotaKind::Produce => client_quotas::PRODUCER_BYTE_RATE,
        QuotaKind::Fetch => client_quotas::CONSUMER_BYTE_RATE,
        QuotaKind::Request => client_quotas::REQUEST_PERCENTAGE,
    }
}

/// The connection's quota of `kind`: who shares it, and its bound.
fn quota_of(shard: &Shard, req: &Request, kind: QuotaKind) -> Option<(QuotaKey, f64)> {
    let metadata = shard.metadata();
    if metadata.client_quotas.is_empty() {
        return None;
    }
    client_quotas::quota_for(
        &metadata.client_quotas,
        config_key(kind),
        &req.connection.principal.borrow().name,
        &req.client_id,
    )
}

/// Whether the client has a quota of any kind; its id is read (`client_id`) only once some
/// quota is set, so connections pay nothing while there is none.
pub fn has_quota(shard: &Shard, user: &str, client_id: impl FnOnce() -> String) -> bool {
    let metadata = shard.metadata();
    if metadata.client_quotas.is_empty() {
        return false;
    }
    let client_id = client_id();
    QuotaKind::ALL.into_iter().any(|kind| {
        client_quotas::quota_for(&metadata.client_quotas, config_key(kind), user, &client_id)
            .is_some()
    })
}

/// A recorded amount, to take back if the response carries nothing (a throttled fetch).
pub struct Recorded {
    kind: QuotaKind,
    key: QuotaKey,
    value: f64,
    pub throttle_ms: i32,
}

/// Records `value` against the connection's quota of `kind`; `None` without a quota.
pub fn record(shard: &Shard, req: &Request, kind: QuotaKind, value: f64) -> Option<Recorded> {
    let (key, bound) = quota_of(shard, req, kind)?;
    let throttle_ms = shard
        .client_quotas
        .record(kind, &key, bound, value, now_ms());
    Some(Recorded {
        kind,
        key,
        value,
        throttle_ms,
    })
}

/// Takes a recording back (Kafka's `unrecordQuotaSensor`).
pub fn unrecord(shard: &Shard, recorded: &Recorded) {
    shard
        .client_quotas
        .unrecord(recorded.kind, &recorded.key, recorded.value, now_ms());
}

/// The throttle time of `recorded` (0 without a quota), counted and applied: the connection
/// is muted for that long once the response is out.
pub fn apply(req: &Request, shard: &Shard, recorded: Option<&Recorded>) -> i32 {
    let Some(r) = recorded.filter(|r| r.throttle_ms > 0) else {
        return 0;
    };
    shard.client_quotas.throttled(r.kind, r.throttle_ms);
    req.mute_for(r.throttle_ms);
    r.throttle_ms
}

/// `request_percentage`: the time the request took, as percent of one second (Kafka's
/// `nanosToPercentage` of request thread time; here the handler's time on its shard), muting
/// the connection when over (the response is already encoded, so only the mute tells it).
pub fn record_request_time(shard: &Shard, req: &Request, took: std::time::Duration) {
    let percent_seconds = took.as_secs_f64() * 100.0;
    let recorded = record(shard, req, QuotaKind::Request, percent_seconds);
    apply(req, shard, recorded.as_ref());
}

/// Who pays for a topic change (KIP-599) asked at `req`, strict from `strict_from`, at its
/// `controller_mutation_rate` client quota if it has one.
pub fn mutation_payer(shard: &Shard, req: &Request, strict_from: i16) -> crate::controller::Payer {
    let metadata = shard.metadata();
    let rate = client_quotas::quota_for(
        &metadata.client_quotas,
        client_quotas::CONTROLLER_MUTATION_RATE,
        &req.connection.principal.borrow().name,
        &req.client_id,
    )
    .map(|(_, bound)| bound);
    crate::controller::Payer::client(&req.client_id, req.version, strict_from, rate)
}
