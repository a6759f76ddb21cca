//! `ferrite`: the broker binary.

mod acls;
mod cli;
mod cluster;
mod config;
mod controller;
mod groups;
mod handlers;
mod metadata;
mod metrics;
mod protocol;
mod replication;
mod security;
mod server;
mod shard;
mod transactions;
mod tune;
mod users;

use clap::Parser;
use cli::{Cli, Command, TuneMode};
use security::listener::InterBrokerClient;
use std::io::Write;
use std::process::ExitCode;

/// One line per event on stderr, with the spans it happened in: `shard`, then `conn` (the
/// client's address), then `request` (API, version, correlation id, client id).
fn init_logging(level: Option<&str>, format: &str) {
    let filter = match level {
        Some(l) => tracing_subscriber::EnvFilter::new(l),
        None => tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_thread_names(true)
        .with_writer(std::io::stderr);
    if format == "json" {
        builder
            .json()
            .with_current_span(false)
            .with_span_list(true)
            .init();
    } else {
        builder
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .init();
    }
}

/// A panic anywhere ends the process: a broker with one dead shard would keep its port open
/// and answer nothing for that shard's partitions, and a supervisor restarts only a process
/// that exits. The panic's message and place go to the log first; recovering what the shard
/// had in flight is the log's job on the next start.
fn abort_on_panic() {
    std::panic::set_hook(Box::new(|info| {
        let message = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "(no message)".to_string());
        let location = info
            .location()
            .map(|l| format!("{}:{}:{}", l.file(), l.line(), l.column()))
            .unwrap_or_default();
        let thread = std::thread::current();
        let thread = thread.name().unwrap_or("unnamed");
        tracing::error!(%message, %location, thread, "panic: aborting the process");
        // Not eprintln!, which panics when stderr cannot be written (a full disk under the log).
        let _ = writeln!(
            std::io::stderr(),
            "ferrite: thread '{thread}' panicked at {location}: {message}; aborting"
        );
        std::process::abort();
    }));
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Tune(args) => {
            let (cores, dir) = args.resolve();
            let root = match args.root() {
                Ok(r) => tune::Root::new(r),
                Err(e) => {
                    eprintln!("ferrite: {e}");
                    return ExitCode::from(2);
                }
            };
            let done = match args.mode() {
                TuneMode::Check => tune::check(&root, &cores, &dir),
                TuneMode::Apply { backup_dir } => tune::apply(&root, &cores, &dir, &backup_dir),
            };
            if done {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Command::User(args) => match users::run(&args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("ferrite: {e}");
                ExitCode::from(2)
            }
        },
        Command::Acl(args) => match acls::run(&args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("ferrite: {e}");
                ExitCode::from(2)
            }
        },
        Command::Serve(args) => {
            init_logging(args.log_level.as_deref(), &args.log_format);
            abort_on_panic();
            let config = match args.resolve() {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("ferrite: {e}");
                    return ExitCode::from(2);
                }
            };
            // Before anything is opened, created or registered: a second broker on this data
            // directory or address exits here, having changed nothing.
            // Key stores, trust stores and mechanisms are read now: a listener that cannot
            // start stops the broker before it claims or changes anything.
            let listeners =
                match security::listener::build_all(&config.listeners, &config.broker.security) {
                    Ok(l) => l,
                    Err(e) => {
                        eprintln!("ferrite: {e}");
                        return ExitCode::from(2);
                    }
                };
            if config.zookeeper.is_some() {
                let inter_broker = config.listeners.inter_broker();
                if let Err(e) = InterBrokerClient::build(inter_broker, &config.broker.security) {
                    eprintln!("ferrite: {e}");
                    return ExitCode::from(2);
                }
            }
            let binds: Vec<_> = config.listeners.list.iter().map(|l| l.bind).collect();
            let claims = match server::claims::take(&config.data_dir, &binds, config.metrics) {
                Ok(c) => c,
                Err(e) => {
                    tracing::error!(error = %e, "refusing to start");
                    eprintln!("ferrite: {e}");
                    return ExitCode::from(2);
                }
            };
            if let Some(cpu) = config.control_core {
                match config::pin_current_thread(cpu) {
                    Ok(()) => tracing::info!(cpu, "control thread pinned"),
                    Err(e) => tracing::warn!(cpu, error = %e, "pinning the control thread failed"),
                }
            }
            let cluster = match &config.zookeeper {
                None => None,
                Some(connect) => {
                    let options = cluster::ClusterOptions {
                        connect: connect.clone(),
                        node_id: config.node_id,
                        listeners: config.listeners.clone(),
                        session_timeout: std::time::Duration::from_millis(
                            config.broker.zookeeper_session_timeout_ms,
                        ),
                        shards: config.cores.len(),
                        preferred_leader_check: config.broker.auto_leader_rebalance.then(|| {
                            std::time::Duration::from_secs(
                                config.broker.leader_imbalance_check_interval_seconds,
                            )
                        }),
                    };
                    match cluster::start(options) {
                        Ok(started) => Some(started),
                        Err(e) => {
                            tracing::error!(error = %format!("{e:#}"), "joining the cluster failed");
                            return ExitCode::FAILURE;
                        }
                    }
                }
            };
            match server::serve(config, listeners, cluster, claims) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    tracing::error!(error = %format!("{e:#}"), "ferrite failed");
                    ExitCode::FAILURE
                }
            }
        }
    }
}
