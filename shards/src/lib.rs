//! Ferrite's shared-nothing data plane.
//!
//! Everything here runs on a shard: one pinned glommio executor per core that owns a subset of the
//! partitions. Nothing in this crate opens a socket; the broker (`src/`) puts it behind the Kafka
//! protocol. The parts, from the bottom up:
//!
//! - [`types`], [`error`], [`config`]: the clock, the crate's error, per-topic log settings.
//! - [`batch`]: the Kafka record batch v2 — header validation and CRC, the walk over every
//!   record a producer sends (decompressing as a stream), offset stamping without re-hashing,
//!   the old magic 0/1 formats converted both ways, and a builder for the broker's own batches.
//! - [`uring`]: a second io_uring ring per shard for what glommio does not expose (vectored writes
//!   from client buffers, splice, fdatasync on our own descriptors, O_DIRECT writes).
//! - [`log`]: the partition log — admission of a producer's batches, segments, sparse indexes,
//!   recovery, flush policy, retention, compaction, in `direct` (O_DIRECT through the shard's
//!   ring) and `buffered` (page cache) I/O modes.
//! - [`partition`]: a replica as its shard holds it — the log, the high watermark, the leader
//!   epoch, replication state and idempotent producers.
//! - [`placement`], [`router`], [`sync`], [`stats`]: which shard owns a partition, calls between
//!   shards, single-threaded synchronisation, latency histograms.
//! - [`repeated`]: failures that repeat (a full disk), logged once and then counted.
//! - [`testing`]: running async code on a fresh executor, for tests and benchmarks.

pub mod batch;
pub mod config;
pub mod error;
pub mod foreign;
pub mod log;
pub mod partition;
pub mod placement;
pub mod repeated;
pub mod router;
pub mod stats;
pub mod sync;
pub mod testing;
pub mod types;
pub mod uring;

pub use config::{IoMode, LogConfig};
pub use error::{Error, Result};
