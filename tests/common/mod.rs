//! Test harness: the real broker binary on a free loopback port, real clients beside it.
//!
//! Every process started here is stopped on drop (SIGKILL if it did not stop by itself) and
//! every wait has a bound, so a failing test never hangs or leaves processes behind.

#![allow(dead_code)]

pub mod cluster;
pub mod disk;
pub mod eos;
pub mod go;
pub mod quotas;
pub mod requests;
pub mod tls;
pub mod wire;
pub mod zookeeper;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

pub const START_TIMEOUT: Duration = Duration::from_secs(20);

/// The workspace's root: this harness serves the broker's tests (`tests/`) and the bench's
/// (`bench/tests/`, which include it by path).
pub fn workspace_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    if manifest.join("tests/common").is_dir() {
        manifest.to_path_buf()
    } else {
        manifest.parent().expect("a workspace member").to_path_buf()
    }
}

/// The broker binary: cargo's own path for the broker's tests; beside the test binary
/// (`target/<profile>/ferrite`) for other members' tests, which cargo builds it for.
pub fn ferrite_binary() -> PathBuf {
    if let Some(bin) = option_env!("CARGO_BIN_EXE_ferrite") {
        return PathBuf::from(bin);
    }
    let exe = std::env::current_exe().expect("test binary path");
    let bin = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("the target directory")
        .join("ferrite");
    assert!(
        bin.exists(),
        "{} is missing: build the broker (cargo build -p ferrite)",
        bin.display()
    );
    bin
}

/// Runs `ferrite serve` on a fresh data directory with `args` added, which must make it refuse
/// to start; its stderr.
pub fn serve_refused(args: &[&str]) -> String {
    let tmp = tempfile::tempdir().expect("temp dir");
    let out = Command::new(ferrite_binary())
        .args(["serve", "--data-dir"])
        .arg(tmp.path().join("data"))
        .args(["--listen", "127.0.0.1:0", "--metrics", "off"])
        .args(args)
        .output()
        .expect("the broker binary runs");
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!out.status.success(), "the broker started: {stderr}");
    stderr
}
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(90);

/// A loopback port no other test of this run has been given. The kernel's free port is only
/// free until someone binds it, and tests run in parallel processes whose brokers bind later
/// (with SO_REUSEPORT, two brokers could even share one): each port handed out is claimed by
/// creating a file named after it, so no two test processes get the same one. Claims older
/// than `PORT_CLAIM_TTL` are from earlier runs and are taken over.
pub fn free_port() -> u16 {
    const PORT_CLAIM_TTL: Duration = Duration::from_secs(30 * 60);
    let claims = std::env::temp_dir().join("ferrite-test-ports");
    std::fs::create_dir_all(&claims).expect("port claims directory");
    loop {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port");
        let claim = claims.join(port.to_string());
        let stale = std::fs::metadata(&claim)
            .and_then(|m| m.modified())
            .is_ok_and(|t| t.elapsed().unwrap_or_default() > PORT_CLAIM_TTL);
        if stale {
            let _ = std::fs::remove_file(&claim);
        }
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&claim)
        {
            Ok(_) => return port,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => panic!("claiming port {port}: {e}"),
        }
    }
}

pub struct Broker {
    child: Option<Child>,
    pub addr: String,
    pub port: u16,
    /// The Prometheus endpoint (`--metrics`), on its own free port.
    pub metrics_addr: String,
    pub data_dir: PathBuf,
    log_path: PathBuf,
    extra_args: Vec<String>,
    extra_env: Vec<(String, String)>,
    _tmp: Option<tempfile::TempDir>,
}

impl Broker {
    /// A broker on a fresh data directory with two shards.
    pub fn start(args: &[&str]) -> Broker {
        let tmp = tempfile::tempdir().expect("temp dir");
        let data = tmp.path().join("data");
        let mut b = Broker::start_at(&data, free_port(), args);
        b._tmp = Some(tmp);
        b
    }

    pub fn start_at(data_dir: &Path, port: u16, args: &[&str]) -> Broker {
        Broker::start_with_env(data_dir, port, args, &[])
    }

    /// As `start_at`, with these environment variables set for the broker.
    pub fn start_with_env(
        data_dir: &Path,
        port: u16,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Broker {
        let log_path = data_dir.with_extension(format!("{port}.log"));
        Broker::start_logging_to(data_dir, &log_path, port, args, env)
    }

    /// As `start_with_env`, with the broker's log (stderr) in `log_path`.
    pub fn start_logging_to(
        data_dir: &Path,
        log_path: &Path,
        port: u16,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Broker {
        let log_path = log_path.to_path_buf();
        let mut b = Broker {
            child: None,
            addr: format!("127.0.0.1:{port}"),
            port,
            metrics_addr: format!("127.0.0.1:{}", free_port()),
            data_dir: data_dir.to_path_buf(),
            log_path,
            extra_args: args.iter().map(|s| s.to_string()).collect(),
            extra_env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            _tmp: None,
        };
        b.launch();
        b
    }

    fn launch(&mut self) {
        std::fs::create_dir_all(self.data_dir.parent().unwrap()).unwrap();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log_path)
            .expect("broker log file");
        let mut cmd = Command::new(ferrite_binary());
        cmd.arg("serve").arg("--data-dir").arg(&self.data_dir);
        // With Kafka's `listeners` setting the test names every listener itself, the
        // PLAINTEXT one on `addr` among them.
        if !self.extra_args.iter().any(|a| a.starts_with("listeners=")) {
            cmd.arg("--listen").arg(&self.addr);
        }
        if !self.extra_args.iter().any(|a| a == "--cores") {
            cmd.args(["--cores", "2"]);
        }
        if !self.extra_args.iter().any(|a| a == "--metrics") {
            cmd.args(["--metrics", &self.metrics_addr]);
        }
        cmd.args(&self.extra_args)
            .envs(self.extra_env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(log));
        // Ready is this process saying so and the port accepting: right after kill -9, the
        // dead broker's listeners may still accept for some milliseconds.
        let served_before = self.times_served();
        self.child = Some(cmd.spawn().expect("start ferrite"));
        let deadline = Instant::now() + START_TIMEOUT;
        while self.times_served() == served_before || TcpStream::connect(&self.addr).is_err() {
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                panic!("broker exited at start with {status}:\n{}", self.log());
            }
            assert!(
                Instant::now() < deadline,
                "broker did not listen within {START_TIMEOUT:?}:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// How many times a broker has logged that it serves, in this broker's log.
    fn times_served(&self) -> usize {
        self.log().matches("ferrite is serving").count()
    }

    /// Starts the broker again on the same data directory and port.
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "stop the broker before restarting it");
        self.launch();
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// The value of metric `name` summed over its series (the shards), from its endpoint.
    pub fn metric(&self, name: &str) -> f64 {
        self.metric_with(name, "")
    }

    /// The value of metric `name` summed over the series whose labels contain `label` (such
    /// as `target="remote"`).
    pub fn metric_with(&self, name: &str, label: &str) -> f64 {
        let (_, body) = http_get(&self.metrics_addr, "/metrics");
        body.lines()
            .filter(|l| l.starts_with(&format!("{name}{{")) && l.contains(label))
            .map(|l| {
                let value = l.rsplit(' ').next().unwrap();
                value
                    .parse::<f64>()
                    .unwrap_or_else(|_| panic!("not a value: {l}"))
            })
            .sum()
    }

    /// SIGTERM, then wait for a graceful exit (SIGKILL after 20 s).
    pub fn stop(&mut self) -> ExitStatus {
        let mut child = self.child.take().expect("running");
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        wait_or_kill(&mut child, Duration::from_secs(20))
    }

    pub fn kill9(&mut self) {
        let mut child = self.child.take().expect("running");
        unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
        let _ = child.wait();
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// SIGSTOP: the process stops answering anyone (ZooKeeper included) until `resume`.
    pub fn pause(&self) {
        unsafe { libc::kill(self.pid() as i32, libc::SIGSTOP) };
    }

    pub fn resume(&self) {
        unsafe { libc::kill(self.pid() as i32, libc::SIGCONT) };
    }

    /// Waits up to `timeout` for the broker to exit by itself; its status, or `None` if it is
    /// still running.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Some(status) = self.child.as_mut().expect("started").try_wait().unwrap() {
                self.child = None;
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(c) => c.try_wait().unwrap().is_none(),
            None => false,
        }
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            // A paused process still dies of SIGKILL; SIGCONT first keeps its log whole.
            unsafe { libc::kill(c.id() as i32, libc::SIGCONT) };
            let _ = c.kill();
            let _ = c.wait();
        }
        if std::thread::panicking() {
            eprintln!(
                "--- broker log ({}) ---\n{}",
                self.log_path.display(),
                self.log()
            );
        }
    }
}

fn wait_or_kill(child: &mut Child, timeout: Duration) -> ExitStatus {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            return child.wait().unwrap();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs a command with `stdin`, killing it after `timeout`.
pub fn run(mut cmd: Command, stdin: Option<Vec<u8>>, timeout: Duration) -> Output {
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let program = format!("{cmd:?}");
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
    let writer = stdin.map(|input| {
        let mut pipe = child.stdin.take().unwrap();
        std::thread::spawn(move || {
            let _ = pipe.write_all(&input);
        })
    });
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let out_reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out.read_to_end(&mut v);
        v
    });
    let err_reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err.read_to_end(&mut v);
        v
    });
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            let stderr = String::from_utf8_lossy(&err_reader.join().unwrap()).to_string();
            panic!("{program} did not finish within {timeout:?}; stderr:\n{stderr}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    if let Some(w) = writer {
        let _ = w.join();
    }
    Output {
        status,
        stdout: out_reader.join().unwrap(),
        stderr: err_reader.join().unwrap(),
    }
}

/// kcat with `args`; panics with its output if it fails.
pub fn kcat(broker: &Broker, args: &[&str], stdin: Option<&[u8]>) -> Vec<u8> {
    let mut cmd = Command::new("kcat");
    cmd.arg("-b").arg(&broker.addr).args(args);
    let out = run(cmd, stdin.map(|s| s.to_vec()), CLIENT_TIMEOUT);
    assert!(
        out.status.success(),
        "kcat {args:?} failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// Every message of `topic` from the beginning, one line each in kcat's `-f` format (which
/// must end in a newline).
/// Reads `count` records of `topic` as a member of consumer group `group` (`kcat -G`, from
/// the earliest offset when the group has none committed): one value per line.
pub fn kcat_group_consume(broker: &Broker, group: &str, topic: &str, count: usize) -> Vec<String> {
    let count = count.to_string();
    let args = [
        "-G",
        group,
        "-X",
        "auto.offset.reset=earliest",
        "-c",
        &count,
        "-q",
        "-f",
        "%s\n",
        topic,
    ];
    String::from_utf8(kcat(broker, &args, None))
        .unwrap()
        .lines()
        .map(String::from)
        .collect()
}

/// `m{from}` to `m{to - 1}`, one per line: numbered records for `kcat -P`.
pub fn numbered_lines(from: usize, to: usize) -> Vec<u8> {
    (from..to)
        .flat_map(|i| format!("m{i}\n").into_bytes())
        .collect()
}

pub fn kcat_consume(broker: &Broker, topic: &str, format: &str) -> Vec<String> {
    kcat_consume_with(broker, topic, format, &[])
}

/// `kcat_consume` with more kcat arguments (`-X isolation.level=read_committed`, say).
pub fn kcat_consume_with(
    broker: &Broker,
    topic: &str,
    format: &str,
    extra: &[&str],
) -> Vec<String> {
    let mut args = vec![
        "-C",
        "-t",
        topic,
        "-o",
        "beginning",
        "-e",
        "-q",
        "-f",
        format,
    ];
    args.extend_from_slice(extra);
    let out = kcat(broker, &args, None);
    String::from_utf8(out)
        .expect("utf-8 output")
        .lines()
        .map(String::from)
        .collect()
}

/// Every record in a partition's segment files under `data_dir`, as (offset, value), read
/// from disk (a replica's log, leader or not; run it on a stopped broker).
pub fn records_on_disk(data_dir: &Path, topic: &str, partition: i32) -> Vec<(i64, String)> {
    use ferrite_shards::batch::{build::decode_record_section, records::record_section};
    let dir = data_dir.join(format!("{topic}-{partition}"));
    let mut logs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    logs.sort();
    let mut out = Vec::new();
    for log in logs {
        let bytes = bytes::Bytes::from(std::fs::read(&log).unwrap());
        for b in ferrite_shards::batch::split_batches(&bytes).expect("whole batches") {
            let h = ferrite_shards::batch::BatchHeader::parse(&b).unwrap();
            let section = bytes::Bytes::from(record_section(&b, 1 << 26).unwrap());
            for r in decode_record_section(&h, &section).unwrap() {
                let value = r.value.map(|v| String::from_utf8_lossy(&v).into_owned());
                out.push((r.offset, value.unwrap_or_default()));
            }
        }
    }
    out
}

pub fn python_path() -> PathBuf {
    if let Ok(p) = std::env::var("FERRITE_PYTHON") {
        return PathBuf::from(p);
    }
    let venv = workspace_root().join(".venv/bin/python");
    assert!(
        venv.exists(),
        "no Python with the Kafka clients: run scripts/test (it creates .venv), or set FERRITE_PYTHON"
    );
    venv
}

/// Runs `tests/clients/<script>` with the venv's Python; panics with its output if it fails.
pub fn python(script: &str, args: &[&str]) -> String {
    let path = workspace_root().join("tests/clients").join(script);
    let mut cmd = Command::new(python_path());
    cmd.arg(&path).args(args);
    let out = run(cmd, None, CLIENT_TIMEOUT);
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{script} {args:?} failed: {}\nstdout:\n{stdout}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// `GET path` over HTTP/1.1 (the metrics endpoint); returns the head and the body.
pub fn http_get(addr: &str, path: &str) -> (String, String) {
    let mut s = TcpStream::connect(addr).expect("HTTP endpoint reachable");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).expect("a whole response");
    let (head, body) = text.split_once("\r\n\r\n").expect("an HTTP response");
    (head.to_string(), body.to_string())
}
