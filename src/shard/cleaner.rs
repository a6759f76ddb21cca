//! The shard's log cleaner: compacts the shard's compacted partitions, dirtiest first.
//!
//! It runs in its own glommio task queue with a small share of the core, so request handling
//! on the shard goes first; its I/O is paced by `log.cleaner.io.max.bytes.per.second` and its
//! key map bounded by `log.cleaner.dedupe.buffer.size`. After a round with nothing due it
//! sleeps `log.cleaner.backoff.ms`.

use super::Shard;
use ferrite_shards::log::{CleanerBudget, IoThrottle};
use ferrite_shards::types::now_ms;
use glommio::{Latency, Shares};
use std::rc::Rc;
use std::time::Duration;

/// CPU shares of the cleaner's task queue; glommio's default queue has 1000.
const CLEANER_SHARES: usize = 100;

pub(super) fn start(shard: &Rc<Shard>) {
    let queue = glommio::executor().create_task_queue(
        Shares::Static(CLEANER_SHARES),
        Latency::NotImportant,
        "log-cleaner",
    );
    let shard = shard.clone();
    let spawned = glommio::spawn_local_into(cleaner_loop(shard), queue);
    match spawned {
        Ok(task) => {
            task.detach();
        }
        Err(e) => tracing::error!(error = %e, "the log cleaner could not start"),
    };
}

async fn cleaner_loop(shard: Rc<Shard>) {
    while !shard.is_shutting_down() {
        // Read each pass: the cleaner's settings are dynamic (AlterConfigs on the broker).
        let settings = shard.settings();
        let budget = CleanerBudget {
            throttle: IoThrottle::new(settings.cleaner_io_bytes_per_second),
            dedupe_buffer_bytes: settings.cleaner_dedupe_buffer_bytes,
        };
        let backoff = Duration::from_millis(settings.cleaner_backoff_ms);
        let now = now_ms();
        let mut due: Vec<_> = shard
            .partitions()
            .into_iter()
            .filter_map(|p| p.cleaning_priority(now).map(|ratio| (ratio, p)))
            .collect();
        due.sort_by(|a, b| b.0.total_cmp(&a.0));
        for (_, p) in due {
            if shard.is_shutting_down() {
                return;
            }
            match p.clean(&budget, now_ms()).await {
                Ok(Some(outcome)) => tracing::info!(topic = %p.topic(), partition = p.index(),
                    segments_before = outcome.segments_before, segments_after = outcome.segments_after,
                    bytes_read = outcome.bytes_read, bytes_written = outcome.bytes_written,
                    first_dirty = outcome.first_dirty, "compacted"),
                Ok(None) => {}
                Err(e) => {
                    tracing::error!(topic = %p.topic(), partition = p.index(), error = %e, "compaction failed")
                }
            }
        }
        let seen = shard.shutdown_started.generation();
        if shard.is_shutting_down() {
            return;
        }
        let sleep = glommio::timer::sleep(backoff);
        let stop = shard.shutdown_started.wait_past(seen);
        futures::pin_mut!(sleep, stop);
        futures::future::select(sleep, stop).await;
    }
}
