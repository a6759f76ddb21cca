//! Metrics for Prometheus: what each shard counts, gathered for a scrape.
//!
//! Every shard keeps its own counters in plain `Cell`s on its own thread; nothing on the
//! request path is atomic or shared. A scrape arrives at shard 0 (`server::metrics_endpoint`), which asks
//! every shard through the router for a snapshot of its series (`collect`), merges them by family and
//! answers in Prometheus' text format (`exposition`). Series carry a `shard` label, and
//! per-partition series also `topic` and `partition`.
//!
//! Lives on: the counters on their shard (`shard::counters`); the endpoint's task on shard 0.

pub mod collect;
pub mod exposition;
