//! `ferrite`: the broker binary.

mod cli;
mod config;
mod controller;
mod groups;
mod handlers;
mod metadata;
mod protocol;
mod server;

use clap::Parser;
use cli::{Cli, Command};
use std::process::ExitCode;

fn init_logging(level: Option<&str>) {
    let filter = match level {
        Some(l) => tracing_subscriber::EnvFilter::new(l),
        None => tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_thread_names(true)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr)
        .init();
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(args) => {
            init_logging(args.log_level.as_deref());
            let config = match args.resolve() {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("ferrite: {e}");
                    return ExitCode::from(2);
                }
            };
            if config.zookeeper.is_some() {
                eprintln!("ferrite: --zookeeper (cluster mode) is not available yet; run without it for a single broker");
                return ExitCode::from(2);
            }
            match server::serve(config) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    tracing::error!(error = %format!("{e:#}"), "ferrite failed");
                    ExitCode::FAILURE
                }
            }
        }
    }
}
