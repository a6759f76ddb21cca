//! Listeners, TLS and SASL with real clients and real certificates (made by openssl): kcat
//! over SASL_SSL with SCRAM-SHA-512, SCRAM-SHA-256 and PLAIN, over SASL_PLAINTEXT, and over
//! SSL with a client certificate; confluent-kafka and kafka-python over SASL_SSL and mutual
//! TLS; and what must be refused (bad passwords, unknown users, skipped handshakes, plaintext
//! on a TLS port, a truncated TLS record, an oversized token) without harming the broker.

mod common;

use common::tls::{SecureBroker, CLIENT_DN};
use common::wire;
use common::{http_get, python, run};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::{
    ApiKey, DescribeConfigsRequest, DescribeConfigsResponse, MetadataRequest, SaslHandshakeRequest,
};
use kafka_protocol::protocol::StrBytes;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Output};
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(60);

fn kcat(options: &[String], args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut cmd = Command::new("kcat");
    cmd.args(options).args(args);
    run(cmd, stdin.map(|s| s.to_vec()), TIMEOUT)
}

fn kcat_ok(options: &[String], args: &[&str], stdin: Option<&[u8]>) -> String {
    let out = kcat(options, args, stdin);
    assert!(
        out.status.success(),
        "kcat {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The brokers' ports a Metadata answer (kcat -L -J) gives.
fn advertised_ports(options: &[String]) -> Vec<u64> {
    let json = kcat_ok(options, &["-L", "-J"], None);
    let md: serde_json::Value = serde_json::from_str(&json).unwrap();
    md["brokers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            let name = b["name"].as_str().unwrap();
            name.rsplit(':').next().unwrap().parse().unwrap()
        })
        .collect()
}

/// Sum of a counter over shards, for series whose labels include all of `labels`.
fn metric(b: &SecureBroker, name: &str, labels: &[(&str, &str)]) -> u64 {
    let (_, body) = http_get(&b.broker.metrics_addr, "/metrics");
    body.lines()
        .filter(|l| l.starts_with(name) && !l.starts_with('#'))
        .filter(|l| {
            labels
                .iter()
                .all(|(k, v)| l.contains(&format!("{k}=\"{v}\"")))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

#[test]
fn sasl_clients_authenticate_with_scram_and_plain_and_see_their_own_listener() {
    let b = SecureBroker::start(&[]);
    let plain_options = vec!["-b".to_string(), b.broker.addr.clone()];
    let mut expected = 0;
    for (mechanism, user, password) in [
        ("SCRAM-SHA-512", "alice", "alice-secret"),
        ("SCRAM-SHA-256", "bob", "bob-secret"),
        ("PLAIN", "bob", "bob-secret"),
    ] {
        let options = b.kcat_sasl_ssl(mechanism, user, password);
        let line = format!("{mechanism} as {user}\n");
        kcat_ok(&options, &["-P", "-t", "secured"], Some(line.as_bytes()));
        expected += 1;
        let read = kcat_ok(
            &options,
            &["-C", "-t", "secured", "-e", "-q", "-f", "%s\n"],
            None,
        );
        assert_eq!(read.lines().count(), expected, "{mechanism}: {read}");
        assert!(read.contains(line.trim()), "{mechanism}: {read}");
        // Metadata on this listener names this listener's address only.
        assert_eq!(advertised_ports(&options), vec![b.sasl_ssl as u64]);
    }
    // SASL without TLS, and the plaintext listener, read the same log.
    let sasl_plaintext = b.kcat_sasl_plaintext("SCRAM-SHA-256", "alice", "alice-secret");
    let read = kcat_ok(
        &sasl_plaintext,
        &["-C", "-t", "secured", "-e", "-q", "-f", "%s\n"],
        None,
    );
    assert_eq!(read.lines().count(), 3, "{read}");
    assert_eq!(
        advertised_ports(&sasl_plaintext),
        vec![b.sasl_plaintext as u64]
    );
    assert_eq!(advertised_ports(&plain_options), vec![b.broker.port as u64]);
}

#[test]
fn mutual_tls_names_the_principal_by_the_certificate_and_refuses_clients_without_one() {
    let b = SecureBroker::start(&["--log-level", "ferrite=debug"]);
    let options = b.kcat_ssl();
    kcat_ok(&options, &["-P", "-t", "mtls"], Some(b"over mutual TLS\n"));
    let read = kcat_ok(
        &options,
        &["-C", "-t", "mtls", "-e", "-q", "-f", "%s\n"],
        None,
    );
    assert_eq!(read, "over mutual TLS\n");
    assert_eq!(advertised_ports(&options), vec![b.ssl as u64]);
    let log = b.broker.log();
    assert!(
        log.contains(&format!("principal=User:{CLIENT_DN}")),
        "the certificate's subject is the principal:\n{log}"
    );
    // No certificate, or one from a CA the broker does not trust: refused in the handshake.
    let failed_before = metric(&b, "ferrite_tls_handshakes_failed_total", &[]);
    let ca = format!("ssl.ca.location={}", b.certs.ca.display());
    let no_certificate = vec![
        "-b".to_string(),
        format!("127.0.0.1:{}", b.ssl),
        "-X".into(),
        "security.protocol=SSL".into(),
        "-X".into(),
        ca.clone(),
    ];
    let stranger = [
        no_certificate.clone(),
        vec![
            "-X".into(),
            format!(
                "ssl.certificate.location={}",
                b.certs.stranger_cert.display()
            ),
            "-X".into(),
            format!("ssl.key.location={}", b.certs.stranger_key.display()),
        ],
    ]
    .concat();
    for refused in [&no_certificate, &stranger] {
        let out = kcat(refused, &["-L", "-m", "5"], None);
        assert!(
            !out.status.success(),
            "a client without a trusted certificate got metadata"
        );
    }
    assert!(metric(&b, "ferrite_tls_handshakes_failed_total", &[]) >= failed_before + 2);
    // The broker serves on.
    kcat_ok(&options, &["-L"], None);
}

#[test]
fn bad_credentials_and_protocol_violations_are_refused_and_the_broker_carries_on() {
    let b = SecureBroker::start(&["--set", "sasl.server.max.receive.size=4096"]);
    // Wrong password, unknown user, a mechanism the user has no credential for.
    for (mechanism, user, password) in [
        ("SCRAM-SHA-512", "alice", "wrong"),
        ("SCRAM-SHA-256", "nobody", "alice-secret"),
        ("PLAIN", "alice", "wrong"),
        ("SCRAM-SHA-512", "bob", "bob-secret"),
    ] {
        let out = kcat(
            &b.kcat_sasl_ssl(mechanism, user, password),
            &["-L", "-m", "5"],
            None,
        );
        assert!(
            !out.status.success(),
            "{mechanism} {user} {password} got in"
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("Authentication failed")
                || stderr.contains("SASL authentication error"),
            "{mechanism} {user}: {stderr}"
        );
    }
    let failures = metric(
        &b,
        "ferrite_request_errors_total",
        &[("api", "SaslAuthenticate"), ("error_code", "58")],
    );
    assert!(
        failures >= 4,
        "{failures} SASL_AUTHENTICATION_FAILED counted"
    );

    // A client that skips the handshake: Metadata on the SASL_PLAINTEXT port is not answered.
    let mut s = TcpStream::connect(("127.0.0.1", b.sasl_plaintext)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(&wire::frame(
        ApiKey::Metadata,
        4,
        1,
        &MetadataRequest::default(),
    ))
    .unwrap();
    assert!(
        wire::read_frame(&mut s).is_none(),
        "Metadata answered before authentication"
    );

    // An unknown mechanism: answered UNSUPPORTED_SASL_MECHANISM with the enabled ones, closed.
    let mut s = TcpStream::connect(("127.0.0.1", b.sasl_plaintext)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let handshake =
        SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("GSSAPI"));
    let answer: kafka_protocol::messages::SaslHandshakeResponse =
        wire::call(&mut s, ApiKey::SaslHandshake, 1, &handshake);
    assert_eq!(answer.error_code, 33);
    let offered: Vec<String> = answer.mechanisms.iter().map(|m| m.to_string()).collect();
    assert_eq!(offered, ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]);
    assert!(
        wire::read_frame(&mut s).is_none(),
        "still open after the refusal"
    );

    // A token larger than sasl.server.max.receive.size: closed before it is read.
    let mut s = TcpStream::connect(("127.0.0.1", b.sasl_plaintext)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let handshake =
        SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN"));
    let answer: kafka_protocol::messages::SaslHandshakeResponse =
        wire::call(&mut s, ApiKey::SaslHandshake, 0, &handshake);
    assert_eq!(answer.error_code, 0);
    s.write_all(&100_000i32.to_be_bytes()).unwrap();
    assert!(
        wire::read_frame(&mut s).is_none(),
        "an oversized token was taken"
    );

    // Plaintext Kafka on the TLS port, and a TLS record cut short: dropped, nothing served.
    for bytes in [
        wire::frame(ApiKey::Metadata, 4, 1, &MetadataRequest::default()),
        // A handshake record header promising 512 bytes, then 5 of them and the end.
        vec![0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03],
    ] {
        let mut s = TcpStream::connect(("127.0.0.1", b.ssl)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
        s.write_all(&bytes).unwrap();
        s.shutdown(std::net::Shutdown::Write).unwrap();
        let mut rest = Vec::new();
        let _ = s.read_to_end(&mut rest);
        assert!(
            !rest.starts_with(&[0, 0]),
            "a Kafka response came back on the TLS port"
        );
    }

    // Still serving everyone who does it right.
    let options = b.kcat_sasl_ssl("SCRAM-SHA-512", "alice", "alice-secret");
    kcat_ok(&options, &["-P", "-t", "after"], Some(b"still here\n"));
    let read = kcat_ok(
        &options,
        &["-C", "-t", "after", "-e", "-q", "-f", "%s\n"],
        None,
    );
    assert_eq!(read, "still here\n");
    kcat_ok(&["-b".to_string(), b.broker.addr.clone()], &["-L"], None);
}

#[test]
fn confluent_kafka_and_kafka_python_over_sasl_ssl_and_mutual_tls() {
    let b = SecureBroker::start(&[]);
    let out = python(
        "secure_clients.py",
        &[
            &format!("127.0.0.1:{}", b.sasl_ssl),
            &format!("127.0.0.1:{}", b.ssl),
            b.certs.ca.to_str().unwrap(),
            b.certs.client_cert.to_str().unwrap(),
            b.certs.client_key.to_str().unwrap(),
        ],
    );
    assert!(out.contains("secure clients ok"), "{out}");
}

#[test]
fn a_listener_that_cannot_start_stops_the_broker_before_it_claims_anything() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let port = common::free_port();
    for (settings, expected) in [
        (
            vec![
                format!("listeners=SSL://127.0.0.1:{port}"),
                "inter.broker.listener.name=SSL".into(),
            ],
            "key store",
        ),
        (
            vec![
                format!("listeners=SASL_PLAINTEXT://127.0.0.1:{port}"),
                "security.inter.broker.protocol=SASL_PLAINTEXT".into(),
                "sasl.enabled.mechanisms=GSSAPI".into(),
            ],
            "GSSAPI is not offered",
        ),
        (
            vec![format!(
                "listeners=PLAINTEXT://127.0.0.1:{port},PLAINTEXT://127.0.0.1:1"
            )],
            "different name",
        ),
    ] {
        let mut cmd = Command::new(common::ferrite_binary());
        cmd.arg("serve").arg("--data-dir").arg(&data);
        for s in &settings {
            cmd.arg("--set").arg(s);
        }
        let out = run(cmd, None, TIMEOUT);
        assert_eq!(out.status.code(), Some(2), "{settings:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(expected), "{settings:?}: {stderr}");
        assert!(!data.exists(), "{settings:?} created the data directory");
    }
}

#[test]
fn acls_decide_what_each_user_may_do_and_change_without_a_restart() {
    let b = SecureBroker::start(&[
        "--set",
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "--set",
        "super.users=User:alice",
    ]);
    let out = python(
        "acl_rules.py",
        &[
            &format!("127.0.0.1:{}", b.sasl_plaintext),
            "alice",
            "alice-secret",
            "bob",
            "bob-secret",
        ],
    );
    assert!(out.contains("acl rules ok"), "{out}");
    let denied = metric(
        &b,
        "ferrite_authorization_denied_total",
        &[("principal", "User:bob")],
    );
    assert!(denied > 0, "no denial of User:bob counted");
    let acls: serde_json::Value =
        serde_json::from_slice(&std::fs::read(b.broker.data_dir.join("meta/acls.json")).unwrap())
            .unwrap();
    assert_eq!(acls.as_array().unwrap().len(), 4, "{acls}");
    // Kept across a restart: bob still reads what his ACLs allow.
    let mut b = b;
    b.broker.stop();
    b.broker.restart();
    let bob = b.kcat_sasl_plaintext("SCRAM-SHA-256", "bob", "bob-secret");
    let read = kcat_ok(
        &bob,
        &["-C", "-t", "logs-app", "-e", "-q", "-f", "%s\n"],
        None,
    );
    assert_eq!(read, "logs-app-0\n");
    let out = kcat(&bob, &["-C", "-t", "logs-secret", "-e", "-q"], None);
    assert!(
        !out.status.success(),
        "the DENY did not survive the restart"
    );
}

#[test]
fn acls_made_with_kafka_pythons_admin_client_are_in_force_at_once() {
    let b = SecureBroker::start(&[
        "--set",
        "authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
        "--set",
        "super.users=User:alice",
    ]);
    let out = python(
        "kafka_python_acls.py",
        &[
            &format!("127.0.0.1:{}", b.sasl_plaintext),
            "alice",
            "alice-secret",
            "bob",
            "bob-secret",
        ],
    );
    assert!(out.contains("kafka-python acls ok"), "{out}");
}

#[test]
fn acl_apis_without_an_authorizer_answer_security_disabled() {
    let b = SecureBroker::start(&[]);
    let mut s = wire::connect(&b.broker);
    let answer: kafka_protocol::messages::DescribeAclsResponse = wire::call(
        &mut s,
        ApiKey::DescribeAcls,
        3,
        &kafka_protocol::messages::DescribeAclsRequest::default()
            .with_resource_type_filter(1)
            .with_pattern_type_filter(1)
            .with_operation(1)
            .with_permission_type(1),
    );
    assert_eq!(answer.error_code, 54, "SECURITY_DISABLED");
}

/// `ferrite acl` with kafka-acls.sh's options, on a data directory no broker holds.
fn acl_tool(data_dir: &std::path::Path, args: &[&str]) -> Output {
    common::tls::ferrite_acl(&["--data-dir", data_dir.to_str().unwrap()], args)
}

#[test]
fn acls_made_by_ferrite_acl_while_the_broker_is_down_are_in_force_when_it_starts() {
    let mut b = SecureBroker::start(&[
        "--set",
        "authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
    ]);
    let data_dir = b.broker.data_dir.clone();
    let running = acl_tool(&data_dir, &["list"]);
    assert_eq!(
        running.status.code(),
        Some(2),
        "refused while the broker runs"
    );
    b.broker.stop();
    let added = acl_tool(
        &data_dir,
        &[
            "add",
            "--allow-principal",
            "User:bob",
            "--operation",
            "Write",
            "--operation",
            "Create",
            "--topic",
            "tool-",
            "--resource-pattern-type",
            "prefixed",
        ],
    );
    assert!(
        added.status.success(),
        "{}",
        String::from_utf8_lossy(&added.stderr)
    );
    let listed = String::from_utf8_lossy(&acl_tool(&data_dir, &["list"]).stdout).into_owned();
    assert!(
        listed.contains(
            "Topic:PREFIXED:tool- principal=User:bob host=* operation=Write permission=Allow"
        ),
        "{listed}"
    );
    b.broker.restart();
    let bob = b.kcat_sasl_ssl("SCRAM-SHA-256", "bob", "bob-secret");
    kcat_ok(&bob, &["-P", "-t", "tool-made"], Some(b"allowed\n"));
    let out = kcat(&bob, &["-P", "-t", "elsewhere"], Some(b"denied\n"));
    assert!(
        !out.status.success() || String::from_utf8_lossy(&out.stderr).contains("authorization"),
        "bob produced outside his prefix"
    );
    b.broker.stop();
    let removed = acl_tool(
        &data_dir,
        &[
            "remove",
            "--allow-principal",
            "User:bob",
            "--operation",
            "Write",
            "--operation",
            "Create",
            "--topic",
            "tool-",
            "--resource-pattern-type",
            "prefixed",
        ],
    );
    assert!(
        removed.status.success(),
        "{}",
        String::from_utf8_lossy(&removed.stderr)
    );
    let listed = acl_tool(&data_dir, &["list"]);
    assert!(
        listed.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&listed.stdout)
    );
}

/// DescribeConfigs of the broker lists its security settings as Kafka does: the listeners in
/// force, every `ssl.*`/`sasl.*` setting given (per listener too), read-only; passwords, key
/// material and keys Kafka cannot type (`super.users`) marked sensitive, without their value.
#[test]
fn describe_configs_shows_security_settings_and_hides_secrets() {
    let jaas = "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config";
    let b = SecureBroker::start(&[
        "--set",
        &format!(
            "{jaas}=org.apache.kafka.common.security.scram.ScramLoginModule required \
             username=\"broker\" password=\"do-not-show\";"
        ),
        "--set",
        "super.users=User:admin",
    ]);
    let mut conn = wire::connect(&b.broker);
    let md: kafka_protocol::messages::MetadataResponse = wire::call(
        &mut conn,
        ApiKey::Metadata,
        12,
        &MetadataRequest::default().with_topics(Some(vec![])),
    );
    let me = md.brokers[0].node_id.0.to_string();
    let request = DescribeConfigsRequest::default()
        .with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(4)
            .with_resource_name(StrBytes::from_string(me))
            .with_configuration_keys(None)])
        .with_include_synonyms(true);
    let answer: DescribeConfigsResponse =
        wire::call(&mut conn, ApiKey::DescribeConfigs, 4, &request);
    let result = &answer.results[0];
    assert_eq!(result.error_code, 0);
    let find = |name: &str| {
        result
            .configs
            .iter()
            .find(|c| c.name.as_str() == name)
            .unwrap_or_else(|| panic!("{name} is described"))
    };
    let value = |name: &str| find(name).value.as_ref().map(|v| v.to_string());
    let p = b.broker.port;
    let (sasl_ssl, ssl, sasl_plaintext) = (b.sasl_ssl, b.ssl, b.sasl_plaintext);
    let given = format!(
        "PLAINTEXT://127.0.0.1:{p},SASL_SSL://127.0.0.1:{sasl_ssl},SSL://127.0.0.1:{ssl},\
         SASL_PLAINTEXT://127.0.0.1:{sasl_plaintext}"
    );
    assert_eq!(value("listeners"), Some(given.clone()));
    assert_eq!(find("listeners").config_source, 4, "STATIC_BROKER_CONFIG");
    assert!(find("listeners").read_only);
    assert_eq!(value("advertised.listeners"), Some(given));
    assert_eq!(
        find("advertised.listeners").config_source,
        5,
        "DEFAULT_CONFIG"
    );
    assert_eq!(
        value("inter.broker.listener.name").as_deref(),
        Some("PLAINTEXT")
    );
    assert_eq!(
        value("ssl.keystore.location"),
        Some(b.certs.broker_keystore.display().to_string())
    );
    assert_eq!(
        value("listener.name.ssl.ssl.client.auth").as_deref(),
        Some("required")
    );
    assert_eq!(find("sasl.enabled.mechanisms").config_type, 7, "LIST");
    for secret in [jaas, "super.users"] {
        let c = find(secret);
        assert!(c.is_sensitive && c.value.is_none(), "{secret}: {c:?}");
        assert!(c.synonyms.iter().all(|s| s.value.is_none()), "{c:?}");
    }
    assert_eq!(find(jaas).config_type, 9, "PASSWORD");
    let all = format!("{answer:?}");
    assert!(!all.contains("do-not-show"), "{all}");
}

/// The series sum of `ferrite_connections_moved_total` over the shards.
fn connections_moved(b: &SecureBroker) -> u64 {
    let (_, metrics) = common::http_get(&b.broker.metrics_addr, "/metrics");
    metrics
        .lines()
        .filter(|l| l.starts_with("ferrite_connections_moved_total{"))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum()
}

/// A SASL connection that moves to its partition's shard (`server::handoff`) keeps its
/// principal: with an authorizer on, alice's produce goes on being allowed there and every
/// record lands once, in order. A TLS connection never moves.
#[test]
fn a_sasl_connection_moves_with_its_principal_and_a_tls_one_stays() {
    let b = SecureBroker::start(&[
        "--set",
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "--set",
        "super.users=User:alice",
    ]);
    let sasl = b.kcat_sasl_plaintext("SCRAM-SHA-256", "alice", "alice-secret");
    const RECORDS: usize = 200;
    let one_record_batches = ["-X", "batch.num.messages=1", "-X", "linger.ms=0"];
    let mut producers = 0;
    // Each connection lands on either shard; run until one has moved.
    while connections_moved(&b) == 0 {
        assert!(
            producers < 40,
            "no SASL connection moved in {producers} producers"
        );
        let lines: Vec<String> = (0..RECORDS).map(|i| format!("p{producers}-{i}")).collect();
        let stdin = format!("{}\n", lines.join("\n"));
        let mut args = vec!["-P", "-t", "moving", "-p", "0"];
        args.extend(one_record_batches);
        kcat_ok(&sasl, &args, Some(stdin.as_bytes()));
        producers += 1;
    }
    let read = kcat_ok(
        &sasl,
        &["-C", "-t", "moving", "-e", "-q", "-f", "%s\n"],
        None,
    );
    let read: Vec<&str> = read.lines().collect();
    assert_eq!(read.len(), producers * RECORDS, "every record once");
    for p in 0..producers {
        let prefix = format!("p{p}-");
        let mine: Vec<&str> = read
            .iter()
            .copied()
            .filter(|l| l.starts_with(&prefix))
            .collect();
        let want: Vec<String> = (0..RECORDS).map(|i| format!("p{p}-{i}")).collect();
        assert!(
            mine.iter().copied().eq(want.iter().map(String::as_str)),
            "producer {p}"
        );
    }
    let moved = connections_moved(&b);
    let tls = b.kcat_sasl_ssl("SCRAM-SHA-256", "alice", "alice-secret");
    for p in 0..4 {
        let stdin = format!(
            "{}\n",
            (0..50)
                .map(|i| format!("t{p}-{i}"))
                .collect::<Vec<_>>()
                .join("\n")
        );
        let mut args = vec!["-P", "-t", "moving", "-p", "0"];
        args.extend(one_record_batches);
        kcat_ok(&tls, &args, Some(stdin.as_bytes()));
    }
    assert_eq!(
        connections_moved(&b),
        moved,
        "TLS connections stay where they land"
    );
}
