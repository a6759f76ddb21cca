//! `ferrite-bench`: load for any Kafka-compatible broker, with latency histograms.

mod run;

use anyhow::{bail, Result};
use clap::{Args, Parser, Subcommand, ValueEnum};
use kafka_protocol::records::Compression;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Parser, Debug)]
#[command(
    name = "ferrite-bench",
    version,
    about = "Load generator for Kafka-compatible brokers"
)]
struct Cli {
    #[command(subcommand)]
    mode: Mode,
}

#[derive(Subcommand, Debug)]
enum Mode {
    /// Produce records and time their acknowledgements.
    Produce(Options),
    /// Consume a topic from the earliest offset (with --group: from the group's offsets).
    Consume(Options),
    /// Produce and consume together; time each record from send to receipt.
    E2e(Options),
}

#[derive(Copy, Clone, Debug, ValueEnum)]
enum Acks {
    #[value(name = "0")]
    None,
    #[value(name = "1")]
    Leader,
    #[value(name = "all")]
    All,
}

#[derive(Copy, Clone, Debug, ValueEnum)]
enum Codec {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

#[derive(Copy, Clone, Debug, ValueEnum)]
enum PartitionerArg {
    /// Keyless records one by one over the partitions.
    RoundRobin,
    /// Keyless records fill one partition's batch, then the next partition's (Kafka's Java
    /// client since 2.4, KIP-480 and KIP-794).
    Sticky,
    /// By the murmur2 hash of the key.
    Hash,
}

#[derive(Args, Debug, Clone)]
pub struct Options {
    /// Brokers to bootstrap from.
    #[arg(long, value_name = "HOST:PORT[,..]")]
    brokers: String,
    #[arg(long)]
    topic: String,
    /// Create the topic first (existing is fine).
    #[arg(long)]
    create: bool,
    /// Partitions of a created topic.
    #[arg(long, default_value_t = 1)]
    partitions: i32,
    /// Replication factor of a created topic.
    #[arg(long, default_value_t = 1)]
    replication_factor: i16,
    /// Messages to send (produce, e2e) or read (consume), all tasks together.
    #[arg(long, conflicts_with = "duration")]
    messages: Option<u64>,
    /// Run this long instead of a count.
    #[arg(long, value_name = "SECONDS")]
    duration: Option<f64>,
    /// Bytes of each record's value.
    #[arg(long, default_value_t = 1024)]
    size: usize,
    /// Bytes a partition's batch collects before it is sent.
    #[arg(long, default_value_t = 262_144)]
    batch_bytes: usize,
    /// The most batch bytes in one produce request (Kafka's `max.request.size` default).
    #[arg(long, default_value_t = 1_048_576)]
    max_request_bytes: usize,
    /// Bytes of records each producer holds until they are answered (Kafka's
    /// `buffer.memory`); it waits for answers beyond it.
    #[arg(long, default_value_t = ferrite_bench::buffer::DEFAULT_BUFFER_BYTES)]
    buffer_bytes: u64,
    /// Longest a record waits for its batch to fill.
    #[arg(long, default_value_t = 5)]
    linger_ms: u64,
    #[arg(long, value_enum, default_value = "1")]
    acks: Acks,
    #[arg(long, value_enum, default_value = "none")]
    compression: Codec,
    /// Distinct keys (none: keyless records).
    #[arg(long)]
    keys: Option<u64>,
    #[arg(long, value_enum, default_value = "round-robin")]
    partitioner: PartitionerArg,
    #[arg(long, default_value_t = 1)]
    producers: usize,
    #[arg(long, default_value_t = 1)]
    consumers: usize,
    /// Consumers join this consumer group, which assigns them the partitions; they start at
    /// its committed offsets (else earliest; latest in e2e) and commit where they stopped.
    #[arg(long, value_name = "GROUP")]
    group: Option<String>,
    /// Messages per second, all producers together, open loop.
    #[arg(long, value_name = "MSGS_PER_S")]
    rate: Option<f64>,
    /// Seconds at the start left out of the results.
    #[arg(long, value_name = "SECONDS", default_value_t = 0.0)]
    warmup: f64,
    /// Write the results (and the configuration) as JSON.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Consume: check every record's content and that none comes twice.
    #[arg(long)]
    verify: bool,
    /// Produce in transactions: producer i uses the transactional id PREFIX-i (acks=all is
    /// implied, as for a Kafka transactional producer).
    #[arg(long, value_name = "PREFIX")]
    transactional_id: Option<String>,
    /// Records per transaction, per producer.
    #[arg(long, value_name = "N", default_value_t = 1000)]
    transaction_records: u64,
}

impl Options {
    fn compression(&self) -> Compression {
        match self.compression {
            Codec::None => Compression::None,
            Codec::Gzip => Compression::Gzip,
            Codec::Snappy => Compression::Snappy,
            Codec::Lz4 => Compression::Lz4,
            Codec::Zstd => Compression::Zstd,
        }
    }

    fn acks(&self) -> i16 {
        match self.acks {
            Acks::None => 0,
            Acks::Leader => 1,
            Acks::All => -1,
        }
    }

    fn validate(&self) -> Result<()> {
        if self.producers == 0 || self.consumers == 0 {
            bail!("--producers and --consumers must be at least 1");
        }
        if self.size < 1 {
            bail!("--size must be at least 1");
        }
        if self.rate.is_some_and(|r| r <= 0.0) {
            bail!("--rate must be positive");
        }
        if self.duration.is_some_and(|d| d <= 0.0) {
            bail!("--duration must be positive");
        }
        if self.group.as_deref().is_some_and(str::is_empty) {
            bail!("--group must name a group");
        }
        if self.transactional_id.as_deref().is_some_and(str::is_empty) {
            bail!("--transactional-id must name a prefix");
        }
        if self.transaction_records == 0 {
            bail!("--transaction-records must be at least 1");
        }
        Ok(())
    }

    fn duration(&self) -> Option<Duration> {
        self.duration.map(Duration::from_secs_f64)
    }
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let (mode, opts) = match &cli.mode {
        Mode::Produce(o) => ("produce", o),
        Mode::Consume(o) => ("consume", o),
        Mode::E2e(o) => ("e2e", o),
    };
    let outcome = opts.validate().and_then(|()| run::run(mode, opts));
    match outcome {
        Ok(clean) if clean => std::process::ExitCode::SUCCESS,
        Ok(_) => std::process::ExitCode::from(1),
        Err(e) => {
            eprintln!("ferrite-bench: {e:#}");
            std::process::ExitCode::from(2)
        }
    }
}
