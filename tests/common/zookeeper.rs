//! A real ZooKeeper for integration tests: Debian's `zookeeper` package (3.8), one standalone
//! server per test on a free loopback port, its data and log in a temp directory of its own.
//!
//! Like `Broker`, every process started here is stopped on drop (SIGTERM, SIGKILL if it has not
//! exited within `STOP_TIMEOUT`) and every wait is bounded. `scripts/test` installs the package.
//!
//! Talks to ZooKeeper's four-letter words over a plain `TcpStream`, so no `nc` is needed.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Installed by Debian's `zookeeper` (via `libzookeeper-java`); its manifest names the rest of
/// the classpath.
const ZOOKEEPER_JAR: &str = "/usr/share/java/zookeeper.jar";
/// An SLF4J binding, so the server's log reaches `zookeeper.log` (without one SLF4J falls back to
/// a no-op logger and a failing start leaves nothing to read). `libslf4j-java` is a dependency
/// of `libzookeeper-java`; Java ignores a class-path entry that does not exist.
const SLF4J_SIMPLE_JAR: &str = "/usr/share/java/slf4j-simple.jar";

/// Bound on start-up; serving took 0.7–1.3 s here (two cores, 2026-12-01).
pub const START_TIMEOUT: Duration = Duration::from_secs(30);
/// Bound on one four-letter word, connect to last byte; a silent server took 3.06–3.17 s.
pub const FOUR_LETTER_TIMEOUT: Duration = Duration::from_secs(3);
/// How long SIGTERM has before SIGKILL; ZooKeeper usually exits within half a second.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(3);

/// ZooKeeper's clock ticks every `TICK_TIME_MS`; the session tracker checks for expired sessions
/// once per tick, so a dead client's session (and its ephemeral nodes) goes at most one tick
/// after its timeout. 500 ms (MACHINE.md uses 1000) keeps session-expiry tests tight.
pub const TICK_TIME_MS: u32 = 500;
/// Bounds on the session timeout a client may negotiate, set explicitly because the defaults
/// follow the tick (2 and 20 ticks: 1 s to 10 s here). A broker asking for 4–6 s gets it.
pub const SESSION_TIMEOUT_MS_MIN: u32 = 1_000;
pub const SESSION_TIMEOUT_MS_MAX: u32 = 30_000;

/// A standalone ZooKeeper server, a child process of the test.
pub struct ZooKeeper {
    child: Option<Child>,
    port: u16,
    log_path: PathBuf,
    _tmp: tempfile::TempDir,
}

impl ZooKeeper {
    /// Starts a server on a free loopback port and returns once it serves (`ruok` answers `imok`
    /// and `srvr` names its mode); panics with its log if it exits or does not serve within
    /// `START_TIMEOUT`.
    ///
    /// The server is also sent SIGKILL if the thread that started it exits (PR_SET_PDEATHSIG),
    /// so a test process killed by nextest's timeout does not leave it behind; keep a
    /// `ZooKeeper` on the thread that started it.
    pub fn start() -> ZooKeeper {
        assert!(
            Path::new(ZOOKEEPER_JAR).exists(),
            "{ZOOKEEPER_JAR} is missing: run scripts/test (it installs Debian's zookeeper)"
        );
        let tmp = tempfile::tempdir().expect("temp dir");
        let port = super::free_port();
        let data_dir = tmp.path().join("data");
        std::fs::create_dir(&data_dir).expect("zookeeper data dir");
        let cfg_path = tmp.path().join("zoo.cfg");
        std::fs::write(&cfg_path, config(&data_dir, port)).expect("write zoo.cfg");
        let log_path = tmp.path().join("zookeeper.log");
        let log = std::fs::File::create(&log_path).expect("zookeeper log file");
        let log_err = log.try_clone().expect("zookeeper log file");

        let mut cmd = Command::new("java");
        cmd.arg("-Xmx256m")
            .arg("-Dorg.slf4j.simpleLogger.showDateTime=true")
            .arg("-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS")
            .arg("-cp")
            .arg(format!("{ZOOKEEPER_JAR}:{SLF4J_SIMPLE_JAR}"))
            .arg("org.apache.zookeeper.server.quorum.QuorumPeerMain")
            .arg(&cfg_path)
            .current_dir(tmp.path())
            .stdin(Stdio::null())
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(log_err));
        // SAFETY: prctl is async-signal-safe and touches no memory of the parent.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let child = cmd.spawn().expect("start java (ZooKeeper)");
        let mut zk = ZooKeeper {
            child: Some(child),
            port,
            log_path,
            _tmp: tmp,
        };
        zk.wait_until_ok();
        zk
    }

    fn wait_until_ok(&mut self) {
        let started = Instant::now();
        let deadline = started + START_TIMEOUT;
        loop {
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                panic!("zookeeper exited at start with {status}:\n{}", self.log());
            }
            // `imok` only says the process is up: for a few hundred ms more, requests get
            // "This ZooKeeper instance is not currently serving requests". `srvr` names the mode
            // once it serves.
            if self.four_letter("ruok") == "imok" && self.four_letter("srvr").contains("Mode: ") {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "zookeeper did not serve within {START_TIMEOUT:?}:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Runs one ZooKeeper CLI command (`create /path data`, `get /path`) with the jar's own
    /// `ZooKeeperMain`, as an operator's zkCli.sh would; returns its output and whether it
    /// succeeded.
    pub fn cli(&self, args: &[&str]) -> (bool, String) {
        let out = Command::new("java")
            .arg("-Xmx64m")
            .arg("-cp")
            .arg(format!("{ZOOKEEPER_JAR}:{SLF4J_SIMPLE_JAR}"))
            .arg("org.apache.zookeeper.ZooKeeperMain")
            .arg("-server")
            .arg(self.connect_string())
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("run ZooKeeperMain");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.success(), text)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// "127.0.0.1:PORT", as a ZooKeeper client (or `zookeeper.connect`) wants it.
    pub fn connect_string(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Sends a four-letter word (`ruok`, `srvr`, `mntr`, `dump` for sessions and their
    /// ephemeral nodes, `cons`, ...) and returns the answer. Returns what arrived within
    /// `FOUR_LETTER_TIMEOUT`: empty if the server is stopped, paused or not up yet.
    pub fn four_letter(&self, cmd: &str) -> String {
        assert_eq!(cmd.len(), 4, "four-letter words have four letters: {cmd:?}");
        let addr = SocketAddr::from(([127, 0, 0, 1], self.port));
        let deadline = Instant::now() + FOUR_LETTER_TIMEOUT;
        let Ok(mut stream) = TcpStream::connect_timeout(&addr, FOUR_LETTER_TIMEOUT) else {
            return String::new();
        };
        let _ = stream.set_write_timeout(Some(FOUR_LETTER_TIMEOUT));
        if stream.write_all(cmd.as_bytes()).is_err() {
            return String::new();
        }
        // ZooKeeper closes the connection after the answer; read to EOF or the deadline.
        let mut answer = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || stream.set_read_timeout(Some(left)).is_err() {
                break;
            }
            match stream.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => answer.extend_from_slice(&buf[..n]),
            }
        }
        String::from_utf8_lossy(&answer).into_owned()
    }

    /// SIGSTOP: the server stops answering, though the kernel still accepts connections to its
    /// port. Its clock does not stop: sessions keep ageing and may expire on `resume`.
    pub fn pause(&mut self) {
        self.signal(libc::SIGSTOP);
    }

    /// SIGCONT after `pause`.
    pub fn resume(&mut self) {
        self.signal(libc::SIGCONT);
    }

    fn signal(&self, sig: libc::c_int) {
        let child = self.child.as_ref().expect("zookeeper running");
        let rc = unsafe { libc::kill(child.id() as i32, sig) };
        assert_eq!(rc, 0, "kill({}, {sig}) failed", child.id());
    }

    /// SIGTERM (after SIGCONT, in case it is paused), SIGKILL if it has not exited within
    /// `STOP_TIMEOUT`. Does nothing if it is already stopped.
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        // A stopped process keeps SIGTERM pending; the JVM only sees it once continued.
        unsafe {
            libc::kill(child.id() as i32, libc::SIGCONT);
            libc::kill(child.id() as i32, libc::SIGTERM);
        }
        super::wait_or_kill(&mut child, STOP_TIMEOUT);
    }

    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(c) => c.try_wait().unwrap().is_none(),
            None => false,
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }
}

impl Drop for ZooKeeper {
    fn drop(&mut self) {
        self.stop();
        if std::thread::panicking() {
            eprintln!(
                "--- zookeeper log ({}) ---\n{}",
                self.log_path.display(),
                self.log()
            );
        }
    }
}

/// MACHINE.md's zoo.cfg, with a shorter tick and explicit session-timeout bounds.
fn config(data_dir: &Path, port: u16) -> String {
    format!(
        "tickTime={TICK_TIME_MS}\n\
         initLimit=10\n\
         syncLimit=5\n\
         dataDir={}\n\
         clientPort={port}\n\
         clientPortAddress=127.0.0.1\n\
         minSessionTimeout={SESSION_TIMEOUT_MS_MIN}\n\
         maxSessionTimeout={SESSION_TIMEOUT_MS_MAX}\n\
         admin.enableServer=false\n\
         4lw.commands.whitelist=*\n",
        data_dir.display()
    )
}
