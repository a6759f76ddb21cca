//! The control thread: one ZooKeeper session at a time, registration, the controller election,
//! and a fresh view for the shards after every change.
//!
//! Per session: connect; create the persistent parents and the cluster id; register
//! `/brokers/ids/<id>` (waiting out the ephemeral of a previous incarnation whose session has
//! not expired yet); watch the whole tree with one persistent recursive watch and read it
//! whole once. Then, after each change (debounced) or request: try to become controller if
//! nobody is, read again what the watch reported (`changes.rs`), carry out the controller's
//! duties if we are, and publish the view if it changed.
//!
//! An expired session ends the loop: the broker publishes a fenced view (it leads nothing),
//! then starts a new session and registers again. A disconnection alone changes nothing.

use super::changes::{self, Changed};
use super::requests::{self, CreateOutcome, IsrChange, Request};
use super::view::{self, ZkTree};
use super::znodes::{self, BrokerRegistration, ControllerRegistration};
use super::{duties, zk, ZkHandle};
use crate::config::ZkConnect;
use crate::metadata::{cluster_id_string, random_id, ClusterMetadata};
use ferrite_shards::foreign;
use futures::channel::mpsc;
use futures::{FutureExt, StreamExt};
use smol::Timer;
use std::sync::Arc;
use std::time::{Duration, Instant};
use zookeeper_client::{
    AddWatchMode, Client, Error, EventType, PersistentWatcher, SessionState, StateWatcher,
    WatchedEvent,
};

/// How long the first registration and view may take before start-up fails.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// Changes arriving this close together are read as one.
const DEBOUNCE: Duration = Duration::from_millis(20);
/// The controller looks again this often even without a change (a missed event costs this).
const TICK: Duration = Duration::from_secs(1);
/// How long a created topic may wait for the controller to give its partitions leaders.
const LEADERS_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Clone, Debug)]
pub struct ClusterOptions {
    pub connect: ZkConnect,
    pub node_id: i32,
    /// Registered in `/brokers/ids/<id>`.
    pub listeners: crate::config::Listeners,
    pub session_timeout: Duration,
    pub shards: usize,
    /// `auto.leader.rebalance.enable` and `leader.imbalance.check.interval.seconds`.
    pub preferred_leader_check: Option<Duration>,
}

/// What a started control thread gives the broker.
pub struct Started {
    pub handle: ZkHandle,
    /// The view at registration: the shards start with it.
    pub first: Arc<ClusterMetadata>,
    /// Every later view, for shard 0 to install (a foreign channel: the control thread must
    /// not wake a shard's task itself, see `ferrite_shards::foreign`).
    pub views: foreign::Receiver<Arc<ClusterMetadata>>,
}

/// Starts the control thread and waits until this broker is registered and has a view.
pub fn start(options: ClusterOptions) -> anyhow::Result<Started> {
    let (requests_tx, requests_rx) = mpsc::unbounded();
    let (views_tx, views_rx) = foreign::channel()?;
    let (first_tx, first_rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("zookeeper".into())
        .spawn(move || {
            smol::block_on(ControlLoop::new(options, requests_rx, views_tx, first_tx).run())
        })?;
    let first = first_rx
        .recv_timeout(START_TIMEOUT)
        .map_err(|_| anyhow::anyhow!("no ZooKeeper session within {START_TIMEOUT:?}"))?;
    Ok(Started {
        handle: ZkHandle {
            requests: requests_tx,
        },
        first,
        views: views_rx,
    })
}

struct ControlLoop {
    options: ClusterOptions,
    requests: mpsc::UnboundedReceiver<Request>,
    views: foreign::Sender<Arc<ClusterMetadata>>,
    first: Option<std::sync::mpsc::Sender<Arc<ClusterMetadata>>>,
    /// What ZooKeeper holds, as last read.
    tree: ZkTree,
    last_view: Option<Arc<ClusterMetadata>>,
    last_preferred_check: Instant,
}

/// What woke the loop.
enum Wake {
    Changed(WatchedEvent),
    Request(Option<Request>),
    Session(SessionState),
    Tick,
}

impl ControlLoop {
    fn new(
        options: ClusterOptions,
        requests: mpsc::UnboundedReceiver<Request>,
        views: foreign::Sender<Arc<ClusterMetadata>>,
        first: std::sync::mpsc::Sender<Arc<ClusterMetadata>>,
    ) -> ControlLoop {
        ControlLoop {
            options,
            requests,
            views,
            first: Some(first),
            tree: ZkTree::default(),
            last_view: None,
            last_preferred_check: Instant::now(),
        }
    }

    async fn run(mut self) {
        loop {
            let session = match self.open_session().await {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!(zookeeper = %self.options.connect, error = %e, "ZooKeeper session failed; retrying");
                    Timer::after(Duration::from_secs(1)).await;
                    continue;
                }
            };
            match self.serve_session(session).await {
                SessionEnd::Expired => {
                    tracing::warn!(
                        node = self.options.node_id,
                        "ZooKeeper session expired: fenced until registered again"
                    );
                    self.publish(view::metadata_of(
                        &self.tree,
                        self.options.node_id,
                        self.options.shards,
                        true,
                    ));
                }
                SessionEnd::Stopped => return,
            }
        }
    }

    async fn open_session(&self) -> Result<Session, Error> {
        let o = &self.options;
        let client = Client::connector()
            .with_session_timeout(o.session_timeout)
            .with_connection_timeout(o.session_timeout)
            .connect(&o.connect.servers)
            .await?;
        let client = rooted(client, &o.connect).await?;
        for path in znodes::PARENTS {
            zk::create_if_missing(&client, path, b"").await?;
        }
        let id = znodes::encode(&znodes::ClusterId {
            version: "1".into(),
            id: cluster_id_string(&random_id()),
        });
        zk::create_if_missing(&client, znodes::CLUSTER_ID, &id).await?;
        self.register(&client).await?;
        let watcher = client.watch("/", AddWatchMode::PersistentRecursive).await?;
        let state = client.state_watcher();
        tracing::info!(node = o.node_id, zookeeper = %o.connect, session = ?client.session_id(), "registered in ZooKeeper");
        Ok(Session {
            client,
            watcher,
            state,
            controller_epoch: None,
            changed: Changed::everything(),
            expired: false,
            watch_lost: false,
        })
    }

    /// Creates `/brokers/ids/<id>`; a node left by this broker's previous process stays until
    /// that session expires, so it is waited out (bounded by twice the session timeout).
    async fn register(&self, client: &Client) -> Result<(), Error> {
        let o = &self.options;
        let path = znodes::broker_path(o.node_id);
        let data = znodes::encode(&BrokerRegistration::new(&o.listeners));
        let ephemeral = zk::ephemeral();
        let deadline = Instant::now() + o.session_timeout * 2;
        loop {
            match client.create(&path, &data, &ephemeral).await {
                Ok(_) => return Ok(()),
                Err(Error::NodeExists) if Instant::now() < deadline => {
                    tracing::info!(
                        node = o.node_id,
                        "waiting for the previous registration to expire"
                    );
                    Timer::after(Duration::from_millis(500)).await;
                }
                Err(e) => return Err(e),
            }
        }
    }

    async fn serve_session(&mut self, mut s: Session) -> SessionEnd {
        loop {
            match self.refresh(&mut s).await {
                // The session's end also reaches the watch, but behind every event queued
                // before it.
                Err(Error::SessionExpired | Error::ClientClosed) => return SessionEnd::Expired,
                Err(e) => {
                    tracing::warn!(error = %e, "reading ZooKeeper failed; keeping the last view")
                }
                Ok(()) => {}
            }
            if s.expired {
                return SessionEnd::Expired;
            }
            let wake = {
                let changed = async { Wake::Changed(s.watcher.changed().await) };
                let request = async { Wake::Request(self.requests.next().await) };
                let session = async { Wake::Session(s.state.changed().await) };
                let tick = async {
                    Timer::after(TICK).await;
                    Wake::Tick
                };
                smol::future::or(
                    changed,
                    smol::future::or(request, smol::future::or(session, tick)),
                )
                .await
            };
            match wake {
                // The watcher's last event reports the end of the session; it must not be
                // polled after that.
                Wake::Changed(event) if event.session_state.is_terminated() => {
                    return SessionEnd::Expired
                }
                Wake::Changed(event) => {
                    // Let a burst of changes settle, then take them all, to read once for
                    // all of them.
                    s.note(&event);
                    Timer::after(DEBOUNCE).await;
                    s.take_events();
                }
                Wake::Request(None) => return SessionEnd::Stopped,
                Wake::Request(Some(r)) => {
                    // Every request already queued is served before the next read of the tree.
                    let mut queued = vec![r];
                    while let Ok(r) = self.requests.try_recv() {
                        queued.push(r);
                    }
                    self.handle_all(&mut s, queued).await;
                }
                Wake::Session(state) if state.is_terminated() => return SessionEnd::Expired,
                Wake::Session(SessionState::Disconnected) => {
                    tracing::warn!("ZooKeeper unreachable: serving with the last view, no changes");
                    // Wait for the session to come back or end; nothing is read meanwhile.
                    loop {
                        match s.state.changed().await {
                            state if state.is_terminated() => return SessionEnd::Expired,
                            SessionState::SyncConnected => {
                                s.reconnected();
                                break;
                            }
                            _ => {}
                        }
                    }
                }
                Wake::Session(_) | Wake::Tick => {}
            }
        }
    }

    /// Elects, reads what changed, does the controller's duties and publishes the view.
    async fn refresh(&mut self, s: &mut Session) -> Result<(), Error> {
        let node = self.options.node_id;
        s.controller_epoch = elect(&s.client, node, s.controller_epoch).await?;
        self.read_changes(s).await?;
        if let Some(epoch) = s.controller_epoch {
            let restore = self
                .options
                .preferred_leader_check
                .is_some_and(|every| self.last_preferred_check.elapsed() >= every);
            if restore {
                self.last_preferred_check = Instant::now();
            }
            let changes = duties::run(&s.client, &self.tree, epoch, restore).await?;
            if changes.states_written + changes.topics_deleted > 0 {
                // ZooKeeper delivers a watched znode's event before the answer to the write
                // that changed it, so the events of these writes are already queued.
                self.read_changes(s).await?;
            }
        }
        let metadata = view::metadata_of(&self.tree, node, self.options.shards, false);
        self.publish(metadata);
        Ok(())
    }

    /// Reads again what the events queued so far name; after a failed read, the next is
    /// whole.
    async fn read_changes(&mut self, s: &mut Session) -> Result<(), Error> {
        s.take_events();
        if s.watch_lost {
            s.watch_again().await?;
        }
        let changed = std::mem::replace(&mut s.changed, Changed::nothing());
        if changed.is_nothing() {
            return Ok(());
        }
        tracing::debug!(?changed, "reading what ZooKeeper reported as changed");
        let result = changes::read_changed(&s.client, &mut self.tree, changed).await;
        if result.is_err() {
            s.changed = Changed::everything();
        }
        result
    }

    fn publish(&mut self, metadata: ClusterMetadata) {
        if self.last_view.as_deref() == Some(&metadata) {
            return;
        }
        let metadata = Arc::new(metadata);
        self.last_view = Some(metadata.clone());
        match self.first.take() {
            Some(first) => {
                let _ = first.send(metadata);
            }
            None => {
                let _ = self.views.send(metadata);
            }
        }
    }

    /// Serves queued requests: ISR changes all at once (each is one partition's conditional
    /// write, independent of the others, and leaders send them by the thousand when a broker
    /// stops or returns), the others one by one in the order they came.
    async fn handle_all(&mut self, s: &mut Session, queued: Vec<Request>) {
        let mut isr_changes = Vec::new();
        for r in queued {
            match r {
                Request::UpdateIsr(change) => isr_changes.push(change),
                other => self.handle(s, other).await,
            }
        }
        let node = self.options.node_id;
        let client = &s.client;
        futures::stream::iter(isr_changes)
            .for_each_concurrent(zk::PARTITION_OPS_IN_FLIGHT, |r| {
                serve_isr_change(client, node, r)
            })
            .await;
    }

    async fn handle(&mut self, s: &mut Session, request: Request) {
        match request {
            Request::CreateTopics { topics, reply } => {
                let mut results = Vec::with_capacity(topics.len());
                for t in &topics {
                    results.push((t.name.clone(), requests::create_topic(&s.client, t).await));
                }
                // Answer once the controller (this broker or another) has given the new
                // partitions their first state, and the view holding them is published.
                let deadline = Instant::now() + LEADERS_TIMEOUT;
                loop {
                    let _ = self.refresh(s).await;
                    let ready =
                        results.iter().all(|(name, r)| {
                            *r != CreateOutcome::Created
                                || self.tree.topics.get(name).is_some_and(|t| {
                                    t.partitions.values().all(|p| p.state.is_some())
                                })
                        });
                    if ready || Instant::now() >= deadline {
                        break;
                    }
                    Timer::after(Duration::from_millis(20)).await;
                }
                reply.send(results);
            }
            Request::DeleteTopics { names, reply } => {
                let mut results = Vec::with_capacity(names.len());
                for name in names {
                    let r = requests::mark_for_deletion(&s.client, &name).await;
                    results.push((name, r));
                }
                reply.send(results);
            }
            Request::AddPartitions {
                topic,
                existing,
                replicas,
                reply,
            } => {
                // The watch brings the change back as a new view; no re-read here, so a burst
                // of requests does not read the whole tree once each.
                let r = requests::add_partitions(&s.client, &topic, existing, replicas).await;
                reply.send(r);
            }
            Request::ElectLeaders {
                partitions,
                unclean,
                reply,
            } => {
                let r = requests::ask_elections(&s.client, partitions, unclean).await;
                reply.send(r);
            }
            Request::AlterTopicConfig {
                topic,
                configs,
                reply,
            } => {
                let r = requests::alter_topic_config(&s.client, &topic, configs).await;
                reply.send(r);
            }
            Request::WriteAcls {
                pattern,
                entries,
                reply,
            } => {
                let r = super::acls::write(&s.client, &pattern, &entries).await;
                reply.send(r);
            }
            Request::AlterScramUser {
                user,
                credentials,
                reply,
            } => {
                let r = requests::alter_scram_user(&s.client, &user, credentials).await;
                reply.send(r);
            }
            Request::AlterClientQuota {
                entity,
                quotas,
                reply,
            } => {
                let r = requests::alter_client_quota(&s.client, &entity, quotas).await;
                reply.send(r);
            }
            Request::Reassign {
                topic,
                partitions,
                reply,
            } => {
                let r = requests::reassign(&s.client, &topic, &partitions).await;
                reply.send(r);
            }
            Request::AlterBrokerConfig {
                broker,
                configs,
                reply,
            } => {
                let r = requests::alter_broker_config(&s.client, broker, configs).await;
                reply.send(r);
            }
            Request::UpdateIsr(change) => {
                serve_isr_change(&s.client, self.options.node_id, change).await
            }
            Request::ProducerIds { reply } => {
                reply.send(requests::take_producer_ids(&s.client, self.options.node_id).await);
            }
        }
    }
}

/// Makes and answers an ISR change of one of `node`'s leaders.
async fn serve_isr_change(client: &Client, node: i32, change: IsrChange) {
    let IsrChange {
        topic,
        partition,
        leader_epoch,
        isr,
        reply,
    } = change;
    let r = requests::update_isr(client, node, &topic, partition, leader_epoch, isr).await;
    reply.send(r);
}

struct Session {
    client: Client,
    watcher: PersistentWatcher,
    state: StateWatcher,
    /// Our epoch while we are the controller.
    controller_epoch: Option<i32>,
    /// What the watch reported and has not been read yet; whole at the session's start.
    changed: Changed,
    /// The watch reported the session's end; it must not be polled again.
    expired: bool,
    /// The connection was lost since the watch was added, so the server may no longer hold
    /// it: it is added again before the next read.
    watch_lost: bool,
}

impl Session {
    /// Notes every event the watch has queued.
    fn take_events(&mut self) {
        while !self.expired {
            let Some(event) = self.watcher.changed().now_or_never() else {
                return;
            };
            self.note(&event);
        }
    }

    fn note(&mut self, event: &WatchedEvent) {
        if event.session_state.is_terminated() {
            self.expired = true;
            return;
        }
        if event.event_type == EventType::Session
            && event.session_state == SessionState::Disconnected
        {
            self.reconnected();
        }
        self.changed.note(event);
    }

    /// The session is (or will be) back on a new connection: what changed meanwhile sent no
    /// events (ZOOKEEPER-4698), and the watch itself must be added again.
    fn reconnected(&mut self) {
        self.watch_lost = true;
        self.changed = Changed::everything();
    }

    /// Adds the persistent recursive watch on a new connection. zookeeper-client 0.11.2 sends
    /// only the one-shot watches again when it reconnects (`resend_watches` never reaches the
    /// persistent ones), so without this a broker whose connection dropped once would hear of
    /// no change after it. Adding it again is harmless where the client did restore it: the
    /// server keeps one watch per path and mode. The old watcher goes after the new one is in
    /// place, so dropping it asks the server to remove nothing.
    async fn watch_again(&mut self) -> Result<(), Error> {
        let watcher = self
            .client
            .watch("/", AddWatchMode::PersistentRecursive)
            .await?;
        self.watcher = watcher;
        self.watch_lost = false;
        self.changed = Changed::everything();
        Ok(())
    }
}

enum SessionEnd {
    Expired,
    /// The broker is stopping (every handle dropped).
    Stopped,
}

/// Becomes controller if `/controller` is free; returns our controller epoch while we hold it.
async fn elect(client: &Client, node: i32, held: Option<i32>) -> Result<Option<i32>, Error> {
    match client.get_data(znodes::CONTROLLER).await {
        Ok((bytes, _)) => {
            let holder = znodes::decode::<ControllerRegistration>(znodes::CONTROLLER, &bytes)
                .map(|c| c.brokerid)
                .ok();
            Ok(if holder == Some(node) { held } else { None })
        }
        Err(Error::NoNode) => {
            let data = znodes::encode(&ControllerRegistration::new(node));
            let ephemeral = zk::ephemeral();
            match client.create(znodes::CONTROLLER, &data, &ephemeral).await {
                Ok(_) => {
                    let epoch = bump_controller_epoch(client).await?;
                    tracing::info!(node, controller_epoch = epoch, "elected controller");
                    Ok(Some(epoch))
                }
                Err(Error::NodeExists) => Ok(None),
                Err(e) => Err(e),
            }
        }
        Err(e) => Err(e),
    }
}

async fn bump_controller_epoch(client: &Client) -> Result<i32, Error> {
    loop {
        match client.get_data(znodes::CONTROLLER_EPOCH).await {
            Ok((bytes, stat)) => {
                let epoch: i32 = std::str::from_utf8(&bytes)
                    .ok()
                    .and_then(|t| t.trim().parse().ok())
                    .unwrap_or(0);
                let next = epoch + 1;
                match client
                    .set_data(
                        znodes::CONTROLLER_EPOCH,
                        next.to_string().as_bytes(),
                        Some(stat.version),
                    )
                    .await
                {
                    Ok(_) => return Ok(next),
                    Err(Error::BadVersion) => continue,
                    Err(e) => return Err(e),
                }
            }
            Err(Error::NoNode) => {
                match client
                    .create(znodes::CONTROLLER_EPOCH, b"1", &zk::persistent())
                    .await
                {
                    Ok(_) => return Ok(1),
                    Err(Error::NodeExists) => continue,
                    Err(e) => return Err(e),
                }
            }
            Err(e) => return Err(e),
        }
    }
}

/// The session's client under the chroot, which is created first when missing: Kafka makes
/// sure the chroot exists before it uses it (`KafkaServer.initZkClient`), so a new cluster
/// needs no manual step. Every path is created on the same session as the rooted client uses.
pub async fn rooted(client: Client, connect: &ZkConnect) -> Result<Client, Error> {
    let Some(chroot) = &connect.chroot else {
        return Ok(client);
    };
    for path in connect.chroot_ancestry() {
        if let Err(e) = zk::create_if_missing(&client, &path, b"").await {
            tracing::error!(chroot = %chroot, path = %path, error = %e, "creating the ZooKeeper chroot failed");
            return Err(e);
        }
    }
    client
        .chroot(chroot.as_str())
        .map_err(|_| Error::BadArguments(&"invalid chroot"))
}
