//! For tests and benchmarks: running async code on a fresh glommio executor of this thread.
//! Shard code needs an executor (its io_uring ring, timers, `spawn_local`); a test makes one
//! per case so cases share nothing.

use std::future::Future;

/// Runs `f` to completion on a new local executor and returns its output.
pub fn run_local<T, Fut>(f: impl FnOnce() -> Fut) -> T
where
    Fut: Future<Output = T>,
{
    glommio::LocalExecutorBuilder::default()
        .make()
        .expect("a glommio executor on this thread")
        .run(async move { f().await })
}
