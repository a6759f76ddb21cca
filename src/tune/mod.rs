//! `ferrite tune`: what a broker host should have. `--check` reads and changes nothing;
//! `--apply` writes what can be written, after backing up the originals (apply.rs, backup.rs).
//!
//! Each line gives the current value, the recommended one and why; a value this process cannot
//! read (not exposed, or no permission) says so instead of guessing. `--check` exits 0 when
//! every readable check passes, 1 when something should change; `--apply` exits 0 when
//! everything that should change did, 1 when something could not.

mod apply;
mod backup;
mod checks;

pub use apply::apply;
pub use checks::Root;

use checks::{Check, Verdict};
use std::path::Path;

/// Every check for a broker with shards on `shard_cores` and data in `data_dir`, in the order
/// they are printed.
fn all_checks(root: &Root, shard_cores: &[usize], data_dir: &Path) -> Vec<Check> {
    let mut all: Vec<Check> = Vec::new();
    all.extend(checks::cpu_governors(root, shard_cores));
    all.push(checks::aio_max_nr(root));
    all.push(checks::memlock());
    all.push(checks::transparent_hugepages(root));
    all.push(checks::swappiness(root));
    all.push(checks::clocksource(root));
    all.extend(checks::disk(root, data_dir));
    all.extend(checks::irq_affinity(root, shard_cores));
    all
}

/// Runs every check, prints them, and returns whether the host needs no change.
pub fn check(root: &Root, shard_cores: &[usize], data_dir: &Path) -> bool {
    let all = all_checks(root, shard_cores, data_dir);
    for c in &all {
        let mark = match c.verdict {
            Verdict::Ok => "ok    ",
            Verdict::Change(_) => "CHANGE",
            Verdict::Unknown => "?     ",
        };
        println!("{mark} {}: {}", c.name, c.current);
        if c.verdict != Verdict::Ok && !c.recommended.is_empty() {
            println!("       recommended: {} — {}", c.recommended, c.why);
        }
    }
    let change = all
        .iter()
        .filter(|c| matches!(c.verdict, Verdict::Change(_)))
        .count();
    let unknown = all.iter().filter(|c| c.verdict == Verdict::Unknown).count();
    println!(
        "{} checks: {} ok, {change} to change, {unknown} not readable here (shard cores {shard_cores:?}, data dir {})",
        all.len(),
        all.len() - change - unknown,
        data_dir.display()
    );
    change == 0
}
