//! ferrite-bench as a library: the client, the partitioner and the open-loop schedule, shared
//! by the binary and its tests.

pub mod client;
pub mod consumer;
pub mod partitioner;
pub mod producer;
pub mod records;
pub mod schedule;
pub mod stats;
