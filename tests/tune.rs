//! `ferrite tune` as the real binary. `--check` on this machine: it reads the host, changes
//! nothing, names every check, and says why for each value it cannot read. `--apply` against a
//! fake /proc and /sys (`--root`), and against this machine only without privileges: no test
//! runs `--apply` as root on the real host.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

#[test]
fn tune_check_reports_every_setting_without_changing_anything() {
    let swappiness_before = std::fs::read_to_string("/proc/sys/vm/swappiness").ok();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ferrite"));
    cmd.args(["tune", "--check", "--cores", "1", "--data-dir", "/tmp"]);
    let out = common::run(cmd, None, common::CLIENT_TIMEOUT);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    // 0: nothing to change; 1: something to change. Anything else is a failure.
    assert!(
        matches!(out.status.code(), Some(0) | Some(1)),
        "{}\n{text}",
        out.status
    );
    for name in [
        "cpu0 frequency governor",
        "fs.aio-max-nr",
        "memlock limit",
        "transparent hugepages",
        "vm.swappiness",
        "clocksource",
        "I/O scheduler",
        "write cache",
        "IRQ",
    ] {
        assert!(text.contains(name), "{name} missing:\n{text}");
    }
    for line in text.lines().filter(|l| l.starts_with('?')) {
        assert!(
            line.contains("not exposed")
                || line.contains("no permission")
                || line.contains("cannot")
                || line.contains("no NIC"),
            "an unreadable value must say why: {line}"
        );
    }
    assert!(text.contains("checks:"), "{text}");
    assert_eq!(
        std::fs::read_to_string("/proc/sys/vm/swappiness").ok(),
        swappiness_before,
        "--check changes nothing"
    );
}

/// The ferrite binary without root: as `nobody` through util-linux's setpriv when the tests
/// run as root (setuid away from 0 drops every capability), else as the user running them.
fn unprivileged_ferrite() -> Command {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
            .arg(env!("CARGO_BIN_EXE_ferrite"));
        c
    } else {
        Command::new(env!("CARGO_BIN_EXE_ferrite"))
    }
}

/// Without root it still runs to the end.
#[test]
fn tune_check_runs_without_privileges() {
    let mut cmd = unprivileged_ferrite();
    cmd.args(["tune", "--check", "--cores", "1", "--data-dir", "/tmp"]);
    let out = common::run(cmd, None, common::CLIENT_TIMEOUT);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        matches!(out.status.code(), Some(0) | Some(1)),
        "{}\n{text}\n{stderr}",
        out.status
    );
    assert!(
        text.contains("checks:") && text.contains("memlock limit"),
        "{text}\n{stderr}"
    );
}

/// `--apply` on this machine without privileges: every write is refused, and it says so for
/// each, with the path and the OS error; nothing changes, and no backup is kept.
#[test]
fn tune_apply_without_privileges_says_what_it_could_not_apply() {
    let swappiness_before = std::fs::read_to_string("/proc/sys/vm/swappiness").ok();
    let tmp = tempfile::tempdir().unwrap();
    // The unprivileged process must be able to make its backup, to get as far as the writes.
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let backups = tmp.path().join("backups");
    let mut cmd = unprivileged_ferrite();
    cmd.args([
        "tune",
        "--apply",
        "--cores",
        "1",
        "--data-dir",
        "/tmp",
        "--backup-dir",
    ])
    .arg(&backups);
    let out = common::run(cmd, None, common::CLIENT_TIMEOUT);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(
        std::fs::read_to_string("/proc/sys/vm/swappiness").ok(),
        swappiness_before,
        "an unprivileged --apply changes nothing:\n{text}"
    );
    let not_applied: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("not applied:"))
        .collect();
    match out.status.code() {
        Some(0) => assert!(not_applied.is_empty(), "{text}"),
        Some(1) => assert!(!not_applied.is_empty(), "exit 1 says what: {text}"),
        _ => panic!("{}\n{text}\n{stderr}", out.status),
    }
    assert!(!text.lines().any(|l| l.starts_with("changed ")), "{text}");
    for line in text.lines().filter(|l| l.starts_with("FAILED")) {
        let reason = text
            .lines()
            .skip_while(|l| *l != line)
            .find(|l| l.contains("not applied:"))
            .unwrap_or_default();
        assert!(
            reason.contains(" to /") && reason.contains("os error"),
            "a refused write names the path and the OS error: {line}\n{reason}"
        );
    }
    assert!(text.contains("memlock limit"), "{text}");
    assert!(text.contains("checks:"), "{text}");
    assert_eq!(backup_runs(&backups), Vec::<PathBuf>::new(), "{text}");
}

/// A fake /proc and /sys with values `--apply` should change, and a fake disk for a data
/// directory on it.
struct FakeHost {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    data: PathBuf,
    backups: PathBuf,
    /// The core `--cores 1` gives its shard (the first this process may run on); the one after
    /// it is online and runs none.
    shard_cpu: usize,
}

/// Path of a fake file, and what it holds before `--apply` ("bad") and after it.
const FAKE_FILES: &[(&str, &str, &str)] = &[
    ("proc/sys/fs/aio-max-nr", "65536", "1048576"),
    (
        "sys/kernel/mm/transparent_hugepage/enabled",
        "[always] madvise never",
        "madvise",
    ),
    ("proc/sys/vm/swappiness", "60", "1"),
    (
        "sys/devices/system/clocksource/clocksource0/current_clocksource",
        "hpet",
        "tsc",
    ),
    (
        "sys/devices/virtual/block/fakedisk/queue/scheduler",
        "[bfq] mq-deadline none",
        "none",
    ),
];

impl FakeHost {
    fn new() -> FakeHost {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().canonicalize().unwrap();
        let root = base.join("root");
        let data = base.join("data");
        std::fs::create_dir_all(&data).unwrap();
        let shard_cpu = first_allowed_cpu();
        let host = FakeHost {
            root,
            data,
            backups: base.join("backups"),
            shard_cpu,
            _tmp: tmp,
        };
        let (s, spare) = (shard_cpu, shard_cpu + 1);
        for cpu in [s, spare] {
            host.put(&governor(cpu), "powersave");
        }
        for (path, bad, _) in FAKE_FILES {
            host.put(path, bad);
        }
        host.put("sys/devices/system/cpu/online", &format!("{s}-{spare}"));
        host.put(
            "sys/devices/system/clocksource/clocksource0/available_clocksource",
            "tsc hpet acpi_pm",
        );
        host.put(
            "sys/devices/virtual/block/fakedisk/queue/write_cache",
            "write back",
        );
        host.put(
            "proc/interrupts",
            &format!(
                "{:>12}{:>11}\n 40:{:>11}{:>11}  PCI-MSIX-0000:00:03.0   1-edge      virtio2-input.0",
                format!("CPU{s}"),
                format!("CPU{spare}"),
                7,
                0
            ),
        );
        host.put("proc/irq/40/smp_affinity_list", &format!("{s}-{spare}"));
        // /sys/dev/block/MAJOR:MINOR of the data directory's device links to its disk.
        use std::os::unix::fs::MetadataExt;
        let dev = std::fs::metadata(&host.data).unwrap().dev();
        let links = host.root.join("sys/dev/block");
        std::fs::create_dir_all(&links).unwrap();
        std::os::unix::fs::symlink(
            "../../devices/virtual/block/fakedisk",
            links.join(format!("{}:{}", libc::major(dev), libc::minor(dev))),
        )
        .unwrap();
        host
    }

    fn put(&self, path: &str, value: &str) {
        let file = self.root.join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, format!("{value}\n")).unwrap();
    }

    fn get(&self, path: &str) -> String {
        std::fs::read_to_string(self.root.join(path))
            .unwrap()
            .trim()
            .to_string()
    }

    fn tune(&self, mut cmd: Command, mode: &str) -> (Output, String) {
        cmd.args(["tune", mode, "--cores", "1", "--root"])
            .arg(&self.root)
            .arg("--data-dir")
            .arg(&self.data);
        if mode == "--apply" {
            cmd.arg("--backup-dir").arg(&self.backups);
        }
        let out = common::run(cmd, None, common::CLIENT_TIMEOUT);
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        (out, text)
    }

    /// The exit status `--apply` should have once every file is right: the memlock limit of
    /// the test's own process is no file, so it decides.
    fn expected_exit(text: &str) -> Option<i32> {
        let memlock_low = text.lines().any(|l| l.starts_with("manual  memlock limit"));
        Some(i32::from(memlock_low))
    }
}

fn governor(cpu: usize) -> String {
    format!("sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_governor")
}

fn first_allowed_cpu() -> usize {
    // SAFETY: sched_getaffinity fills the zeroed set we own; CPU_ISSET reads it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::cpu_set_t>();
    assert_eq!(unsafe { libc::sched_getaffinity(0, size, &mut set) }, 0);
    (0..libc::CPU_SETSIZE as usize)
        .find(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .expect("a CPU this process may run on")
}

/// The run directories under a backup directory.
fn backup_runs(backups: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(backups) else {
        return Vec::new();
    };
    entries.map(|e| e.unwrap().path()).collect()
}

/// `--apply --root` on a fake tree: every bad value gets its recommended one, the originals
/// are backed up, a second run changes nothing and backs up nothing, and restore.sh puts the
/// originals back.
#[test]
fn tune_apply_changes_a_fake_host_backs_up_and_restores() {
    let host = FakeHost::new();
    let (s, spare) = (host.shard_cpu, host.shard_cpu + 1);
    let (out, text) = host.tune(Command::new(env!("CARGO_BIN_EXE_ferrite")), "--apply");
    assert_eq!(out.status.code(), FakeHost::expected_exit(&text), "{text}");
    for (path, _, good) in FAKE_FILES {
        assert_eq!(host.get(path), *good, "{path}:\n{text}");
    }
    assert_eq!(host.get(&governor(s)), "performance", "{text}");
    assert_eq!(host.get(&governor(spare)), "powersave", "not a shard core");
    assert_eq!(host.get("proc/irq/40/smp_affinity_list"), spare.to_string());
    assert_eq!(
        host.get("sys/devices/virtual/block/fakedisk/queue/write_cache"),
        "write back"
    );
    assert!(
        text.contains("changed fakedisk I/O scheduler: bfq → none"),
        "{text}"
    );
    assert!(!text.contains("FAILED"), "{text}");

    let runs = backup_runs(&host.backups);
    assert_eq!(runs.len(), 1, "{runs:?}");
    let run = &runs[0];
    let name = run.file_name().unwrap().to_string_lossy().to_string();
    assert!(
        name.len() == 16 && name.as_bytes()[8] == b'T' && name.ends_with('Z'),
        "a run is named by UTC time: {name}"
    );
    assert!(
        text.contains(&format!("backup: originals in {}", run.display())),
        "{text}"
    );
    let copy = |path: &str| {
        let original = host.root.join(path);
        std::fs::read_to_string(run.join(original.strip_prefix("/").unwrap()))
            .unwrap_or_else(|e| panic!("backup of {path}: {e}"))
    };
    assert_eq!(copy("proc/sys/vm/swappiness"), "60\n");
    assert_eq!(
        copy("sys/kernel/mm/transparent_hugepage/enabled"),
        "always\n"
    );
    assert_eq!(copy(&governor(s)), "powersave\n");
    assert_eq!(
        copy("proc/irq/40/smp_affinity_list"),
        format!("{s}-{spare}\n")
    );

    let (out, again) = host.tune(Command::new(env!("CARGO_BIN_EXE_ferrite")), "--apply");
    assert_eq!(
        out.status.code(),
        FakeHost::expected_exit(&again),
        "{again}"
    );
    assert!(!again.lines().any(|l| l.starts_with("changed ")), "{again}");
    assert!(again.contains("backup: none needed"), "{again}");
    assert_eq!(
        backup_runs(&host.backups),
        runs,
        "a second run backs up nothing"
    );

    let mut restore = Command::new("sh");
    restore.arg(run.join("restore.sh")).current_dir("/");
    let restored = common::run(restore, None, common::CLIENT_TIMEOUT);
    let said = String::from_utf8_lossy(&restored.stdout).to_string();
    assert!(restored.status.success(), "{said}");
    assert_eq!(host.get("proc/sys/vm/swappiness"), "60", "{said}");
    assert_eq!(host.get("proc/sys/fs/aio-max-nr"), "65536");
    // The kernel shows a choice file as `[always] madvise never`; the fake keeps what it got.
    assert_eq!(
        host.get("sys/kernel/mm/transparent_hugepage/enabled"),
        "always"
    );
    assert_eq!(
        host.get("sys/devices/system/clocksource/clocksource0/current_clocksource"),
        "hpet"
    );
    assert_eq!(
        host.get("sys/devices/virtual/block/fakedisk/queue/scheduler"),
        "bfq"
    );
    assert_eq!(host.get(&governor(s)), "powersave");
    assert_eq!(
        host.get("proc/irq/40/smp_affinity_list"),
        format!("{s}-{spare}")
    );

    let (out, check) = host.tune(Command::new(env!("CARGO_BIN_EXE_ferrite")), "--check");
    assert_eq!(out.status.code(), Some(1), "{check}");
    assert!(check.contains("CHANGE vm.swappiness: 60"), "{check}");
}

/// Files the process may not write (as `nobody`, or read-only to its own user): each refused
/// write is reported with its path and OS error, the others still run, nothing changes, and
/// the backup, with nothing to restore, is not kept.
#[test]
fn tune_apply_reports_each_refused_write_and_goes_on() {
    let host = FakeHost::new();
    let (s, spare) = (host.shard_cpu, host.shard_cpu + 1);
    read_only_to_others(host.root.parent().unwrap());
    std::fs::create_dir(&host.backups).unwrap();
    std::fs::set_permissions(&host.backups, std::fs::Permissions::from_mode(0o777)).unwrap();
    let (out, text) = host.tune(unprivileged_ferrite(), "--apply");
    assert_eq!(out.status.code(), Some(1), "{text}");
    for (path, bad, _) in FAKE_FILES {
        assert_eq!(host.get(path), *bad, "{path}:\n{text}");
        let refused = format!(
            "to {}: Permission denied (os error 13)",
            host.root.join(path).canonicalize().unwrap().display()
        );
        assert!(text.contains(&refused), "{refused}:\n{text}");
    }
    assert_eq!(host.get(&governor(s)), "powersave");
    assert_eq!(
        host.get("proc/irq/40/smp_affinity_list"),
        format!("{s}-{spare}")
    );
    assert!(!text.lines().any(|l| l.starts_with("changed ")), "{text}");
    assert!(text.contains("backup: none kept"), "{text}");
    assert_eq!(backup_runs(&host.backups), Vec::<PathBuf>::new());
}

/// Directories under `dir` (and `dir`) open to everyone, files read-only to everyone.
fn read_only_to_others(dir: &Path) {
    let mode = |path: &Path, mode: u32| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    mode(dir, 0o755);
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let kind = entry.file_type().unwrap();
        if kind.is_dir() {
            read_only_to_others(&entry.path());
        } else if kind.is_file() {
            mode(&entry.path(), 0o444);
        }
    }
}
