//! Starting and stopping the broker: one pinned glommio executor per configured core.
//!
//! The main thread loads the metadata, builds the router's channel matrix, starts the shards
//! and waits for SIGTERM or SIGINT (blocked in every thread, taken by `sigwait` here). Each
//! shard opens the partitions placed on it, binds the listener with SO_REUSEPORT, accepts the
//! connections the kernel gives it, and runs its periodic flush and retention. On a signal,
//! shards stop accepting, let connections finish what they have in flight, flush and close
//! their logs, and the process exits 0.

pub mod claims;
pub mod connection;
pub mod frame;
mod handoff;
mod metrics_endpoint;
pub mod send;
mod stream;

use crate::cluster;
use crate::config::BrokerConfig;
use crate::controller::Controller;
use crate::groups::Coordinator;
use crate::metadata::{store, BrokerInfo, ClusterMetadata};
use crate::security::listener::ListenerSecurity;
use crate::shard::capacity::{self, Capacity, ConnectionSlot};
use crate::shard::client_quotas::ClientQuotaSensors;
use crate::shard::Shard;
use ferrite_shards::foreign;
use ferrite_shards::placement::ShardId;
use ferrite_shards::router::{self, Endpoints};
use glommio::net::TcpListener;
use glommio::{LocalExecutorBuilder, Placement};
use std::os::fd::{FromRawFd, IntoRawFd};
use std::rc::Rc;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a started shard waits for the others to open their partitions before it serves
/// anyway (a shard that failed to start stops the process long before).
const START_BARRIER_TIMEOUT: Duration = Duration::from_secs(600);
/// How long a stopping shard waits for its connections to finish in-flight requests.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);
/// How long start-up may take before the broker gives up (opening many partitions).
const STARTUP_TIMEOUT: Duration = Duration::from_secs(300);
/// The depth of each glommio ring of a shard (glommio's default is 128). Every idle connection
/// keeps a poll in the shard's main ring, and every cancel there first searches the ring's polls
/// for it, in a table of 2^(log2(completion entries) - 5) chains, at most 256: at 128 entries, 8
/// chains of over 1,200 polls each with 10,000 connections. Unpatched, glommio cancelled its
/// throughput timer there on every reactor turn; measured with `perf/connections.sh` at 10,000
/// connections, that search was 20% of the broker's CPU at depth 128 and 3% at this depth, and
/// the vendored glommio no longer cancels it (`vendor/glommio/PATCHED.md`). glommio also asks a
/// running task queue to yield after this many I/O completions (besides its time slice): the
/// log cleaner's low-share queue may now run longer between yields while I/O is busy, never
/// past its time slice.
const EXECUTOR_RING_DEPTH: usize = 4096;

/// Runs the broker until SIGTERM or SIGINT: the single-broker default, or a member of a
/// ZooKeeper cluster when `cluster` is given (its control thread already registered). `claims`
/// (the data directory, the addresses) are held until it returns.
pub fn serve(
    config: BrokerConfig,
    listeners: Vec<Arc<ListenerSecurity>>,
    cluster: Option<cluster::Started>,
    mut claims: claims::Claims,
) -> anyhow::Result<()> {
    block_termination_signals();
    let shard_count = config.cores.len();
    let (metadata, producer_ids_reserved_below, zk, mut views) = match cluster {
        Some(started) => (started.first, 0, Some(started.handle), Some(started.views)),
        None => {
            let node = BrokerInfo {
                node_id: config.node_id,
                endpoints: BrokerInfo::endpoints_of(&config.listeners),
                rack: None,
            };
            let loaded = store::load(&config.data_dir, &node, shard_count)?;
            if loaded.moved_partitions > 0 {
                tracing::info!(
                    moved = loaded.moved_partitions,
                    shards = shard_count,
                    "placed partitions of missing shards on the remaining ones"
                );
            }
            let reserved = loaded.producer_ids_reserved_below;
            (Arc::new(loaded.metadata), reserved, None, None)
        }
    };
    let descriptor_limit = capacity::raise_descriptor_limit();
    config
        .broker
        .connections_per_ip
        .check()
        .map_err(anyhow::Error::msg)?;
    let direct = (0..shard_count).any(|s| config.io_mode(s) == ferrite_shards::IoMode::Direct);
    let capacity = Arc::new(
        Capacity::new(
            descriptor_limit,
            shard_count,
            direct,
            config.broker.partitions_per_shard,
            config.broker.max_connections,
        )
        .with_connections_per_ip(config.broker.connections_per_ip.clone())
        .with_listener_limits(listener_limits(&config)?),
    );
    capacity
        .check_descriptor_limit()
        .map_err(anyhow::Error::msg)?;
    tracing::info!(
        descriptor_limit,
        segment_files_per_shard = capacity.segment_files_per_shard,
        max_connections = capacity.max_connections(),
        splice_pipes_per_shard = crate::shard::capacity::SPLICE_PIPES_PER_SHARD,
        "open file limit (ulimit -n) shared out"
    );
    if capacity.max_connections() < config.broker.max_connections {
        tracing::info!(
            max_connections = capacity.max_connections(),
            descriptor_limit,
            "connections are bounded by the file descriptor limit"
        );
    }
    let client_quotas = Arc::new(ClientQuotaSensors::default());
    let config = Arc::new(config);
    let listeners = Arc::new(listeners);
    let started = Instant::now();
    let endpoints = router::mesh::<Shard>(shard_count, config.router_queue_depth);
    let (ready_tx, ready_rx) = mpsc::channel::<Result<(), String>>();
    let stopping = Arc::new(StopBarrier::new(shard_count));
    let mut stops = Vec::with_capacity(shard_count);
    let mut threads = Vec::with_capacity(shard_count);
    for (i, ep) in endpoints.into_iter().enumerate() {
        // A foreign channel, not a oneshot: this thread must not wake a shard's task itself
        // (see `ferrite_shards::foreign`).
        let (stop_tx, stop_rx) = foreign::channel::<()>()?;
        stops.push(stop_tx);
        let cpu = config.cores[i];
        let config = config.clone();
        let metadata = metadata.clone();
        let capacity = capacity.clone();
        let client_quotas = client_quotas.clone();
        let listeners = listeners.clone();
        let ready = ready_tx.clone();
        let stopping = stopping.clone();
        // Shard 0 serves the metrics endpoint on the listener claimed for it.
        let metrics_listener = if i == 0 { claims.metrics.take() } else { None };
        let cluster = ShardCluster {
            zk: zk.clone(),
            // Shard 0 installs the control thread's views on every shard.
            views: if i == 0 { views.take() } else { None },
        };
        let handle = LocalExecutorBuilder::new(Placement::Fixed(cpu))
            .name(&format!("shard-{i}"))
            .ring_depth(EXECUTOR_RING_DEPTH)
            .spawn(move || async move {
                // Every event on this thread belongs to this shard.
                let _shard_span = tracing::info_span!("shard", id = i).entered();
                let start = ShardStart {
                    endpoints: ep,
                    config,
                    metadata,
                    producer_ids_reserved_below,
                    cluster,
                    capacity,
                    client_quotas,
                    metrics_listener,
                    listeners,
                };
                run_shard(start, ready, stop_rx, stopping).await;
            })
            .map_err(|e| anyhow::anyhow!("starting shard {i} on CPU {cpu}: {e}"))?;
        threads.push(handle);
    }
    drop(ready_tx);
    let mut failure = None;
    for _ in 0..shard_count {
        match ready_rx.recv_timeout(STARTUP_TIMEOUT) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                failure.get_or_insert(e);
            }
            Err(_) => {
                failure.get_or_insert("a shard did not start in time".to_string());
            }
        }
    }
    if failure.is_none() {
        let topics = metadata.topics.len();
        let listening: Vec<String> = config
            .listeners
            .list
            .iter()
            .map(|l| format!("{}://{} ({})", l.name, l.bind, l.protocol.name()))
            .collect();
        let advertised: Vec<String> = config
            .listeners
            .advertised()
            .map(|(name, host, port)| format!("{name}://{host}:{port}"))
            .collect();
        tracing::info!(
            listen = %listening.join(","),
            advertised = %advertised.join(","),
            shards = shard_count,
            cores = ?config.cores,
            topics,
            data_dir = %config.data_dir.display(),
            startup_ms = started.elapsed().as_millis() as u64,
            "ferrite is serving"
        );
        let signal = wait_for_termination_signal();
        tracing::info!(signal, "shutting down");
    }
    for stop in stops {
        let _ = stop.send(());
    }
    for t in threads {
        if let Err(e) = t.join() {
            tracing::error!(error = %e, "a shard failed while stopping");
        }
    }
    match failure {
        Some(e) => Err(anyhow::anyhow!("start-up failed: {e}")),
        None => {
            tracing::info!("stopped");
            Ok(())
        }
    }
}

/// What a shard is started with.
struct ShardStart {
    endpoints: Endpoints<Shard>,
    config: Arc<BrokerConfig>,
    metadata: Arc<ClusterMetadata>,
    producer_ids_reserved_below: i64,
    cluster: ShardCluster,
    capacity: Arc<Capacity>,
    client_quotas: Arc<ClientQuotaSensors>,
    metrics_listener: Option<std::net::TcpListener>,
    listeners: Arc<Vec<Arc<ListenerSecurity>>>,
}

/// A shard's part in ZooKeeper mode.
struct ShardCluster {
    zk: Option<cluster::ZkHandle>,
    views: Option<foreign::Receiver<Arc<ClusterMetadata>>>,
}

async fn run_shard(
    start: ShardStart,
    ready: mpsc::Sender<Result<(), String>>,
    stop: foreign::Receiver<()>,
    stopping: Arc<StopBarrier>,
) {
    let ShardStart {
        endpoints,
        config,
        metadata,
        producer_ids_reserved_below,
        cluster,
        capacity,
        client_quotas,
        metrics_listener,
        listeners,
    } = start;
    let id = endpoints.shard();
    let (stop, views) = match listen_to_main_and_control_threads(stop, cluster.views) {
        Ok(listeners) => listeners,
        Err(e) => {
            let _ = ready.send(Err(format!("shard {id}: {e}")));
            return;
        }
    };
    ferrite_shards::uring::set_ring_entries(config.shard(id.0).uring_entries);
    ferrite_shards::uring::set_inline_write_max(config.shard(id.0).inline_write_bytes_max);
    ferrite_shards::log::set_open_segment_files_max(capacity.segment_files_per_shard as usize);
    let shard = Rc::new(Shard::new(
        id,
        config.clone(),
        metadata,
        cluster.zk,
        capacity,
        client_quotas,
    ));
    install_services(&shard, producer_ids_reserved_below);
    let router = endpoints.connect(shard.clone()).await;
    shard.set_router(router);
    if let Err(e) = shard.reconcile().await {
        let _ = ready.send(Err(format!("shard {id}: opening partitions: {e}")));
        return;
    }
    // Other shards' calls wait until this shard holds its partitions, and no shard accepts a
    // client before every shard does: a request routed anywhere finds its partition open.
    shard.router().open_inbox();
    if let Some(listener) = metrics_listener {
        // SAFETY: the descriptor is a bound, listening, non-blocking socket we own.
        let listener = unsafe { TcpListener::from_raw_fd(listener.into_raw_fd()) };
        let bound = listener
            .local_addr()
            .map(|a| a.to_string())
            .unwrap_or_default();
        tracing::info!(addr = %bound, "metrics endpoint listening");
        glommio::spawn_local(metrics_endpoint::serve(shard.clone(), listener)).detach();
    }
    // Everything a client may reach (the metrics endpoint included) is up before any shard
    // listens: the Kafka port accepting is the sign the broker is ready.
    stopping
        .arrive_and_wait(&stopping.started, Instant::now() + START_BARRIER_TIMEOUT)
        .await;
    let mut bound = Vec::with_capacity(listeners.len());
    for security in listeners.iter() {
        match claims::shard_listener(security.bind) {
            // SAFETY: the descriptor is a bound, listening socket we own.
            Ok(l) => bound.push((
                unsafe { TcpListener::from_raw_fd(l.into_raw_fd()) },
                security,
            )),
            Err(e) => {
                let _ = ready.send(Err(format!(
                    "shard {id}: listener {} on {}: {e}",
                    security.name, security.bind
                )));
                shard.close_partitions().await;
                return;
            }
        }
    }
    for (listener, security) in bound {
        glommio::spawn_local(accept_loop(shard.clone(), listener, security.clone())).detach();
    }
    crate::shard::maintenance::start(&shard);
    crate::replication::start(&shard);
    if let Some(views) = views {
        glommio::spawn_local(install_views(shard.clone(), views)).detach();
    }
    shard.service::<Coordinator>().start();
    let _ = ready.send(Ok(()));
    #[cfg(debug_assertions)]
    panic_when_asked(id);
    let _ = stop.recv().await;
    shard.begin_shutdown();
    let deadline = Instant::now() + DRAIN_TIMEOUT;
    while shard.stats.connections_open.get() > 0 && Instant::now() < deadline {
        glommio::timer::sleep(Duration::from_millis(10)).await;
    }
    // Requests still in flight on other shards may need this shard's partitions: every shard
    // finishes its connections before any closes its logs, and none exits before all closed.
    stopping.arrive_and_wait(&stopping.drained, deadline).await;
    shard.close_partitions().await;
    stopping
        .arrive_and_wait(&stopping.closed, Instant::now() + DRAIN_TIMEOUT)
        .await;
    tracing::debug!(shard = %id, "shard stopped");
}

/// Test builds only: `FERRITE_TEST_PANIC_SHARD=<id>` makes that shard panic once it serves,
/// so a test can see that a panic on one shard ends the whole process.
#[cfg(debug_assertions)]
fn panic_when_asked(id: ShardId) {
    if std::env::var("FERRITE_TEST_PANIC_SHARD").ok() == Some(id.0.to_string()) {
        glommio::spawn_local(async move {
            glommio::timer::sleep(Duration::from_millis(200)).await;
            panic!("FERRITE_TEST_PANIC_SHARD asked shard {id} to panic");
        })
        .detach();
    }
}

/// Shards meeting when all are started, and at the two steps of a graceful stop.
struct StopBarrier {
    shards: usize,
    started: std::sync::atomic::AtomicUsize,
    drained: std::sync::atomic::AtomicUsize,
    closed: std::sync::atomic::AtomicUsize,
}

impl StopBarrier {
    fn new(shards: usize) -> StopBarrier {
        StopBarrier {
            shards,
            started: Default::default(),
            drained: Default::default(),
            closed: Default::default(),
        }
    }

    /// Counts this shard in `step` and waits (without blocking the executor) for the others,
    /// until `deadline`.
    async fn arrive_and_wait(&self, step: &std::sync::atomic::AtomicUsize, deadline: Instant) {
        use std::sync::atomic::Ordering;
        step.fetch_add(1, Ordering::AcqRel);
        while step.load(Ordering::Acquire) < self.shards && Instant::now() < deadline {
            glommio::timer::sleep(Duration::from_millis(5)).await;
        }
    }
}

/// The services each shard carries: a group coordinator and a transaction coordinator
/// everywhere (told of the shard's `__consumer_offsets` and `__transaction_state` partitions as
/// they open), the controller on shard 0.
fn install_services(shard: &Rc<Shard>, producer_ids_reserved_below: i64) {
    let host: std::rc::Weak<Shard> = Rc::downgrade(shard);
    let groups = Rc::new(Coordinator::new(
        crate::groups::config_of(&shard.config),
        host,
    ));
    shard.services.observe(groups.clone());
    shard.services.insert(groups);
    let host: std::rc::Weak<Shard> = Rc::downgrade(shard);
    let transactions = crate::transactions::TxnCoordinator::new(
        crate::transactions::config_of(&shard.config),
        host,
    );
    transactions.start_timers();
    shard.services.observe(transactions.clone());
    shard.services.insert(transactions);
    if shard.id == ShardId(0) {
        shard.services.insert(Rc::new(Controller::new(
            producer_ids_reserved_below,
            shard.config.broker.controller_mutation_rate,
        )));
    }
}

/// The next connection on `listener`; `None` once the broker starts shutting down. A failed
/// accept is logged (as `what`) and retried after a short pause.
pub(crate) async fn accept_until_shutdown(
    shard: &Shard,
    listener: &TcpListener,
    what: &str,
) -> Option<glommio::net::TcpStream> {
    loop {
        let seen = shard.shutdown_started.generation();
        if shard.is_shutting_down() {
            return None;
        }
        let accept = listener.accept();
        let stop = shard.shutdown_started.wait_past(seen);
        futures::pin_mut!(accept, stop);
        match futures::future::select(accept, stop).await {
            futures::future::Either::Left((Ok(s), _)) => return Some(s),
            futures::future::Either::Left((Err(e), _)) => {
                tracing::warn!(error = %e, "{what}: accept failed");
                glommio::timer::sleep(Duration::from_millis(10)).await;
            }
            futures::future::Either::Right(_) => return None,
        }
    }
}

/// `listener.name.<l>.max.connections` of every listener that sets it.
fn listener_limits(config: &BrokerConfig) -> anyhow::Result<Vec<(String, usize)>> {
    let mut limits = Vec::new();
    for listener in &config.listeners.list {
        let max = config
            .broker
            .security
            .listener_max_connections(&listener.name)
            .map_err(anyhow::Error::msg)?;
        limits.extend(max.map(|max| (listener.name.clone(), max)));
    }
    Ok(limits)
}

/// Kafka's `max.connections`, broker-wide and per listener (KIP-402): at a bound the acceptor
/// waits for a connection to close (`ConnectionQuotas.inc` blocks the same way), so new
/// clients wait, unanswered, rather than being dropped; a listener at its own bound waits
/// while the others accept. Each shard accepts first and then waits holding that one
/// connection: a place reserved before accepting would sit idle on a shard the kernel sends no
/// client to while another shard's clients wait. So at most one connection per shard and
/// listener is held past a bound.
async fn connection_slot(shard: &Shard, listener: &str) -> Option<ConnectionSlot> {
    let bound = shard.capacity.listener(listener);
    let mut waiting_since = None;
    loop {
        // The listener's place first, then the broker's; neither is kept without the other.
        let claim = bound.map(|b| b.claim());
        let listener_full = matches!(claim, Some(None));
        let slot = match claim {
            Some(None) => None,
            Some(Some(claim)) => shard
                .capacity
                .open_connection()
                .map(|slot| slot.with_listener_claim(Some(claim))),
            None => shard.capacity.open_connection(),
        };
        if let Some(slot) = slot {
            if let Some(since) = waiting_since {
                let waited_ms = Instant::elapsed(&since).as_millis() as u64;
                tracing::info!(listener, waited_ms, "a connection closed: accepting again");
            }
            return Some(slot);
        }
        if shard.is_shutting_down() {
            return None;
        }
        if waiting_since.is_none() {
            waiting_since = Some(Instant::now());
            match bound.filter(|_| listener_full) {
                Some(b) => tracing::warn!(
                    listener,
                    max_connections = b.max,
                    "the listener's max.connections reached: its new connections wait until one closes"
                ),
                None => tracing::warn!(
                    max_connections = shard.capacity.max_connections(),
                    "max.connections reached: new connections wait until one closes"
                ),
            }
        }
        glommio::timer::sleep(Duration::from_millis(10)).await;
    }
}

async fn accept_loop(shard: Rc<Shard>, listener: TcpListener, security: Arc<ListenerSecurity>) {
    let what = format!("listener {}", security.name);
    while let Some(stream) = accept_until_shutdown(&shard, &listener, &what).await {
        let peer = stream.peer_addr().ok();
        // A peer whose address is unknown is not counted per address.
        let ip_claim = match peer.map(|p| p.ip()) {
            None => None,
            Some(ip) => match shard.capacity.per_ip.claim(ip) {
                Some(claim) => Some(claim),
                None => {
                    // Kafka logs each at INFO ("Rejected connection from ...").
                    let limit = shard.capacity.per_ip.limit_of(ip);
                    tracing::info!(%ip, limit, "max.connections.per.ip reached: connection closed");
                    let refused = &shard.stats.connections_refused_per_ip;
                    refused.set(refused.get() + 1);
                    continue;
                }
            },
        };
        let Some(slot) = connection_slot(&shard, &security.name).await else {
            return;
        };
        let slot = slot.with_ip_claim(ip_claim);
        let stats = &shard.stats;
        stats
            .connections_accepted
            .set(stats.connections_accepted.get() + 1);
        stats.connections_open.set(stats.connections_open.get() + 1);
        let shard = shard.clone();
        let span = connection_span(peer);
        let security = security.clone();
        glommio::spawn_local(tracing::Instrument::instrument(
            async move {
                let moving = connection::serve(shard.clone(), stream, peer, security).await;
                let open = &shard.stats.connections_open;
                open.set(open.get() - 1);
                handoff::finish(&shard, moving, slot).await;
            },
            span,
        ))
        .detach();
    }
}

/// The span every event of one client connection is logged in, on whichever shard serves it:
/// the peer's address, and the client id its first request names (`ConnectionState::
/// name_client`).
pub(crate) fn connection_span(peer: Option<std::net::SocketAddr>) -> tracing::Span {
    let client = tracing::field::Empty;
    match peer {
        Some(addr) => tracing::info_span!("conn", peer = %addr, client),
        None => tracing::info_span!("conn", peer = "?", client),
    }
}

/// The shard's ends of the main thread's stop signal and (shard 0 in ZooKeeper mode) the
/// control thread's views.
type ForeignListeners = (
    foreign::Listener<()>,
    Option<foreign::Listener<Arc<ClusterMetadata>>>,
);

fn listen_to_main_and_control_threads(
    stop: foreign::Receiver<()>,
    views: Option<foreign::Receiver<Arc<ClusterMetadata>>>,
) -> Result<ForeignListeners, String> {
    let stop = stop
        .listen()
        .map_err(|e| format!("listening for the stop signal: {e}"))?;
    let views = views
        .map(foreign::Receiver::listen)
        .transpose()
        .map_err(|e| format!("listening for cluster views: {e}"))?;
    Ok((stop, views))
}

/// Shard 0 in ZooKeeper mode: every view the control thread reads goes to every shard.
async fn install_views(shard: Rc<Shard>, views: foreign::Listener<Arc<ClusterMetadata>>) {
    while let Some(view) = views.recv().await {
        if shard.is_shutting_down() {
            return;
        }
        if let Err(e) = crate::controller::publish(&shard, view).await {
            tracing::error!(error = %e, "installing the cluster view failed");
        }
    }
}

fn termination_signals() -> libc::sigset_t {
    // SAFETY: sigemptyset/sigaddset fill the set we own.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
        set
    }
}

/// Blocks SIGTERM and SIGINT in this thread and every thread started after, so only
/// `sigwait` on the main thread receives them; a closed peer must not kill us with SIGPIPE.
fn block_termination_signals() {
    let set = termination_signals();
    // SAFETY: plain signal-mask and disposition calls.
    unsafe {
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
}

fn wait_for_termination_signal() -> &'static str {
    let set = termination_signals();
    let mut sig: libc::c_int = 0;
    // SAFETY: sigwait writes the received signal number.
    unsafe { libc::sigwait(&set, &mut sig) };
    match sig {
        libc::SIGTERM => "SIGTERM",
        libc::SIGINT => "SIGINT",
        _ => "signal",
    }
}
