//! `ferrite serve --config`: every shipped profile starts a broker that serves clients, and a
//! bad file is refused before anything starts, naming the field, its bounds and the line.

mod common;

use common::Broker;
use std::path::Path;
use std::process::Command;

fn profile(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tuning")
        .join(format!("{name}.toml"))
        .display()
        .to_string()
}

#[test]
fn every_shipped_profile_serves_a_produce_and_a_fetch() {
    for name in ["default", "throughput", "latency", "small-host"] {
        let path = profile(name);
        let broker = Broker::start(&["--config", &path, "--cores", "1"]);
        common::kcat(&broker, &["-t", "tuned", "-P"], Some(b"a\nb\n"));
        let got = common::kcat_consume(&broker, "tuned", "%s\n");
        assert_eq!(got, vec!["a", "b"], "profile {name}");
    }
}

fn refused(text: &str) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.toml");
    std::fs::write(&file, text).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ferrite"));
    cmd.arg("serve")
        .arg("--config")
        .arg(&file)
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .args(["--listen", "127.0.0.1:0", "--metrics", "off"]);
    let out = common::run(cmd, None, common::START_TIMEOUT);
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        !dir.path().join("data").exists(),
        "nothing starts on a bad file: {stderr}"
    );
    (out.status.code(), stderr)
}

#[test]
fn a_bad_value_is_refused_with_its_field_bounds_and_line() {
    let cases = [
        (
            "[shards]\nio_mode = \"buffered\"\nwrites_in_flight = 0\n",
            "bad.toml:3: shards.writes_in_flight: 0 is outside [1, 64]",
        ),
        (
            "[core.0]\nuring_entries = 100000\n",
            "bad.toml:2: core.0.uring_entries: 100000 is outside [16, 4096]",
        ),
        (
            "[shards]\nwrite_behind = 5\n",
            "bad.toml:2: shards.write_behind: unknown field",
        ),
        (
            "[shards]\ncontrol_core = 4095\n",
            "shards.control_core: CPU 4095 is not online",
        ),
    ];
    for (text, message) in cases {
        let (code, stderr) = refused(text);
        assert_eq!(code, Some(2), "{stderr}");
        assert!(stderr.contains(message), "{stderr}");
    }
}

/// A broker started with a tuning file of `text` (and `extra` flags); the directory holding
/// the file lives as long as the returned guard.
fn start_with_tuning(text: &str, extra: &[&str]) -> (Broker, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tuning.toml");
    std::fs::write(&file, text).unwrap();
    let config = file.display().to_string();
    let mut args = vec!["--config", config.as_str()];
    args.extend_from_slice(extra);
    (Broker::start(&args), dir)
}

/// A `[core.N]` override takes effect: shard 1 writes O_DIRECT while shard 0 stays buffered,
/// and records produced over both shards read back whole, before and after a restart.
#[test]
fn a_per_core_override_runs_one_shard_in_direct_mode() {
    let (mut broker, _dir) = start_with_tuning(
        "[shards]\ncores = [0, 1]\nio_mode = \"buffered\"\n\n[core.1]\nio_mode = \"direct\"\ncache_bytes = 1048576\n\n[broker]\n\"num.partitions\" = 4\n",
        &[],
    );
    let input: Vec<String> = (0..400).map(|i| format!("record-{i:03}")).collect();
    let mut stdin = input.join("\n").into_bytes();
    stdin.push(b'\n');
    common::kcat(
        &broker,
        &["-t", "mixed", "-P", "-X", "sticky.partitioning.linger.ms=0"],
        Some(&stdin),
    );
    let sorted = |mut v: Vec<String>| {
        v.sort();
        v
    };
    let got = sorted(common::kcat_consume(&broker, "mixed", "%s\n"));
    assert_eq!(got, input, "every record back");
    broker.stop();
    broker.restart();
    let got = sorted(common::kcat_consume(&broker, "mixed", "%s\n"));
    assert_eq!(got, input, "every record back after a restart");
    // Only a direct-mode shard has a batch cache, and its series say which shard that is.
    let (_, metrics) = common::http_get(&broker.metrics_addr, "/metrics");
    assert!(
        metrics.contains("ferrite_batch_cache_used_bytes{shard=\"1\"}"),
        "{metrics}"
    );
    assert!(
        !metrics.contains("ferrite_batch_cache_used_bytes{shard=\"0\"}"),
        "{metrics}"
    );
}

/// `control_core` pins the broker's main thread (and the control thread it starts); the shard
/// threads stay on their own cores.
#[test]
fn control_core_pins_the_non_shard_threads() {
    let (broker, _dir) = start_with_tuning("[shards]\ncores = [0, 1]\ncontrol_core = 1\n", &[]);
    let mut seen = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{}/task", broker.pid())).unwrap() {
        let task = task.unwrap().path();
        let name = std::fs::read_to_string(task.join("comm")).unwrap();
        let status = std::fs::read_to_string(task.join("status")).unwrap();
        let cpus = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .unwrap()
            .trim()
            .to_string();
        seen.push((name.trim().to_string(), cpus));
    }
    assert!(
        seen.contains(&("ferrite".to_string(), "1".to_string())),
        "{seen:?}"
    );
    assert!(
        seen.contains(&("shard-0-1".to_string(), "0".to_string())),
        "{seen:?}"
    );
    assert!(
        seen.contains(&("shard-1-2".to_string(), "1".to_string())),
        "{seen:?}"
    );
}

/// `inline_write_bytes_max` decides who makes a small write: the shard thread itself by
/// default, the ring's worker threads when it is 0. The records read back either way, also
/// after a restart.
#[test]
fn small_writes_are_made_by_the_shard_thread_unless_the_limit_is_zero() {
    for limit in [65_536, 0] {
        let (mut broker, _dir) = start_with_tuning(
            &format!("[shards]\ncores = [0]\ninline_write_bytes_max = {limit}\n"),
            &["--cores", "1"],
        );
        let input: Vec<String> = (0..200).map(|i| format!("inline-{i:03}")).collect();
        let mut stdin = input.join("\n").into_bytes();
        stdin.push(b'\n');
        common::kcat(&broker, &["-t", "written", "-P"], Some(&stdin));
        let (_, metrics) = common::http_get(&broker.metrics_addr, "/metrics");
        let count = |name: &str| -> u64 {
            let prefix = format!("{name}{{shard=\"0\"}} ");
            metrics
                .lines()
                .find_map(|l| l.strip_prefix(prefix.as_str()))
                .unwrap_or_else(|| panic!("{name} in {metrics}"))
                .parse()
                .unwrap()
        };
        let (inline, ring) = (
            count("ferrite_shard_inline_writes_total"),
            count("ferrite_shard_ring_writes_total"),
        );
        if limit > 0 {
            assert!(
                inline > 0 && ring == 0,
                "limit {limit}: {inline} inline, {ring} ring"
            );
        } else {
            assert!(
                inline == 0 && ring > 0,
                "limit 0: {inline} inline, {ring} ring"
            );
        }
        broker.stop();
        broker.restart();
        assert_eq!(common::kcat_consume(&broker, "written", "%s\n"), input);
    }
}

/// `uring_entries` sizes each shard's own ring (seen in the ring's fdinfo) and the socket buffer
/// sizes reach client connections (seen by `ss`, which shows the kernel's doubled values).
#[test]
fn ring_depth_and_socket_buffers_take_effect() {
    let (broker, _dir) = start_with_tuning(
        "[shards]\ncores = [0]\nuring_entries = 1024\nsocket_send_buffer_bytes = 1048576\nsocket_receive_buffer_bytes = 524288\n",
        &["--cores", "1"],
    );
    common::kcat(&broker, &["-t", "sized", "-P"], Some(b"x\n"));
    let pid = broker.pid();
    let mut masks = Vec::new();
    for fd in std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap() {
        let fd = fd.unwrap().path();
        let is_ring =
            std::fs::read_link(&fd).is_ok_and(|l| l.to_string_lossy().contains("io_uring"));
        if is_ring {
            let info = std::fs::read_to_string(format!(
                "/proc/{pid}/fdinfo/{}",
                fd.file_name().unwrap().to_string_lossy()
            ))
            .unwrap();
            masks.extend(
                info.lines()
                    .filter(|l| l.starts_with("SqMask"))
                    .map(str::to_string),
            );
        }
    }
    assert!(
        masks.iter().any(|m| m.ends_with("0x3ff")),
        "a 1024-entry ring: {masks:?}"
    );
    // A connection held open while `ss` looks at the broker's side of it.
    let _client = std::net::TcpStream::connect(&broker.addr).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(200));
    let out = std::process::Command::new("ss")
        .args(["-tmn", "state", "established"])
        .arg(format!("( sport = :{} )", broker.port))
        .output()
        .expect("ss (iproute2)");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("rb1048576") && text.contains("tb2097152"),
        "{text}"
    );
}
