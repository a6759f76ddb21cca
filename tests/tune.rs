//! `ferrite tune --check` on this machine: it reads the host, changes nothing, names every
//! check, and says why for each value it cannot read.

mod common;

use std::process::Command;

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

/// Without root (as `nobody`, through util-linux's setpriv, when the tests run as root) it
/// still runs to the end.
#[test]
fn tune_check_runs_without_privileges() {
    // SAFETY: geteuid has no preconditions.
    let mut cmd = if unsafe { libc::geteuid() } == 0 {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
            .arg(env!("CARGO_BIN_EXE_ferrite"));
        c
    } else {
        Command::new(env!("CARGO_BIN_EXE_ferrite"))
    };
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
