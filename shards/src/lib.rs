//! Ferrite's shared-nothing data plane.
//!
//! Everything here runs on a shard: one pinned glommio executor per core that owns a subset of the
//! partitions. Nothing in this crate opens a socket; the broker (`src/`) puts it behind the Kafka
//! protocol. The parts, from the bottom up:
//!
//! - [`batch`]: the Kafka record batch v2 header — validation from the 61-byte header alone,
//!   offset stamping without re-hashing, and a builder for batches the broker writes itself.
//! - [`uring`]: a second io_uring ring per shard for what glommio does not expose (vectored writes
//!   from client buffers, splice, fdatasync on our own descriptors).
//! - [`log`]: the partition log — segments, sparse indexes, recovery, flush policy, retention, in
//!   `direct` (O_DIRECT through the shard's ring) and `buffered` (page cache) I/O modes.

pub mod batch;
pub mod config;
pub mod error;
pub mod log;
pub mod partition;
pub mod placement;
pub mod router;
pub mod stats;
pub mod sync;
pub mod types;
pub mod uring;

pub use config::{IoMode, LogConfig};
pub use error::{Error, Result};
pub use types::Offset;
