//! Real certificates for the security tests, made with Debian's `openssl`: a test CA, a broker
//! certificate for 127.0.0.1 and localhost, and a client certificate (CN=alice) for mutual TLS;
//! and a broker with one listener of each security protocol and users made by `ferrite user`.

use super::{free_port, run, Broker};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

pub struct Certificates {
    _dir: tempfile::TempDir,
    /// The CA's certificate (every trust store).
    pub ca: PathBuf,
    /// The broker's key and certificate chain in one PEM (`ssl.keystore.location`).
    pub broker_keystore: PathBuf,
    /// The client's certificate and key, and both in one PEM.
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
    pub client_keystore: PathBuf,
    /// A certificate for CN=mallory from a CA the broker does not trust.
    pub stranger_cert: PathBuf,
    pub stranger_key: PathBuf,
}

/// The subject of the client certificate, as RFC 2253 (and Kafka) write it.
pub const CLIENT_DN: &str = "CN=alice,OU=Test,O=Ferrite";

fn openssl(dir: &Path, args: &[&str]) {
    let mut cmd = Command::new("openssl");
    cmd.current_dir(dir).args(args);
    let out = run(cmd, None, Duration::from_secs(60));
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A P-256 key and a certificate for `subject` signed by `ca` (`name`.key, `name`.crt).
fn issue(dir: &Path, ca: &str, name: &str, subject: &str, extensions: &str) {
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.csr"),
            "-subj",
            subject,
        ],
    );
    std::fs::write(dir.join(format!("{name}.ext")), extensions).unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &format!("{name}.csr"),
            "-CA",
            &format!("{ca}.crt"),
            "-CAkey",
            &format!("{ca}.key"),
            "-CAcreateserial",
            "-days",
            "2",
            "-out",
            &format!("{name}.crt"),
            "-extfile",
            &format!("{name}.ext"),
        ],
    );
}

fn self_signed_ca(dir: &Path, name: &str, subject: &str) {
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.crt"),
            "-days",
            "2",
            "-subj",
            subject,
        ],
    );
}

fn concat(dir: &Path, parts: &[&str], into: &str) -> PathBuf {
    let mut pem = Vec::new();
    for p in parts {
        pem.extend(std::fs::read(dir.join(p)).unwrap());
    }
    let path = dir.join(into);
    std::fs::write(&path, pem).unwrap();
    path
}

pub fn make() -> Certificates {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    self_signed_ca(d, "ca", "/CN=Ferrite Test CA");
    issue(
        d,
        "ca",
        "broker",
        "/CN=localhost",
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n",
    );
    issue(
        d,
        "ca",
        "alice",
        "/O=Ferrite/OU=Test/CN=alice",
        "extendedKeyUsage=clientAuth\n",
    );
    self_signed_ca(d, "other-ca", "/CN=Somebody Else");
    issue(
        d,
        "other-ca",
        "mallory",
        "/CN=mallory",
        "extendedKeyUsage=clientAuth\n",
    );
    Certificates {
        ca: d.join("ca.crt"),
        broker_keystore: concat(d, &["broker.key", "broker.crt"], "broker-keystore.pem"),
        client_cert: d.join("alice.crt"),
        client_key: d.join("alice.key"),
        client_keystore: concat(d, &["alice.key", "alice.crt"], "alice-keystore.pem"),
        stranger_cert: d.join("mallory.crt"),
        stranger_key: d.join("mallory.key"),
        _dir: dir,
    }
}

/// `ferrite user add` on a data directory (no broker running there).
pub fn add_user(data_dir: &Path, name: &str, mechanism: &str, password: &str) {
    add_user_to(
        &["--data-dir", data_dir.to_str().unwrap()],
        name,
        mechanism,
        password,
    );
}

/// `ferrite user add` on `store` (`--data-dir DIR` or `--zookeeper CONNECT`).
pub fn add_user_to(store: &[&str], name: &str, mechanism: &str, password: &str) {
    let mut cmd = Command::new(super::ferrite_binary());
    cmd.args([
        "user",
        "add",
        name,
        "--mechanism",
        mechanism,
        "--password-stdin",
    ])
    .args(store);
    let out = run(
        cmd,
        Some(format!("{password}\n").into_bytes()),
        Duration::from_secs(30),
    );
    assert!(
        out.status.success(),
        "ferrite user add: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `ferrite acl ARGS` (kafka-acls.sh's options) on `store` (`--data-dir DIR` or
/// `--zookeeper CONNECT`), as an operator runs it.
pub fn ferrite_acl(store: &[&str], args: &[&str]) -> std::process::Output {
    let mut cmd = Command::new(super::ferrite_binary());
    cmd.arg("acl").args(args).args(store);
    run(cmd, None, Duration::from_secs(30))
}

/// `ferrite acl add ARGS` on `store`, which must succeed.
pub fn add_acl_to(store: &[&str], args: &[&str]) {
    let out = ferrite_acl(store, &[&["add"], args].concat());
    assert!(
        out.status.success(),
        "ferrite acl add {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A single broker with a listener of each protocol: PLAINTEXT on `broker.addr`, SASL_SSL,
/// SSL with client certificates required, and SASL_PLAINTEXT; PLAIN and both SCRAMs enabled.
/// Users: alice (both SCRAMs, password alice-secret) and bob (SCRAM-SHA-256 only, bob-secret).
pub struct SecureBroker {
    pub broker: Broker,
    pub certs: Certificates,
    pub sasl_ssl: u16,
    pub ssl: u16,
    pub sasl_plaintext: u16,
    _tmp: tempfile::TempDir,
}

impl SecureBroker {
    pub fn start(extra: &[&str]) -> SecureBroker {
        let certs = make();
        let tmp = tempfile::tempdir().unwrap();
        let data = tmp.path().join("data");
        add_user(&data, "alice", "SCRAM-SHA-512", "alice-secret");
        add_user(&data, "alice", "SCRAM-SHA-256", "alice-secret");
        add_user(&data, "bob", "SCRAM-SHA-256", "bob-secret");
        let (plain, sasl_ssl, ssl, sasl_plaintext) =
            (free_port(), free_port(), free_port(), free_port());
        let settings = [
            format!(
                "listeners=PLAINTEXT://127.0.0.1:{plain},SASL_SSL://127.0.0.1:{sasl_ssl},\
                 SSL://127.0.0.1:{ssl},SASL_PLAINTEXT://127.0.0.1:{sasl_plaintext}"
            ),
            "ssl.keystore.type=PEM".into(),
            format!("ssl.keystore.location={}", certs.broker_keystore.display()),
            format!("ssl.truststore.location={}", certs.ca.display()),
            "listener.name.ssl.ssl.client.auth=required".into(),
            "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512".into(),
        ];
        let mut args: Vec<String> = Vec::new();
        for s in &settings {
            args.push("--set".into());
            args.push(s.clone());
        }
        args.extend(extra.iter().map(|s| s.to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let broker = Broker::start_at(&data, plain, &args);
        SecureBroker {
            broker,
            certs,
            sasl_ssl,
            ssl,
            sasl_plaintext,
            _tmp: tmp,
        }
    }

    /// kcat options for SASL over TLS as `user` with `mechanism`.
    pub fn kcat_sasl_ssl(&self, mechanism: &str, user: &str, password: &str) -> Vec<String> {
        vec![
            "-b".into(),
            format!("127.0.0.1:{}", self.sasl_ssl),
            "-X".into(),
            "security.protocol=SASL_SSL".into(),
            "-X".into(),
            format!("sasl.mechanisms={mechanism}"),
            "-X".into(),
            format!("sasl.username={user}"),
            "-X".into(),
            format!("sasl.password={password}"),
            "-X".into(),
            format!("ssl.ca.location={}", self.certs.ca.display()),
        ]
    }

    /// kcat options for SASL without TLS as `user` with `mechanism`.
    pub fn kcat_sasl_plaintext(&self, mechanism: &str, user: &str, password: &str) -> Vec<String> {
        vec![
            "-b".into(),
            format!("127.0.0.1:{}", self.sasl_plaintext),
            "-X".into(),
            "security.protocol=SASL_PLAINTEXT".into(),
            "-X".into(),
            format!("sasl.mechanisms={mechanism}"),
            "-X".into(),
            format!("sasl.username={user}"),
            "-X".into(),
            format!("sasl.password={password}"),
        ]
    }

    /// kcat options for mutual TLS with the client certificate.
    pub fn kcat_ssl(&self) -> Vec<String> {
        vec![
            "-b".into(),
            format!("127.0.0.1:{}", self.ssl),
            "-X".into(),
            "security.protocol=SSL".into(),
            "-X".into(),
            format!("ssl.ca.location={}", self.certs.ca.display()),
            "-X".into(),
            format!(
                "ssl.certificate.location={}",
                self.certs.client_cert.display()
            ),
            "-X".into(),
            format!("ssl.key.location={}", self.certs.client_key.display()),
        ]
    }
}
