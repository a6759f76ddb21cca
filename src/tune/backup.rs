//! The backup `ferrite tune --apply` takes before it writes anything: `<backup dir>/<UTC time>/`
//! holds each original value under its own path (`proc/sys/vm/swappiness`) and `restore.sh`,
//! which writes them back. After the writes it is trimmed to what was actually changed.

use super::checks::FileWrite;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// Runs started within the same second get `-1`, `-2`, ... after the time, up to this many;
/// past it the backup (and so the run) fails rather than reuse a directory.
const RUNS_PER_SECOND_MAX: u32 = 100;

const SCRIPT: &str = "restore.sh";

/// The start of `restore.sh`; one `put COPY TARGET` line per changed file follows. Builtins
/// only: `printf` hands a one-line value to one write(), which is how /proc and /sys take it.
const SCRIPT_HEAD: &str = r#"#!/bin/sh
# Written by `ferrite tune --apply`: writes back the values it changed, from the copies beside
# this script. Run it as the user that applied them: sh restore.sh
here=$(cd "$(dirname "$0")" && pwd) || exit 1
status=0
put() {
    if IFS= read -r value < "$here/$1" && printf '%s\n' "$value" > "$2"; then
        echo "restored $2"
    else
        echo "could not restore $2" >&2
        status=1
    fi
}
"#;

#[derive(Debug, thiserror::Error)]
#[error("{}: {source}", path.display())]
pub struct BackupError {
    path: PathBuf,
    source: io::Error,
}

fn at(path: &Path) -> impl FnOnce(io::Error) -> BackupError + '_ {
    move |source| BackupError {
        path: path.to_path_buf(),
        source,
    }
}

/// One run's backup directory and the originals it holds.
pub struct Backup {
    pub dir: PathBuf,
    saved: Vec<FileWrite>,
}

impl Backup {
    /// Creates `<backup_dir>/<now as UTC>/` with the original of every file in `writes` and a
    /// `restore.sh` for all of them. Nothing may be written to the host before this returns.
    pub fn save(
        backup_dir: &Path,
        writes: &[&FileWrite],
        now: SystemTime,
    ) -> Result<Backup, BackupError> {
        assert!(!writes.is_empty(), "a backup of nothing");
        for (i, w) in writes.iter().enumerate() {
            assert!(w.path.is_absolute(), "{} is not absolute", w.path.display());
            // One copy per file: a second would overwrite the first original.
            assert!(
                writes[..i].iter().all(|v| v.path != w.path),
                "{} backed up twice",
                w.path.display()
            );
        }
        let backup_dir = std::path::absolute(backup_dir).map_err(at(backup_dir))?;
        std::fs::create_dir_all(&backup_dir).map_err(at(&backup_dir))?;
        let dir = create_run_dir(&backup_dir, &utc_name(now))?;
        // Not fsynced: the values backed up are kernel settings, which a crash resets anyway.
        for w in writes {
            let copy = dir.join(copy_name(&w.path));
            if let Some(parent) = copy.parent() {
                std::fs::create_dir_all(parent).map_err(at(parent))?;
            }
            std::fs::write(&copy, format!("{}\n", w.original)).map_err(at(&copy))?;
        }
        write_script(&dir, writes)?;
        Ok(Backup {
            dir,
            saved: writes.iter().map(|w| (*w).clone()).collect(),
        })
    }

    /// After the writes: `restore.sh` and the copies cover only `changed`; with nothing
    /// changed the whole directory goes (there is nothing to restore) and this returns None.
    pub fn keep_only(self, changed: &[&FileWrite]) -> Result<Option<PathBuf>, BackupError> {
        if changed.is_empty() {
            std::fs::remove_dir_all(&self.dir).map_err(at(&self.dir))?;
            return Ok(None);
        }
        write_script(&self.dir, changed)?;
        for w in self.saved.iter().filter(|w| !changed.contains(w)) {
            let copy = self.dir.join(copy_name(&w.path));
            std::fs::remove_file(&copy).map_err(at(&copy))?;
        }
        Ok(Some(self.dir))
    }
}

fn create_run_dir(backup_dir: &Path, name: &str) -> Result<PathBuf, BackupError> {
    for n in 0..RUNS_PER_SECOND_MAX {
        let dir = match n {
            0 => backup_dir.join(name),
            n => backup_dir.join(format!("{name}-{n}")),
        };
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(at(&dir)(e)),
        }
    }
    Err(BackupError {
        path: backup_dir.join(name),
        source: io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("{RUNS_PER_SECOND_MAX} backups this second already"),
        ),
    })
}

/// Where the copy of `path` goes inside a run directory: the path without its root, and
/// without `..`, so it cannot land outside the run directory.
fn copy_name(path: &Path) -> PathBuf {
    path.components()
        .filter(|c| matches!(c, Component::Normal(_)))
        .collect()
}

/// `restore.sh` for `writes`, replaced whole (written beside it, then renamed over it).
fn write_script(dir: &Path, writes: &[&FileWrite]) -> Result<(), BackupError> {
    let mut text: Vec<u8> = Vec::new();
    text.extend_from_slice(SCRIPT_HEAD.as_bytes());
    for w in writes {
        text.extend_from_slice(b"put ");
        text.extend(sh_quote(copy_name(&w.path).as_os_str().as_bytes()));
        text.push(b' ');
        text.extend(sh_quote(w.path.as_os_str().as_bytes()));
        text.push(b'\n');
    }
    text.extend_from_slice(b"exit $status\n");
    let script = dir.join(SCRIPT);
    let tmp = dir.join(format!("{SCRIPT}.tmp"));
    std::fs::write(&tmp, &text).map_err(at(&tmp))?;
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755)).map_err(at(&tmp))?;
    std::fs::rename(&tmp, &script).map_err(at(&script))
}

/// `s` as one single-quoted shell word: `it's` → `'it'\''s'`.
fn sh_quote(s: &[u8]) -> Vec<u8> {
    let mut out = vec![b'\''];
    for &b in s {
        if b == b'\'' {
            out.extend_from_slice(b"'\\''");
        } else {
            out.push(b);
        }
    }
    out.push(b'\'');
    out
}

/// `now` as `20240229T134501Z` (UTC): sorts by time, and means the same on every host.
fn utc_name(now: SystemTime) -> String {
    let secs = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}{month:02}{day:02}T{:02}{:02}{:02}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

/// Days since 1970-01-01 → (year, month, day), proleptic Gregorian (Howard Hinnant's
/// `civil_from_days`, for days on or after the epoch).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn at_secs(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn run_names_are_utc_times() {
        assert_eq!(utc_name(at_secs(0)), "19700101T000000Z");
        assert_eq!(utc_name(at_secs(951_782_400)), "20000229T000000Z");
        assert_eq!(utc_name(at_secs(1_700_000_000)), "20231114T221320Z");
        assert_eq!(utc_name(at_secs(4_107_542_399)), "21000228T235959Z");
    }

    #[test]
    fn shell_words_are_quoted_whole() {
        assert_eq!(
            sh_quote(b"/proc/sys/vm/swappiness"),
            b"'/proc/sys/vm/swappiness'"
        );
        assert_eq!(sh_quote(b"it's $x"), b"'it'\\''s $x'");
    }

    #[test]
    fn copies_stay_inside_the_run_directory() {
        assert_eq!(
            copy_name(Path::new("/proc/sys/vm/swappiness")),
            Path::new("proc/sys/vm/swappiness")
        );
        assert_eq!(copy_name(Path::new("/a/../../b")), Path::new("a/b"));
    }

    #[test]
    fn a_backup_keeps_only_what_was_changed() {
        let tmp = tempfile::tempdir().unwrap();
        let write = |name: &str| FileWrite {
            path: tmp.path().join(name),
            original: format!("old {name}"),
            value: "new".into(),
        };
        let (a, b) = (write("a"), write("b"));
        let now = at_secs(1_700_000_000);
        let backup = Backup::save(&tmp.path().join("backups"), &[&a, &b], now).unwrap();
        let again = Backup::save(&tmp.path().join("backups"), &[&a], now).unwrap();
        assert!(again.dir.ends_with("20231114T221320Z-1"), "{:?}", again.dir);
        assert_eq!(again.keep_only(&[]).unwrap(), None);
        let dir = backup.keep_only(&[&a]).unwrap().unwrap();
        assert!(dir.ends_with("20231114T221320Z"), "{dir:?}");
        assert_eq!(
            std::fs::read_to_string(dir.join(copy_name(&a.path))).unwrap(),
            "old a\n"
        );
        assert!(!dir.join(copy_name(&b.path)).exists());
        let script = std::fs::read_to_string(dir.join(SCRIPT)).unwrap();
        assert!(
            script.contains(&format!("'{}'", a.path.display())),
            "{script}"
        );
        assert!(
            !script.contains(&format!("'{}'", b.path.display())),
            "{script}"
        );
        assert!(!tmp.path().join("backups/20231114T221320Z-1").exists());
    }
}
