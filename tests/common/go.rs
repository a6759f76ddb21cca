//! Go test clients: `tests/clients/<name>/*.go`, a `package main` using only the standard
//! library and Debian's packaged Go libraries (`golang-github-shopify-sarama-dev`, ...).
//!
//! Each is built once with Debian's Go, offline in GOPATH mode, into `target/tmp/go/`. The
//! binary is named by a hash of its sources, so an edited client is rebuilt and a built one
//! never is; a file lock keeps the test processes nextest runs side by side from building it
//! at the same time, and the build goes to a temporary name renamed into place when whole.

use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::fs::File;
use std::hash::{Hash, Hasher};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Output, Stdio};
use std::sync::{mpsc, Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Where Debian's golang-*-dev packages put their sources.
const GOPATH: &str = "/usr/share/gocode";
/// A cold build of Sarama with cgo zstd takes about 10 s on this machine.
const BUILD_TIMEOUT: Duration = Duration::from_secs(300);

/// The built binary of `tests/clients/<client>`, building it if this test process has not.
pub fn binary(client: &str) -> PathBuf {
    static BUILT: OnceLock<Mutex<HashMap<String, PathBuf>>> = OnceLock::new();
    let built = BUILT.get_or_init(Default::default);
    let mut built = built.lock().unwrap_or_else(|e| e.into_inner());
    built
        .entry(client.to_string())
        .or_insert_with(|| build(client))
        .clone()
}

fn build(client: &str) -> PathBuf {
    let src = super::workspace_root().join("tests/clients").join(client);
    let out_dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("go");
    std::fs::create_dir_all(&out_dir).expect("target/tmp/go");
    let bin = out_dir.join(format!("{client}-{:016x}", source_hash(&src)));
    if bin.exists() {
        return bin;
    }
    let _lock = FileLock::exclusive(&out_dir.join("build.lock"));
    if bin.exists() {
        return bin; // another test process built it while this one waited
    }
    let partial = out_dir.join(format!("{client}.{}.partial", std::process::id()));
    let mut cmd = Command::new("go");
    cmd.arg("build")
        .arg("-o")
        .arg(&partial)
        .arg(".")
        .current_dir(&src)
        .env("GO111MODULE", "off")
        .env("GOPATH", GOPATH)
        .env("GOPROXY", "off")
        .env("GOFLAGS", "")
        .env("GOENV", "off")
        .env("GOCACHE", out_dir.join("cache"));
    assert_go_installed(client);
    let out = super::run(cmd, None, BUILD_TIMEOUT);
    assert!(
        out.status.success(),
        "go build of tests/clients/{client} failed ({}; scripts/test installs the Go packages \
         it needs):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::rename(&partial, &bin).expect("move the built client into place");
    remove_older_builds(&out_dir, client, &bin);
    bin
}

/// Builds of earlier sources of `client` (a process still running one keeps its copy).
fn remove_older_builds(out_dir: &Path, client: &str, current: &Path) {
    let prefix = format!("{client}-");
    for entry in std::fs::read_dir(out_dir).into_iter().flatten().flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if name.to_string_lossy().starts_with(&prefix) && path != current {
            let _ = std::fs::remove_file(path);
        }
    }
}

fn assert_go_installed(client: &str) {
    let found = Command::new("go")
        .arg("version")
        .stdout(Stdio::null())
        .status();
    assert!(
        found.is_ok_and(|s| s.success()),
        "no Go toolchain for tests/clients/{client}: run scripts/test (it installs golang-go and \
         golang-github-shopify-sarama-dev from apt)"
    );
}

/// A hash of every `.go` file in `dir`, in name order.
fn source_hash(dir: &Path) -> u64 {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "go"))
        .collect();
    files.sort();
    let mut h = DefaultHasher::new();
    for f in files {
        f.file_name().hash(&mut h);
        std::fs::read(&f).unwrap().hash(&mut h);
    }
    h.finish()
}

/// flock(2) on a file, held until drop.
struct FileLock(File);

impl FileLock {
    fn exclusive(path: &Path) -> FileLock {
        let file = File::create(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) };
        assert_eq!(rc, 0, "flock {}", path.display());
        FileLock(file)
    }
}

impl Drop for FileLock {
    fn drop(&mut self) {
        unsafe { libc::flock(self.0.as_raw_fd(), libc::LOCK_UN) };
    }
}

/// Runs a client to completion (killed after `timeout`), with `stdin` if given.
pub fn run(client: &str, args: &[String], stdin: Option<Vec<u8>>, timeout: Duration) -> Output {
    let mut cmd = Command::new(binary(client));
    cmd.args(args);
    super::run(cmd, stdin, timeout)
}

/// A client running beside the test: its stdout lines are collected as they come, its
/// stdin stays open until `close_stdin` (the clients' "stop now"), and it is killed on drop.
pub struct Background {
    what: String,
    child: Child,
    stdin: Option<ChildStdin>,
    incoming: mpsc::Receiver<String>,
    lines: Vec<String>,
    stdout_closed: bool,
    stderr: Arc<Mutex<Vec<u8>>>,
}

/// How a background client ended.
pub struct Finished {
    pub status: ExitStatus,
    pub lines: Vec<String>,
    pub stderr: String,
}

impl Background {
    pub fn spawn(client: &str, args: &[String]) -> Background {
        let what = format!("{client} {}", args.join(" "));
        let mut child = Command::new(binary(client))
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let (tx, incoming) = mpsc::channel();
        std::thread::spawn(move || {
            for line in stdout.lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let mut pipe = child.stderr.take().unwrap();
        let sink = stderr.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            while let Ok(n @ 1..) = pipe.read(&mut buf) {
                sink.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        Background {
            what,
            stdin: child.stdin.take(),
            child,
            incoming,
            lines: Vec::new(),
            stdout_closed: false,
            stderr,
        }
    }

    /// Every stdout line so far (takes in what has arrived, without waiting).
    pub fn lines(&mut self) -> &[String] {
        loop {
            match self.incoming.try_recv() {
                Ok(line) => self.lines.push(line),
                Err(mpsc::TryRecvError::Empty) => break,
                Err(mpsc::TryRecvError::Disconnected) => {
                    self.stdout_closed = true;
                    break;
                }
            }
        }
        &self.lines
    }

    pub fn close_stdin(&mut self) {
        if let Some(mut s) = self.stdin.take() {
            let _ = s.flush();
        }
    }

    /// What it printed and logged so far, for failure messages.
    pub fn report(&mut self) -> String {
        self.lines();
        let stderr = String::from_utf8_lossy(&self.stderr.lock().unwrap()).into_owned();
        format!(
            "--- {} ---\nstdout:\n{}\nstderr:\n{stderr}",
            self.what,
            self.lines.join("\n")
        )
    }

    /// Waits for it to exit (killing it after `timeout`, which fails the test).
    pub fn finish(mut self, timeout: Duration) -> Finished {
        self.close_stdin();
        let deadline = Instant::now() + timeout;
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            if Instant::now() > deadline {
                panic!("did not exit within {timeout:?}\n{}", self.report());
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        // Stdout is whole once the reader thread has seen its end.
        let drained = Instant::now() + Duration::from_secs(5);
        while !self.stdout_closed && Instant::now() < drained {
            self.lines();
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(Duration::from_millis(20)); // the stderr thread's last read
        let stderr = String::from_utf8_lossy(&self.stderr.lock().unwrap()).into_owned();
        Finished {
            status,
            lines: std::mem::take(&mut self.lines),
            stderr,
        }
    }

    /// True once it has exited and everything it printed has been taken in.
    fn ended(&mut self) -> bool {
        self.lines();
        self.stdout_closed && self.child.try_wait().unwrap().is_some()
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits until `done` holds for the lines of `procs` (in their order), failing the test with
/// everything they printed when `timeout` passes, or as soon as one has exited without it.
pub fn wait_until(
    procs: &mut [&mut Background],
    timeout: Duration,
    what: &str,
    done: impl Fn(&[&[String]]) -> bool,
) {
    let deadline = Instant::now() + timeout;
    loop {
        for p in procs.iter_mut() {
            p.lines();
        }
        let views: Vec<&[String]> = procs.iter().map(|p| p.lines.as_slice()).collect();
        if done(&views) {
            return;
        }
        let exited = procs.iter_mut().any(|p| p.ended());
        if exited || Instant::now() > deadline {
            let reports: Vec<String> = procs.iter_mut().map(|p| p.report()).collect();
            let why = if exited {
                "a client exited".to_string()
            } else {
                format!("{timeout:?} passed")
            };
            panic!("{why} before {what}\n{}", reports.join("\n"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
