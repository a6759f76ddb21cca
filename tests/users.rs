//! `ferrite user add|list|delete`: SCRAM users made before a broker runs, in the data
//! directory or in ZooKeeper (Kafka's `/config/users/<name>` layout), never holding the
//! password, and refused while a broker owns the directory.

mod common;

use common::zookeeper::ZooKeeper;
use common::Broker;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// Runs `ferrite user ARGS` with `stdin` on its standard input.
fn user(args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ferrite"))
        .arg("user")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run ferrite user");
    // A command that refuses (a broker holds the data directory) may exit before it reads.
    match child.stdin.take().unwrap().write_all(stdin.as_bytes()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        written => written.unwrap(),
    }
    child.wait_with_output().unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn add(store: &[&str], name: &str, mechanism: &str, password: &str) -> Output {
    let mut args = vec!["add", name, "--mechanism", mechanism, "--password-stdin"];
    args.extend(store);
    user(&args, &format!("{password}\n"))
}

#[test]
fn users_are_kept_salted_in_the_data_directory_and_refused_while_a_broker_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let dir_arg = dir.to_str().unwrap();
    let store = ["--data-dir", dir_arg];
    for (mechanism, password) in [
        ("SCRAM-SHA-256", "alice-secret-256"),
        ("SCRAM-SHA-512", "alice-secret-512"),
    ] {
        let out = add(&store, "alice", mechanism, password);
        assert!(out.status.success(), "{}", text(&out));
    }
    assert!(add(&store, "bob", "SCRAM-SHA-512", "bob-secret")
        .status
        .success());
    let listed = user(&["list", "--data-dir", dir_arg], "");
    assert_eq!(
        String::from_utf8_lossy(&listed.stdout),
        "alice: SCRAM-SHA-256 iterations=4096, SCRAM-SHA-512 iterations=4096\nbob: SCRAM-SHA-512 iterations=4096\n"
    );
    let stored = std::fs::read_to_string(dir.join("meta/users.json")).unwrap();
    assert!(
        stored.contains("stored_key=") && stored.contains("server_key="),
        "{stored}"
    );
    assert!(
        !stored.contains("secret"),
        "no password is stored: {stored}"
    );

    // Refusals: a bad mechanism, too few iterations, no password, an unknown user.
    for (args, stdin) in [
        (
            vec![
                "add",
                "carol",
                "--mechanism",
                "SCRAM-SHA-1",
                "--password-stdin",
            ],
            "pw\n",
        ),
        (
            vec![
                "add",
                "carol",
                "--mechanism",
                "SCRAM-SHA-256",
                "--password-stdin",
                "--iterations",
                "1000",
            ],
            "pw\n",
        ),
        (
            vec![
                "add",
                "carol",
                "--mechanism",
                "SCRAM-SHA-256",
                "--password-stdin",
            ],
            "",
        ),
        (vec!["delete", "nobody"], ""),
    ] {
        let mut args = args.clone();
        args.extend(store);
        let out = user(&args, stdin);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
    }
    let out = user(
        &[
            "delete",
            "alice",
            "--mechanism",
            "SCRAM-SHA-256",
            "--data-dir",
            dir_arg,
        ],
        "",
    );
    assert!(out.status.success(), "{}", text(&out));
    let out = user(&["delete", "bob", "--data-dir", dir_arg], "");
    assert!(out.status.success(), "{}", text(&out));
    let listed = user(&["list", "--data-dir", dir_arg], "");
    assert_eq!(
        String::from_utf8_lossy(&listed.stdout),
        "alice: SCRAM-SHA-512 iterations=4096\n"
    );

    // A running broker owns the directory: the tool refuses and changes nothing.
    let mut broker = Broker::start_at(Path::new(&dir), common::free_port(), &[]);
    let out = add(&store, "dave", "SCRAM-SHA-256", "dave-secret");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out).contains("in use by another ferrite process"),
        "{}",
        text(&out)
    );
    assert!(broker.stop().success());
    let listed = user(&["list", "--data-dir", dir_arg], "");
    assert!(!String::from_utf8_lossy(&listed.stdout).contains("dave"));
}

#[test]
fn users_in_zookeeper_are_kafkas_scram_configs_beside_the_users_quotas() {
    let zk = ZooKeeper::start();
    let connect = format!("{}/ferrite", zk.connect_string());
    let store = ["--zookeeper", connect.as_str()];
    let out = add(&store, "erin", "SCRAM-SHA-512", "erin-secret");
    assert!(out.status.success(), "{}", text(&out));
    let (_, znode) = zk.cli(&["get", "/ferrite/config/users/erin"]);
    assert!(
        znode.contains(r#""SCRAM-SHA-512":"salt="#) && znode.contains("iterations=4096"),
        "{znode}"
    );
    assert!(!znode.contains("erin-secret"));
    let (_, changes) = zk.cli(&["ls", "/ferrite/config/changes"]);
    assert!(changes.contains("config_change_"), "{changes}");
    let listed = user(&["list", "--zookeeper", &connect], "");
    assert_eq!(
        String::from_utf8_lossy(&listed.stdout),
        "erin: SCRAM-SHA-512 iterations=4096\n"
    );
    // A quota set on the user meanwhile (AlterClientQuotas writes the same znode) is kept by
    // a second mechanism's add and by the delete: each tool changes only its own keys.
    let with_quota = znode
        .lines()
        .find(|l| l.starts_with('{'))
        .unwrap()
        .replace(r#""config":{"#, r#""config":{"producer_byte_rate":"1000","#);
    let (set, out) = zk.cli(&["set", "/ferrite/config/users/erin", &with_quota]);
    assert!(set, "{out}");
    assert!(add(&store, "erin", "SCRAM-SHA-256", "erin-other")
        .status
        .success());
    let listed = user(&["list", "--zookeeper", &connect], "");
    assert_eq!(
        String::from_utf8_lossy(&listed.stdout),
        "erin: SCRAM-SHA-256 iterations=4096, SCRAM-SHA-512 iterations=4096\n"
    );
    let out = user(&["delete", "erin", "--zookeeper", &connect], "");
    assert!(out.status.success(), "{}", text(&out));
    let listed = user(&["list", "--zookeeper", &connect], "");
    assert_eq!(String::from_utf8_lossy(&listed.stdout), "");
    let (_, znode) = zk.cli(&["get", "/ferrite/config/users/erin"]);
    assert!(
        znode.contains(r#""producer_byte_rate":"1000""#) && !znode.contains("SCRAM"),
        "{znode}"
    );
}
