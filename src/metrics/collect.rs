//! One shard's series at the moment of a scrape: its counters, its router and cache, its
//! fsync latencies, and a set of series per partition it holds. Runs on the shard itself.

use super::exposition::Exposition;
use crate::shard::client_quotas::QuotaKind;
use crate::shard::counters::{api_name, ShardMetrics};
use crate::shard::Shard;
use ferrite_shards::stats::with_shard_io;
use std::collections::BTreeMap;

pub fn shard(shard: &Shard) -> Exposition {
    let mut e = Exposition::default();
    let id = shard.id.0.to_string();
    connections(&mut e, shard, &id);
    requests(&mut e, &shard.metrics, &id);
    engine(&mut e, shard, &id);
    partitions(&mut e, shard, &id);
    groups(&mut e, shard, &id);
    if shard.id.0 == 0 {
        // Broker-wide: the rates are shared by every shard, so one shard reports them.
        client_quotas(&mut e, shard);
    }
    e
}

/// Client quotas: throttled responses and throttle time per quota type (Kafka's
/// `throttle-time` sensors), and each quota's measured rate beside its bound.
fn client_quotas(e: &mut Exposition, shard: &Shard) {
    let quotas = &shard.client_quotas;
    for kind in QuotaKind::ALL {
        let labels: &[(&str, &str)] = &[("type", kind.name())];
        let (responses, ms) = quotas.throttle_totals(kind);
        e.counter(
            "ferrite_client_quota_throttled_responses_total",
            "Responses that carried a throttle time, by quota type.",
            labels,
            responses,
        );
        e.counter(
            "ferrite_client_quota_throttle_time_ms_total",
            "Throttle time given to clients over their quota, by quota type.",
            labels,
            ms,
        );
    }
    for r in quotas.readings(ferrite_shards::types::now_ms()) {
        let user = r.key.user.as_deref().unwrap_or("");
        let client_id = r.key.client_id.as_deref().unwrap_or("");
        let labels: &[(&str, &str)] = &[
            ("type", r.kind.name()),
            ("user", user),
            ("client_id", client_id),
        ];
        e.gauge(
            "ferrite_client_quota_rate",
            "A client quota's measured rate (bytes/s, or percent of a shard for Request).",
            labels,
            r.rate,
        );
        e.gauge(
            "ferrite_client_quota_bound",
            "A client quota's bound, in the unit of its rate.",
            labels,
            r.bound,
        );
    }
}

fn connections(e: &mut Exposition, shard: &Shard, id: &str) {
    let s: &[(&str, &str)] = &[("shard", id)];
    let st = &shard.stats;
    e.gauge(
        "ferrite_connections_open",
        "Client connections open on the shard.",
        s,
        st.connections_open.get() as f64,
    );
    e.counter(
        "ferrite_connections_accepted_total",
        "Client connections the shard accepted.",
        s,
        st.connections_accepted.get(),
    );
    e.counter(
        "ferrite_connections_refused_per_ip_total",
        "Connections the shard closed at accept because their address held max.connections.per.ip.",
        s,
        st.connections_refused_per_ip.get(),
    );
    e.counter(
        "ferrite_connections_moved_total",
        "Connections moved to the shard because it owns every partition they produce to or fetch from.",
        s,
        st.connections_moved_in.get(),
    );
    e.gauge(
        "ferrite_splice_pipes_open",
        "Pipes the shard has open for zero-copy fetches (lent one file range at a time).",
        s,
        shard.pipes.open() as f64,
    );
    e.counter(
        "ferrite_splice_pipe_busy_bytes_total",
        "Fetched file bytes the shard read into memory and sent because every one of its splice pipes was lent.",
        s,
        shard.pipes.copied_bytes(),
    );
    e.counter(
        "ferrite_tls_handshakes_failed_total",
        "TLS handshakes that failed or timed out on the shard's TLS listeners.",
        s,
        st.tls_handshakes_failed.get(),
    );
    e.counter(
        "ferrite_network_received_bytes_total",
        "Request bytes read from clients, frame sizes included.",
        s,
        st.bytes_in.get(),
    );
    e.counter(
        "ferrite_network_sent_bytes_total",
        "Response bytes written to clients, frame sizes included.",
        s,
        st.bytes_out.get(),
    );
    e.counter(
        "ferrite_responses_sent_total",
        "Responses written to clients (acks=0 produce has none).",
        s,
        st.responses_sent.get(),
    );
    e.counter(
        "ferrite_response_sends_total",
        "Sends that carried them: responses complete together go out in one.",
        s,
        st.response_sends.get(),
    );
}

fn requests(e: &mut Exposition, m: &ShardMetrics, shard: &str) {
    for (slot, count) in m.requests.iter().enumerate() {
        if count.get() == 0 {
            continue;
        }
        let api = api_name(slot);
        let labels: &[(&str, &str)] = &[("shard", shard), ("api", &api)];
        e.counter(
            "ferrite_requests_total",
            "Requests served, by Kafka API.",
            labels,
            count.get(),
        );
        e.counter(
            "ferrite_requests_refused_total",
            "Requests answered by closing the connection (malformed or unsupported).",
            labels,
            m.refused[slot].get(),
        );
        e.histogram(
            "ferrite_request_duration_seconds",
            "Time from a request's arrival to its response being ready (long polls included).",
            labels,
            &m.durations[slot].snapshot(),
        );
    }
    for (&(slot, code), &count) in m.errors.borrow().iter() {
        let api = api_name(slot);
        let code = code.code().to_string();
        e.counter(
            "ferrite_request_errors_total",
            "Kafka error codes returned, by API (per partition or topic where the response has them).",
            &[("shard", shard), ("api", &api), ("error_code", &code)],
            count,
        );
    }
    for ((slot, principal), &count) in m.denials.borrow().iter() {
        let api = api_name(*slot);
        e.counter(
            "ferrite_authorization_denied_total",
            "Requests or parts of requests the authorizer denied, by API and principal.",
            &[("shard", shard), ("api", &api), ("principal", principal)],
            count,
        );
    }
    for (way, c) in [("up", &m.conversions[0]), ("down", &m.conversions[1])] {
        let labels: &[(&str, &str)] = &[("shard", shard), ("direction", way)];
        e.counter(
            "ferrite_message_conversions_total",
            "Records converted: up from Produce v0-2 message sets, down for Fetch v0-3 readers.",
            labels,
            c.records.get(),
        );
        e.counter(
            "ferrite_message_conversion_micros_total",
            "Time spent converting records between message formats, in microseconds.",
            labels,
            c.micros.get(),
        );
        e.counter(
            "ferrite_message_conversion_bytes_total",
            "Bytes built in memory by message format conversions (they cannot splice).",
            labels,
            c.bytes.get(),
        );
    }
    for (topic, partitions) in m.fetched_bytes.borrow().iter() {
        for (partition, &bytes) in partitions {
            let partition = partition.to_string();
            e.counter(
                "ferrite_partition_fetched_bytes_total",
                "Record bytes sent in fetch responses by this shard (consumers and followers).",
                &[
                    ("shard", shard),
                    ("topic", topic),
                    ("partition", &partition),
                ],
                bytes,
            );
        }
    }
}

fn engine(e: &mut Exposition, shard: &Shard, id: &str) {
    let s: &[(&str, &str)] = &[("shard", id)];
    let router = shard.router().stats();
    for (target, calls) in [
        ("local", router.local_calls.get()),
        ("remote", router.remote_calls.get()),
    ] {
        e.counter(
            "ferrite_router_calls_total",
            "Calls to the shard owning a partition: on this shard (local) or a hop to another core (remote).",
            &[("shard", id), ("target", target)],
            calls,
        );
    }
    e.counter(
        "ferrite_router_full_channel_waits_total",
        "Cross-core calls that found the target's channel full and waited.",
        s,
        router.full_channel_waits.get(),
    );
    e.counter(
        "ferrite_uring_late_wakeups_total",
        "Times the shard's io_uring sweeper found completions the shard was not woken for and reaped them (see shards/src/uring).",
        s,
        ferrite_shards::uring::late_wakeups(),
    );
    let (segment_files_open, segment_files_max) = ferrite_shards::log::open_segment_files();
    e.gauge(
        "ferrite_segment_files_open",
        "Segment files the shard holds open now (at most ferrite_segment_files_open_max; the others are reopened on use).",
        s,
        segment_files_open as f64,
    );
    e.gauge(
        "ferrite_segment_files_open_max",
        "The shard's share of the open file limit for segment files.",
        s,
        segment_files_max as f64,
    );
    e.counter(
        "ferrite_segment_file_reopens_total",
        "Segment files reopened, over every shard, after the open file budget had closed them.",
        s,
        ferrite_shards::log::segment_file_reopens(),
    );
    if let Some(cache) = shard.batch_cache() {
        let (hits, misses) = cache.hit_counts();
        e.counter(
            "ferrite_batch_cache_hits_total",
            "Reads served from the shard's cache of recent batches (direct I/O).",
            s,
            hits,
        );
        e.counter(
            "ferrite_batch_cache_misses_total",
            "Reads the batch cache could not serve (read from the disk).",
            s,
            misses,
        );
        e.gauge(
            "ferrite_batch_cache_used_bytes",
            "Bytes held in the batch cache.",
            s,
            cache.used_bytes() as f64,
        );
    }
    let (inline_writes, ring_writes) =
        with_shard_io(|io| (io.inline_writes.get(), io.ring_writes.get()));
    e.counter(
        "ferrite_shard_inline_writes_total",
        "Buffered writes the shard thread made itself (at most inline_write_bytes_max).",
        s,
        inline_writes,
    );
    e.counter(
        "ferrite_shard_ring_writes_total",
        "Writes handed to the shard's io_uring ring (buffered ones run on its worker threads).",
        s,
        ring_writes,
    );
    let syncs = with_shard_io(|io| io.syncs.snapshot());
    e.histogram(
        "ferrite_fsync_duration_seconds",
        "fdatasync and fsync calls of the shard and how long each took.",
        s,
        &syncs,
    );
}

fn partitions(e: &mut Exposition, shard: &Shard, id: &str) {
    let mut under_replicated = 0;
    let mut leaders = 0;
    let mut followers = 0;
    for p in shard.partitions() {
        let index = p.index().to_string();
        let l: &[(&str, &str)] = &[("shard", id), ("topic", p.topic()), ("partition", &index)];
        let log = p.log();
        let stats = log.stats();
        let role = p.role();
        let lagging = role.is_leader() && role.isr.len() < role.replicas.len();
        if role.is_leader() {
            leaders += 1;
        } else {
            followers += 1;
        }
        under_replicated += lagging as u64;
        let gauges: [(&'static str, &'static str, f64); 7] = [
            (
                "ferrite_partition_log_end_offset",
                "Offset the next record will get.",
                log.log_end_offset() as f64,
            ),
            (
                "ferrite_partition_high_watermark",
                "Offset below which records are committed and visible to consumers.",
                p.high_watermark() as f64,
            ),
            (
                "ferrite_partition_log_start_offset",
                "First offset still in the log (after retention).",
                log.log_start_offset() as f64,
            ),
            (
                "ferrite_partition_size_bytes",
                "Bytes of the partition's segments.",
                log.size_bytes() as f64,
            ),
            (
                "ferrite_partition_idempotent_producers",
                "Idempotent producers whose sequence state the partition keeps.",
                p.producer_count() as f64,
            ),
            (
                "ferrite_partition_in_sync_replicas",
                "Replicas in the ISR as this broker knows it.",
                role.isr.len() as f64,
            ),
            (
                "ferrite_partition_under_replicated",
                "1 when this broker leads the partition and a replica is out of the ISR.",
                lagging as u8 as f64,
            ),
        ];
        for (name, help, value) in gauges {
            e.gauge(name, help, l, value);
        }
        let counters: [(&'static str, &'static str, u64); 4] = [
            ("ferrite_partition_appended_bytes_total", "Batch bytes appended to the log (producers, leaders' replication, the broker's own records).", stats.appended_bytes.get()),
            ("ferrite_partition_appended_records_total", "Records appended to the log.", stats.appended_records.get()),
            ("ferrite_partition_appended_batches_total", "Record batches appended to the log.", stats.appended_batches.get()),
            ("ferrite_partition_fsyncs_total", "fdatasyncs of the partition's active segment.", stats.fdatasyncs.get()),
        ];
        for (name, help, value) in counters {
            e.counter(name, help, l, value);
        }
    }
    let s: &[(&str, &str)] = &[("shard", id)];
    e.gauge(
        "ferrite_under_replicated_partitions",
        "Partitions this shard leads with a replica out of the ISR.",
        s,
        under_replicated as f64,
    );
    for (role, n) in [("leader", leaders), ("follower", followers)] {
        e.gauge(
            "ferrite_partitions",
            "Partition replicas the shard holds, by role.",
            &[("shard", id), ("role", role)],
            n as f64,
        );
    }
}

fn groups(e: &mut Exposition, shard: &Shard, id: &str) {
    let mut by_state: BTreeMap<&'static str, u64> = BTreeMap::new();
    for listed in shard.service::<crate::groups::Coordinator>().list() {
        *by_state.entry(listed.state).or_default() += 1;
    }
    for state in [
        "Empty",
        "PreparingRebalance",
        "CompletingRebalance",
        "Stable",
    ] {
        e.gauge(
            "ferrite_consumer_groups",
            "Consumer groups this shard coordinates, by state.",
            &[("shard", id), ("state", state)],
            by_state.get(state).copied().unwrap_or(0) as f64,
        );
    }
}
