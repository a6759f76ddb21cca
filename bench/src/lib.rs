//! ferrite-bench as a library: the client, the partitioner, the open-loop schedule and group
//! membership, shared by the binary and its tests.

pub mod assignor;
pub mod buffer;
pub mod client;
pub mod consumer;
mod group;
pub mod partitioner;
pub mod pipe;
pub mod producer;
pub mod records;
pub mod schedule;
pub mod sender;
pub mod stats;
pub mod transactions;
