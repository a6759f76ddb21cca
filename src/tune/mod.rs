//! `ferrite tune --check`: what a broker host should have, checked without changing anything.
//!
//! Each line gives the current value, the recommended one and why; a value this process cannot
//! read (not exposed, or no permission) says so instead of guessing. The exit status is 0 when
//! every readable check passes, 1 when something should change. (`--apply` comes later.)

mod checks;

use checks::{Check, Verdict};
use std::path::Path;

/// Runs every check for a broker with shards on `shard_cores` and data in `data_dir`, prints
/// them, and returns whether the host needs no change.
pub fn check(shard_cores: &[usize], data_dir: &Path) -> bool {
    let mut all: Vec<Check> = Vec::new();
    all.extend(checks::cpu_governors(shard_cores));
    all.push(checks::aio_max_nr());
    all.push(checks::memlock());
    all.push(checks::transparent_hugepages());
    all.push(checks::swappiness());
    all.push(checks::clocksource());
    all.extend(checks::disk(data_dir));
    all.extend(checks::irq_affinity(shard_cores));
    for c in &all {
        let mark = match c.verdict {
            Verdict::Ok => "ok    ",
            Verdict::Change => "CHANGE",
            Verdict::Unknown => "?     ",
        };
        println!("{mark} {}: {}", c.name, c.current);
        if c.verdict != Verdict::Ok && !c.recommended.is_empty() {
            println!("       recommended: {} — {}", c.recommended, c.why);
        }
    }
    let change = all.iter().filter(|c| c.verdict == Verdict::Change).count();
    let unknown = all.iter().filter(|c| c.verdict == Verdict::Unknown).count();
    println!(
        "{} checks: {} ok, {change} to change, {unknown} not readable here (shard cores {shard_cores:?}, data dir {})",
        all.len(),
        all.len() - change - unknown,
        data_dir.display()
    );
    change == 0
}
