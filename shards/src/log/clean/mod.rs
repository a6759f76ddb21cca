//! Log compaction: a background pass that keeps at least the latest record of every key.
//!
//! A pass, on a log with `cleanup.policy` compact (or compact,delete):
//! 1. takes the closed segments it may touch: below the segment of the recovery point (flushed,
//!    indexes sealed, covered by the producer snapshot) and below `clean_below` (the partition's
//!    limit: high watermark, producer snapshot);
//! 2. maps key → latest offset over the dirty ones (from the cleaner checkpoint on), segment by
//!    segment, until the map's memory budget is spent;
//! 3. rewrites every segment up to the end of the map, run by run (a run merges neighbours up
//!    to `segment.bytes`), dropping each record with a newer one under its key and each
//!    tombstone past its delete horizon (see `state.rs`), and applying Kafka's rules for
//!    aborted data and markers (see `transactions.rs`); offsets never change;
//! 4. swaps each cleaned run in crash-safely (see `swap.rs`) and in memory, where readers
//!    already holding the old files keep reading them;
//! 5. records the new first dirty offset.
//!
//! Appends and fetches never wait on a pass: it touches only closed segments, reads and writes
//! through its own descriptors, and changes the segment list in one step. Retention skips a log
//! while a pass runs on it; truncation, close and delete ask the pass to stop between batches
//! and wait for it. I/O is paced by the shard's `IoThrottle`, memory bounded by the offset map
//! budget, one batch's decompressed records and 1 MiB of pending writes.
//!
//! Lives on: the shard that owns the partition.

mod batches;
mod offset_map;
mod rewrite;
pub(crate) mod state;
pub(crate) mod swap;
mod throttle;
mod transactions;

#[cfg(test)]
mod tests;

pub use throttle::IoThrottle;

use super::segment::SegmentPaths;
use super::segment_file::SegmentFile;
use super::LogInner;
use crate::error::{Error, Result};
use crate::uring::File;
use glommio::sync::Permit;
use offset_map::OffsetMap;
use rewrite::{Retention, SourceSegment};
use std::rc::Rc;
use transactions::{AbortedRanges, TxnCleaning};

/// What one shard gives its cleaner passes.
pub struct CleanerBudget {
    pub throttle: IoThrottle,
    /// `log.cleaner.dedupe.buffer.size`: memory for one pass's offset map.
    pub dedupe_buffer_bytes: usize,
}

/// What a pass did.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct CleanOutcome {
    pub segments_before: usize,
    pub segments_after: usize,
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// Everything below has been through the offset map.
    pub first_dirty: i64,
}

/// What a pass would work on, decided without I/O.
struct Plan {
    sources: Vec<SourceSegment>,
    /// Index in `sources` of the first segment holding dirty records.
    dirty_from: usize,
    tombstone_horizon: i64,
    dirty_ratio: f64,
    /// The partition's cleaning limit the plan was made for.
    clean_below: i64,
}

impl super::Log {
    /// The dirty share of the cleanable segments when a pass is due (`min.cleanable.dirty.ratio`
    /// reached, or tombstones have come past their horizon); the shard cleans the dirtiest first.
    pub fn cleaning_priority(&self, clean_below: i64, now_ms: i64) -> Option<f64> {
        plan(&self.inner, clean_below, now_ms).map(|p| p.dirty_ratio)
    }

    /// Runs one pass if one is due; `None` when none was, or it stopped for truncation or close.
    pub async fn clean(
        &self,
        budget: &CleanerBudget,
        clean_below: i64,
        now_ms: i64,
    ) -> Result<Option<CleanOutcome>> {
        let inner = &self.inner;
        let Ok(_pass) = inner.cleaning.try_acquire_permit(1) else {
            return Ok(None);
        };
        if stop_requested(inner) {
            return Ok(None);
        }
        let Some(plan) = plan(inner, clean_below, now_ms) else {
            return Ok(None);
        };
        let result = run_pass(inner, budget, plan, now_ms).await;
        if result.is_err() || matches!(result, Ok(None)) {
            // An unfinished run leaves only `.cleaned` files, which nothing reads.
            let _ = swap::recover_leftovers(&inner.dir).await;
        }
        result
    }
}

fn conflict(inner: &LogInner) -> Error {
    Error::Cleaner {
        path: inner.dir.clone(),
        reason: "the segments changed under the pass",
    }
}

fn stop_requested(inner: &LogInner) -> bool {
    inner.cleaner_stop_requests.get() > 0 || inner.closed.get()
}

/// Waits for a running pass to stop (it checks between batches); the permit keeps others out.
pub(crate) async fn stop_cleaning(inner: &LogInner) -> Result<Permit<'_>> {
    inner
        .cleaner_stop_requests
        .set(inner.cleaner_stop_requests.get() + 1);
    let permit = inner.cleaning.acquire_permit(1).await;
    inner
        .cleaner_stop_requests
        .set(inner.cleaner_stop_requests.get() - 1);
    permit.map_err(|_| Error::Closed(inner.dir.clone()))
}

/// Truncation moved the log end to `end`: forget what was cleaned above it, durably.
pub(crate) async fn after_truncation(inner: &LogInner, end: i64) -> Result<()> {
    let state = {
        let mut s = inner.cleaner.borrow_mut();
        s.truncated_to(end);
        s.clone()
    };
    state
        .store(&inner.dir)
        .await
        .map_err(|e| Error::io("write cleaner checkpoint", &inner.dir, e))
}

fn plan(inner: &LogInner, clean_below: i64, now_ms: i64) -> Option<Plan> {
    let config = inner.config.borrow().clone();
    if !config.cleanup_policy.compacts() {
        return None;
    }
    let st = inner.state.borrow();
    let closed = &st.segments[..st.segments.len() - 1];
    let sources: Vec<SourceSegment> = closed
        .iter()
        .take_while(|s| {
            s.base_offset < st.recovery_point.segment_base && s.next_offset <= clean_below
        })
        .map(|s| SourceSegment {
            base_offset: s.base_offset,
            file: s.file.clone(),
            size: s.size,
            next_offset: s.next_offset,
            max_timestamp: s.max_timestamp,
            aborted: s.txn_index.entries.clone(),
        })
        .collect();
    if sources.is_empty() {
        return None;
    }
    let cleaner = inner.cleaner.borrow();
    let dirty_from = sources.partition_point(|s| s.next_offset <= cleaner.first_dirty);
    let clean_bytes: u64 = sources[..dirty_from].iter().map(|s| s.size).sum();
    let dirty_bytes: u64 = sources[dirty_from..].iter().map(|s| s.size).sum();
    let dirty_ratio = match clean_bytes + dirty_bytes {
        0 => 0.0,
        total => dirty_bytes as f64 / total as f64,
    };
    let tombstone_horizon = cleaner.tombstone_horizon(now_ms, config.delete_retention_ms);
    let due = (dirty_bytes > 0 && dirty_ratio >= config.min_cleanable_dirty_ratio)
        || (tombstone_horizon > cleaner.horizon_applied && clean_bytes > 0);
    due.then_some(Plan {
        sources,
        dirty_from,
        tombstone_horizon,
        dirty_ratio,
        clean_below,
    })
}

async fn run_pass(
    inner: &Rc<LogInner>,
    budget: &CleanerBudget,
    plan: Plan,
    now_ms: i64,
) -> Result<Option<CleanOutcome>> {
    let stop = || stop_requested(inner);
    let config = inner.config.borrow().clone();
    // Every aborted transaction that began below the limit, wherever its marker is; made for
    // a pass only (`cleaning_priority` plans too, without cleaning).
    let aborted = AbortedRanges::new(
        inner
            .state
            .borrow()
            .segments
            .iter()
            .flat_map(|s| &s.txn_index.entries)
            .filter(|e| e.first_offset < plan.clean_below),
    );
    // A record takes at least 7 bytes of a segment: no more entries than that can be needed.
    let dirty_bytes: u64 = plan.sources[plan.dirty_from..].iter().map(|s| s.size).sum();
    let mut map = OffsetMap::with_memory(budget.dedupe_buffer_bytes, (dirty_bytes / 7) as usize);
    let mut mapped = plan.dirty_from;
    let mut outcome = CleanOutcome {
        segments_before: plan.sources.len(),
        ..Default::default()
    };
    'segments: for source in &plan.sources[plan.dirty_from..] {
        let mut batches = batches::SegmentBatches::new(source.file.get().await?, source.size);
        while let Some((_, header, bytes, read)) = batches.next().await? {
            if stop() {
                return Ok(None);
            }
            outcome.bytes_read += read;
            budget.throttle.spend(read).await;
            if !rewrite::for_each_key(&bytes, &header, &aborted, |key, offset| {
                map.put(key, offset)
            }) {
                break 'segments;
            }
            glommio::yield_if_needed().await;
        }
        mapped += 1;
    }
    if mapped == plan.dirty_from && plan.dirty_from < plan.sources.len() {
        tracing::warn!(log = %inner.dir.display(), keys = map.len(),
            "the keys of one segment do not fit log.cleaner.dedupe.buffer.size; not cleaning");
        return Err(Error::Cleaner {
            path: inner.dir.clone(),
            reason: "the keys of one segment exceed log.cleaner.dedupe.buffer.size",
        });
    }
    let map_end = match mapped {
        0 => plan.sources[0].base_offset,
        n => plan.sources[n - 1].next_offset,
    };
    let rule = Retention {
        map: &map,
        tombstone_horizon: plan.tombstone_horizon,
    };
    let mut txns = TxnCleaning::new(&aborted, plan.tombstone_horizon);
    let to_clean = &plan.sources[..mapped];
    let runs: Vec<&[SourceSegment]> = runs(to_clean, config.segment_bytes).collect();
    for &run in &runs {
        let Some((segment, counts)) = rewrite::rewrite_run(
            &inner.dir,
            run,
            &rule,
            &mut txns,
            config.index_interval_bytes,
            &budget.throttle,
            &stop,
        )
        .await?
        else {
            return Ok(None);
        };
        outcome.bytes_read += counts.bytes_read;
        outcome.bytes_written += counts.bytes_written;
        let bases: Vec<i64> = run.iter().map(|s| s.base_offset).collect();
        // The swap renames over the first source's path and unlinks the others: readers that
        // took these segments before must keep reading what they held.
        for source in run {
            source.file.pin().await?;
        }
        swap::decide(&inner.dir, bases[0], &bases).await?;
        if let Err(e) = swap::finish(&inner.dir, bases[0], &bases).await {
            // The swap is decided on disk but not done; the next open completes it. Until
            // then nothing else may clean this log.
            inner.cleaning.close();
            tracing::error!(log = %inner.dir.display(), error = %e,
                "cleaner swap failed half way; it completes when the partition next opens");
            return Err(e);
        }
        install(inner, run, segment).await?;
    }
    let state = {
        let mut s = inner.cleaner.borrow_mut();
        s.pass_completed(map_end, now_ms, plan.tombstone_horizon);
        s.clone()
    };
    state
        .store(&inner.dir)
        .await
        .map_err(|e| Error::io("write cleaner checkpoint", &inner.dir, e))?;
    outcome.first_dirty = map_end;
    outcome.segments_after = plan.sources.len() - to_clean.len() + runs.len();
    tracing::info!(log = %inner.dir.display(), ?outcome, "cleaned");
    Ok(Some(outcome))
}

/// Consecutive segments merged into one cleaned segment: at most `segment.bytes` of input, and
/// an offset span the 32-bit relative offsets of the index can address.
fn runs(sources: &[SourceSegment], segment_bytes: u64) -> impl Iterator<Item = &[SourceSegment]> {
    let mut start = 0;
    std::iter::from_fn(move || {
        if start >= sources.len() {
            return None;
        }
        let first = start;
        let mut bytes = 0u64;
        while start < sources.len() {
            let s = &sources[start];
            let span = s.next_offset - sources[first].base_offset;
            if start > first && (bytes + s.size > segment_bytes || span > i32::MAX as i64) {
                break;
            }
            bytes += s.size;
            start += 1;
        }
        Some(&sources[first..start])
    })
}

/// Puts the cleaned segment in place of `run` in the segment list, at its final paths.
async fn install(
    inner: &LogInner,
    run: &[SourceSegment],
    mut segment: super::segment::Segment,
) -> Result<()> {
    let base = run[0].base_offset;
    let paths = SegmentPaths::new(&inner.dir, base);
    segment.file = SegmentFile::opened(
        File::open_rw(&paths.log)
            .await
            .map_err(|e| Error::io("open", &paths.log, e))?,
    );
    segment.paths = paths;
    let end = segment.next_offset;
    let replaced = {
        let mut st = inner.state.borrow_mut();
        let Some(at) = st.segments.iter().position(|s| s.base_offset == base) else {
            return Err(conflict(inner));
        };
        let same = st.segments[at..]
            .iter()
            .map(|s| s.base_offset)
            .take(run.len())
            .eq(run.iter().map(|s| s.base_offset));
        if !same || at + run.len() >= st.segments.len() {
            return Err(conflict(inner));
        }
        let replaced: Vec<_> = st.segments.splice(at..at + run.len(), [segment]).collect();
        replaced
    };
    if let Some((cache, entries)) = &inner.cache {
        cache.forget(entries, |b| b.base_offset < base || b.base_offset >= end);
    }
    drop(replaced);
    Ok(())
}
