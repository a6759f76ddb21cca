//! `ferrite tune --apply`: the checks of `--check`, then for each value that should change and
//! can by writing one file, that write, once the originals are backed up (backup.rs). What no
//! file write changes is reported with what the operator should do instead; a write the kernel
//! refuses is reported with its error, and the run goes on.

use super::backup::{Backup, BackupError};
use super::checks::{Check, FileWrite, Remedy, Root, Verdict};
use std::io::{self, Write};
use std::path::Path;
use std::time::SystemTime;

/// What became of one check.
enum Outcome<'a> {
    Ok,
    Unreadable,
    Changed(&'a FileWrite),
    /// Written without an error, yet the check still asks for a change (what it reads now).
    NotTaken(&'a FileWrite, String),
    Failed(&'a FileWrite, io::Error),
    /// Not attempted: the originals could not be backed up.
    NotBackedUp(&'a FileWrite),
    /// Not a file write: what the operator should do.
    Operator(&'a str),
}

impl Outcome<'_> {
    /// Nothing is left that should change and could have (an unreadable value is not judged,
    /// as with `--check`).
    fn done(&self) -> bool {
        matches!(
            self,
            Outcome::Ok | Outcome::Unreadable | Outcome::Changed(_)
        )
    }
}

/// Applies what can be applied for a broker with shards on `shard_cores` and data in
/// `data_dir`, backing up into a new directory under `backup_dir`, and prints what it did.
/// Returns whether everything that should change did.
pub fn apply(root: &Root, shard_cores: &[usize], data_dir: &Path, backup_dir: &Path) -> bool {
    let before = super::all_checks(root, shard_cores, data_dir);
    let writes: Vec<&FileWrite> = before
        .iter()
        .filter_map(|c| match &c.verdict {
            Verdict::Change(Remedy::Write(w)) => Some(w),
            _ => None,
        })
        .collect();
    // The backup comes first: without it, nothing is written.
    let backup = (!writes.is_empty()).then(|| Backup::save(backup_dir, &writes, SystemTime::now()));
    let backed_up = matches!(backup, Some(Ok(_)));
    let mut outcomes: Vec<(&Check, Outcome)> = before
        .iter()
        .map(|c| (c, act(&c.verdict, backed_up)))
        .collect();
    verify(&mut outcomes, || {
        super::all_checks(root, shard_cores, data_dir)
    });
    for (c, outcome) in &outcomes {
        print_outcome(c, outcome);
    }
    finish_backup(backup, &outcomes);
    let count = |f: fn(&Outcome) -> bool| outcomes.iter().filter(|(_, o)| f(o)).count();
    let not_done = count(|o| !o.done());
    println!(
        "{} checks: {} ok, {} changed, {not_done} not changed, {} not readable here (shard cores {shard_cores:?}, data dir {})",
        outcomes.len(),
        count(|o| matches!(o, Outcome::Ok)),
        count(|o| matches!(o, Outcome::Changed(_))),
        count(|o| matches!(o, Outcome::Unreadable)),
        data_dir.display()
    );
    not_done == 0
}

/// What `--apply` does about one check: the write, when it has one and the originals are
/// backed up.
fn act(verdict: &Verdict, backed_up: bool) -> Outcome<'_> {
    match verdict {
        Verdict::Ok => Outcome::Ok,
        Verdict::Unknown => Outcome::Unreadable,
        Verdict::Change(Remedy::Operator(what)) => Outcome::Operator(what),
        Verdict::Change(Remedy::Write(w)) if !backed_up => Outcome::NotBackedUp(w),
        Verdict::Change(Remedy::Write(w)) => match write_value(w) {
            Ok(()) => Outcome::Changed(w),
            Err(e) => Outcome::Failed(w, e),
        },
    }
}

/// A file can take a write without an error and keep its value: after any write, every check
/// runs again, and a change it does not see is not counted as one.
fn verify(outcomes: &mut [(&Check, Outcome)], checks_again: impl FnOnce() -> Vec<Check>) {
    if !outcomes
        .iter()
        .any(|(_, o)| matches!(o, Outcome::Changed(_)))
    {
        return;
    }
    let after = checks_again();
    for (c, outcome) in outcomes.iter_mut() {
        let Outcome::Changed(w) = *outcome else {
            continue;
        };
        if let Some(now) = after.iter().find(|a| a.name == c.name) {
            if now.verdict != Verdict::Ok {
                *outcome = Outcome::NotTaken(w, now.current.clone());
            }
        }
    }
}

/// Trims the backup to the files that were written and says where it is.
fn finish_backup(backup: Option<Result<Backup, BackupError>>, outcomes: &[(&Check, Outcome)]) {
    let written: Vec<&FileWrite> = outcomes
        .iter()
        .filter_map(|(_, o)| match o {
            Outcome::Changed(w) | Outcome::NotTaken(w, _) => Some(*w),
            _ => None,
        })
        .collect();
    match backup {
        None => println!("backup: none needed, nothing to change"),
        Some(Err(e)) => {
            println!("backup: cannot back up the originals ({e}), so nothing was written")
        }
        Some(Ok(b)) => match b.keep_only(&written) {
            Ok(Some(dir)) => println!(
                "backup: originals in {}; `sh {}` writes them back",
                dir.display(),
                dir.join("restore.sh").display()
            ),
            Ok(None) => println!("backup: none kept, nothing was changed"),
            Err(e) => println!(
                "backup: kept, but restore.sh may also name files that were not changed ({e})"
            ),
        },
    }
}

/// Writes `w.value` as `echo value > path` would, in one write(): /proc and /sys take a value
/// whole from a single write or refuse it, so the kernel never holds part of one. (Truncating
/// matters only for a plain file, as in a test's fake tree; the kernel's files ignore it.)
fn write_value(w: &FileWrite) -> io::Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(&w.path)?;
    let line = format!("{}\n", w.value);
    let written = file.write(line.as_bytes())?;
    if written != line.len() {
        return Err(io::Error::new(
            io::ErrorKind::WriteZero,
            format!("the file took {written} of {} bytes", line.len()),
        ));
    }
    Ok(())
}

fn print_outcome(c: &Check, outcome: &Outcome) {
    let name = &c.name;
    let not_applied = match outcome {
        Outcome::Ok => return println!("ok      {name}: {}", c.current),
        Outcome::Unreadable => return println!("?       {name}: {} (left as it is)", c.current),
        Outcome::Changed(w) => {
            return println!(
                "changed {name}: {} → {} ({})",
                w.original,
                w.value,
                w.path.display()
            )
        }
        Outcome::NotTaken(w, now) => format!(
            "wrote {} to {}, but it still reads {now}",
            w.value,
            w.path.display()
        ),
        Outcome::Failed(w, e) => {
            format!("cannot write {} to {}: {e}", w.value, w.path.display())
        }
        Outcome::NotBackedUp(w) => format!(
            "{} not written to {}: the original could not be backed up",
            w.value,
            w.path.display()
        ),
        Outcome::Operator(what) => what.to_string(),
    };
    let mark = match outcome {
        Outcome::Operator(_) => "manual ",
        _ => "FAILED ",
    };
    println!("{mark} {name}: {}", c.current);
    println!("        recommended: {} — {}", c.recommended, c.why);
    println!("        not applied: {not_applied}");
}
