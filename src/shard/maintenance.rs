//! A shard's periodic duties: flushing (by `flush.ms` and the recovery checkpoint interval),
//! retention (every `log.retention.check.interval.ms`) and, in a task queue of its own, log
//! compaction (`cleaner.rs`).

use super::Shard;
use ferrite_shards::repeated;
use ferrite_shards::types::now_ms;
use std::rc::Rc;
use std::time::Duration;

/// How often a shard runs flush checks; retention runs every `log.retention.check.interval.ms`.
const MAINTENANCE_TICK: Duration = Duration::from_millis(200);

/// Starts the shard's maintenance task and its log cleaner.
pub fn start(shard: &Rc<Shard>) {
    glommio::spawn_local(maintenance_loop(shard.clone())).detach();
    super::cleaner::start(shard);
}

/// How a failed flush is reported: it repeats every tick while the disk is full.
const FLUSH_FAILED: &str = "flush failed";

async fn maintenance_loop(shard: Rc<Shard>) {
    let broker = &shard.config.broker;
    let mut last_retention = now_ms();
    while !shard.is_shutting_down() {
        glommio::timer::sleep(MAINTENANCE_TICK).await;
        for p in shard.partitions() {
            match p.maintain(broker.recovery_checkpoint_interval_ms).await {
                Ok(()) => repeated::cleared(FLUSH_FAILED),
                Err(e) => repeated::error(FLUSH_FAILED, &p.log().dir().display(), &e),
            }
        }
        let now = now_ms();
        if now - last_retention >= broker.retention_check_interval_ms {
            last_retention = now;
            for p in shard.partitions() {
                match p.log().apply_retention(now).await {
                    Ok(o) if o.deleted_segments > 0 => {
                        tracing::info!(topic = %p.topic(), partition = p.index(),
                        segments = o.deleted_segments, bytes = o.deleted_bytes, log_start = o.log_start_offset, "retention")
                    }
                    Ok(_) => {}
                    Err(e) => repeated::error("retention failed", &p.log().dir().display(), &e),
                }
            }
        }
    }
}
