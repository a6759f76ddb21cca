//! The exactly-once loop of `tests/clients/confluent_eos_through_kills.py` (or its kafka-python
//! twin), driven from a test: started in the background, its progress watched (so brokers can
//! be killed at chosen points), its READ_COMMITTED output checked at the end.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The script's last error lines kept, to say why a loop stopped making progress.
const ERRORS_KEPT: usize = 80;

/// The client family that runs the loop.
#[derive(Clone, Copy, Debug)]
pub enum EosClient {
    /// confluent-kafka (librdkafka).
    Confluent,
    /// kafka-python, whose consumer and transactional producer are its own.
    KafkaPython,
}

/// Which broker coordinates the loop's consumer group (`tests/clients/eos_groups.py`).
#[derive(Clone, Copy, Debug)]
pub enum GroupPlacement {
    /// The group "eos", wherever it lands.
    Any,
    /// A group this broker does not coordinate: the test is about to kill it, and librdkafka
    /// can hang in `send_offsets_to_transaction` when the group's coordinator dies (the
    /// confluent script says more).
    Avoiding(i64),
    /// A group this broker coordinates: the test is about to kill it.
    On(i64),
}

pub struct EosLoop {
    child: Child,
    progress: Arc<AtomicI64>,
    /// The script's last lines on stderr (each error its client reported, and a traceback).
    errors: Arc<Mutex<VecDeque<String>>>,
    reader: Option<JoinHandle<Option<String>>>,
    pub count: i64,
    deadline: Instant,
}

impl EosLoop {
    /// Starts `client`'s loop over `count` records from `eos-in` to `eos-out` with
    /// `transactional_id`, bootstrapping from `bootstrap`, its group placed by `group`; it must
    /// finish within `limit`.
    pub fn start(
        client: EosClient,
        bootstrap: &str,
        count: i64,
        transactional_id: &str,
        group: GroupPlacement,
        limit: Duration,
    ) -> EosLoop {
        let script = match client {
            EosClient::Confluent => "confluent_eos_through_kills.py",
            EosClient::KafkaPython => "kafka_python_eos_through_kills.py",
        };
        let script = super::workspace_root().join("tests/clients").join(script);
        let mut args = vec![
            bootstrap.to_string(),
            "eos-in".to_string(),
            "eos-out".to_string(),
            count.to_string(),
            transactional_id.to_string(),
        ];
        args.extend(match group {
            GroupPlacement::Any => None,
            GroupPlacement::Avoiding(broker) => Some(format!("avoid:{broker}")),
            GroupPlacement::On(broker) => Some(format!("on:{broker}")),
        });
        let mut child = Command::new(super::python_path())
            .arg(script)
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("python");
        let stdout = child.stdout.take().unwrap();
        let stderr = child.stderr.take().unwrap();
        let errors = Arc::new(Mutex::new(VecDeque::new()));
        let kept = errors.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let mut kept = kept.lock().unwrap();
                if kept.len() == ERRORS_KEPT {
                    kept.pop_front();
                }
                kept.push_back(line);
            }
        });
        let progress = Arc::new(AtomicI64::new(-1));
        let seen = progress.clone();
        let reader = std::thread::spawn(move || {
            let mut result = None;
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(n) = line.strip_prefix("progress ") {
                    seen.store(n.parse().unwrap(), Ordering::Relaxed);
                } else if let Some(json) = line.strip_prefix("result ") {
                    result = Some(json.to_string());
                } else if line.starts_with("group ") {
                    println!("{line}");
                }
            }
            result
        });
        EosLoop {
            child,
            progress,
            errors,
            reader: Some(reader),
            count,
            deadline: Instant::now() + limit,
        }
    }

    /// Input records done (committed) so far; -1 before the input is written.
    pub fn progress(&self) -> i64 {
        self.progress.load(Ordering::Relaxed)
    }

    /// The script's last lines on stderr, one per line.
    fn last_errors(&self) -> String {
        let errors = self.errors.lock().unwrap();
        if errors.is_empty() {
            return "none".to_string();
        }
        errors.iter().cloned().collect::<Vec<_>>().join("\n")
    }

    /// Waits until at least `done` input records are committed.
    pub fn wait_for(&mut self, done: i64) {
        while self.progress() < done {
            assert!(
                Instant::now() < self.deadline && self.child.try_wait().unwrap().is_none(),
                "no progress past {} (waiting for {done}); the loop's last errors:\n{}",
                self.progress(),
                self.last_errors()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Waits for the end and checks the output: every input record once, in order.
    pub fn finish_exactly_once(mut self) {
        while self.child.try_wait().unwrap().is_none() {
            if Instant::now() > self.deadline {
                let _ = self.child.kill();
                panic!(
                    "the loop did not finish; progress {}; its last errors:\n{}",
                    self.progress(),
                    self.last_errors()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let result = self
            .reader
            .take()
            .unwrap()
            .join()
            .unwrap()
            .expect("the script printed its result");
        let json: serde_json::Value = serde_json::from_str(&result).expect("JSON");
        let out: Vec<String> = json["out"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect();
        let expected: Vec<String> = (0..self.count).map(|i| format!("x-v-{i}")).collect();
        println!(
            "{} records moved exactly once; the loop aborted {} and restarted its producer {} \
             times; its errors:\n{}",
            out.len(),
            json["aborted"],
            json["restarted"],
            self.last_errors()
        );
        assert_eq!(out.len(), expected.len());
        assert_eq!(out, expected, "every input once, in order");
    }
}

impl Drop for EosLoop {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
