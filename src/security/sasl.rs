//! The server side of SASL PLAIN (RFC 4616) and SCRAM-SHA-256/512 (RFC 5802, RFC 7677), as
//! Kafka's `PlainSaslServer` and `ScramSaslServer` run them, against the SCRAM credentials of
//! the user store. PLAIN has no credential of its own: the password is checked by deriving
//! the user's SCRAM stored key from it with the stored salt and iteration count (once per
//! user and password on each shard: `plain_logins`).
//!
//! The exchange holds no I/O: each client token goes in, the next server token (or the end)
//! comes out, so SaslAuthenticate and the raw tokens of SaslHandshake v0 share it.

use super::principal::Principal;
use super::scram::{self, Credential};
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;

/// A mechanism a SASL listener may enable (`sasl.enabled.mechanisms`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SaslMechanism {
    Plain,
    Scram(scram::Mechanism),
}

impl SaslMechanism {
    pub fn name(self) -> &'static str {
        match self {
            SaslMechanism::Plain => "PLAIN",
            SaslMechanism::Scram(m) => m.name(),
        }
    }

    pub fn from_name(name: &str) -> Option<SaslMechanism> {
        match name {
            "PLAIN" => Some(SaslMechanism::Plain),
            other => scram::Mechanism::from_name(other).map(SaslMechanism::Scram),
        }
    }
}

/// Looks up a user's credential for a mechanism in the user store.
pub trait CredentialStore {
    fn credential(&self, user: &str, mechanism: scram::Mechanism) -> Option<Credential>;
}

/// What a client token leads to.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// Send this token and wait for the client's next one.
    Continue(Vec<u8>),
    /// Authenticated: send this last token (possibly empty).
    Done { principal: Principal, last: Vec<u8> },
    /// Refused, with the message SaslAuthenticate carries.
    Failed(String),
}

/// One connection's exchange in progress.
pub struct Exchange {
    mechanism: SaslMechanism,
    state: State,
}

enum State {
    First,
    ScramFinal(Box<ScramFinal>),
    Finished,
}

/// What SCRAM keeps between the client's two messages.
struct ScramFinal {
    mechanism: scram::Mechanism,
    user: String,
    credential: Credential,
    gs2_header: String,
    client_first_bare: String,
    server_first: String,
    nonce: String,
}

/// Kafka's message for a bad user or password, whichever it was (no user enumeration).
fn invalid_credentials(mechanism: SaslMechanism) -> Step {
    Step::Failed(format!(
        "Authentication failed during authentication due to invalid credentials with SASL \
         mechanism {}",
        mechanism.name()
    ))
}

impl Exchange {
    pub fn new(mechanism: SaslMechanism) -> Exchange {
        Exchange {
            mechanism,
            state: State::First,
        }
    }

    pub fn mechanism(&self) -> SaslMechanism {
        self.mechanism
    }

    /// Takes the client's next token.
    pub fn step(&mut self, token: &[u8], users: &dyn CredentialStore) -> Step {
        let state = std::mem::replace(&mut self.state, State::Finished);
        match (self.mechanism, state) {
            (SaslMechanism::Plain, State::First) => plain(token, users),
            (SaslMechanism::Scram(m), State::First) => match scram_first(m, token, users) {
                Ok((next, reply)) => {
                    self.state = State::ScramFinal(Box::new(next));
                    Step::Continue(reply.into_bytes())
                }
                Err(step) => step,
            },
            (_, State::ScramFinal(pending)) => scram_final(*pending, token),
            (_, State::Finished) => Step::Failed("the SASL exchange is already over".into()),
        }
    }
}

/// `[authzid] NUL authcid NUL password`.
fn plain(token: &[u8], users: &dyn CredentialStore) -> Step {
    let Ok(text) = std::str::from_utf8(token) else {
        return Step::Failed("Invalid SASL/PLAIN response: not UTF-8".into());
    };
    let parts: Vec<&str> = text.split('\0').collect();
    let [authzid, user, password] = parts[..] else {
        return Step::Failed("Invalid SASL/PLAIN response: expected 3 tokens".into());
    };
    if user.is_empty() {
        return Step::Failed("Authentication failed: username not specified".into());
    }
    if password.is_empty() {
        return Step::Failed("Authentication failed: password not specified".into());
    }
    if !authzid.is_empty() && authzid != user {
        return Step::Failed(
            "Authentication failed: Client requested an authorization id that is different \
             from username"
                .into(),
        );
    }
    let matches = scram::Mechanism::ALL.into_iter().any(|m| {
        users.credential(user, m).is_some_and(|stored| {
            super::plain_logins::matches(user, m, &stored, password.as_bytes())
        })
    });
    if !matches {
        return Step::Failed("Authentication failed: Invalid username or password".into());
    }
    Step::Done {
        principal: Principal::user(user),
        last: Vec::new(),
    }
}

/// RFC 5802's `saslname`: `=2C` is `,` and `=3D` is `=`; any other `=` is malformed.
fn decode_saslname(name: &str) -> Option<String> {
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(at) = rest.find('=') {
        out.push_str(&rest[..at]);
        match rest.get(at..at + 3) {
            Some("=2C") => out.push(','),
            Some("=3D") => out.push('='),
            _ => return None,
        }
        rest = &rest[at + 3..];
    }
    out.push_str(rest);
    Some(out)
}

/// The client-first message: `n,[a=authzid],n=user,r=nonce[,extensions]`. Channel binding
/// (`p=`) and `y` are refused, as Kafka refuses them; so are delegation tokens
/// (`tokenauth=true`), which Ferrite does not issue.
fn scram_first(
    mechanism: scram::Mechanism,
    token: &[u8],
    users: &dyn CredentialStore,
) -> Result<(ScramFinal, String), Step> {
    let malformed = |why: &str| Step::Failed(format!("Invalid SCRAM client first message: {why}"));
    let text = std::str::from_utf8(token).map_err(|_| malformed("not UTF-8"))?;
    let Some(rest) = text.strip_prefix("n,") else {
        return Err(malformed(
            "only the gs2 header n (no channel binding) is supported",
        ));
    };
    let (authzid, bare) = rest
        .split_once(',')
        .ok_or_else(|| malformed("no bare part"))?;
    let authzid = match authzid {
        "" => None,
        a => Some(
            a.strip_prefix("a=")
                .and_then(decode_saslname)
                .ok_or_else(|| malformed("bad authzid"))?,
        ),
    };
    let mut fields = bare.split(',');
    let user = fields
        .next()
        .and_then(|f| f.strip_prefix("n="))
        .and_then(decode_saslname)
        .ok_or_else(|| malformed("no user name"))?;
    let client_nonce = fields
        .next()
        .and_then(|f| f.strip_prefix("r="))
        .filter(|n| !n.is_empty())
        .ok_or_else(|| malformed("no nonce"))?;
    if fields.any(|f| f == "tokenauth=true") {
        return Err(Step::Failed(
            "Authentication failed: delegation tokens are not supported".into(),
        ));
    }
    if authzid.as_deref().is_some_and(|a| a != user) {
        return Err(Step::Failed(
            "Authentication failed: Client requested an authorization id that is different \
             from username"
                .into(),
        ));
    }
    let Some(credential) = users.credential(&user, mechanism) else {
        return Err(invalid_credentials(SaslMechanism::Scram(mechanism)));
    };
    let nonce = format!(
        "{client_nonce}{}",
        BASE64.encode(scram::random_bytes(18)).replace('=', "")
    );
    let server_first = format!(
        "r={nonce},s={},i={}",
        BASE64.encode(&credential.salt),
        credential.iterations
    );
    let gs2_header = format!("n,{},", rest.split_once(',').map_or("", |(a, _)| a));
    Ok((
        ScramFinal {
            mechanism,
            user,
            credential,
            gs2_header,
            client_first_bare: bare.to_string(),
            server_first: server_first.clone(),
            nonce,
        },
        server_first,
    ))
}

/// The client-final message: `c=<gs2 header, base64>,r=<nonce>[,extensions],p=<proof>`.
fn scram_final(pending: ScramFinal, token: &[u8]) -> Step {
    let mechanism = SaslMechanism::Scram(pending.mechanism);
    let malformed = |why: &str| Step::Failed(format!("Invalid SCRAM client final message: {why}"));
    let Ok(text) = std::str::from_utf8(token) else {
        return malformed("not UTF-8");
    };
    let Some((without_proof, proof)) = text.rsplit_once(",p=") else {
        return malformed("no proof");
    };
    let mut fields = without_proof.split(',');
    let binding = fields.next().and_then(|f| f.strip_prefix("c="));
    if binding.and_then(|b| BASE64.decode(b).ok()).as_deref() != Some(pending.gs2_header.as_bytes())
    {
        return malformed("the channel binding does not match the first message");
    }
    // Kafka's `ScramSaslServer` checks that the nonce *ends with* the server-first one, not
    // that it equals it: librdkafka before 2.1 sends its own nonce in front of the whole
    // server nonce (which already starts with it), and Kafka accepts that.
    let echoed = fields.next().and_then(|f| f.strip_prefix("r="));
    if !echoed.is_some_and(|n| n.ends_with(&pending.nonce)) {
        return malformed("the nonce does not match");
    }
    let Ok(proof) = BASE64.decode(proof) else {
        return malformed("the proof is not base64");
    };
    let auth_message = format!(
        "{},{},{}",
        pending.client_first_bare, pending.server_first, without_proof
    );
    match pending
        .credential
        .verify_proof(pending.mechanism, auth_message.as_bytes(), &proof)
    {
        Some(server_signature) => Step::Done {
            principal: Principal::user(pending.user),
            last: format!("v={}", BASE64.encode(server_signature)).into_bytes(),
        },
        None => invalid_credentials(mechanism),
    }
}

/// The client side of a SCRAM exchange (this broker logging in to another): the first
/// message, then the final one from the server's reply, then the check of its signature.
pub struct ScramClient {
    mechanism: scram::Mechanism,
    password: String,
    client_first_bare: String,
    nonce: String,
    expected_signature: Option<Vec<u8>>,
}

impl ScramClient {
    pub fn new(mechanism: scram::Mechanism, user: &str, password: &str) -> ScramClient {
        let user = user.replace('=', "=3D").replace(',', "=2C");
        let nonce = BASE64.encode(scram::random_bytes(18)).replace('=', "");
        ScramClient {
            mechanism,
            password: password.to_string(),
            client_first_bare: format!("n={user},r={nonce}"),
            nonce,
            expected_signature: None,
        }
    }

    pub fn first_message(&self) -> Vec<u8> {
        format!("n,,{}", self.client_first_bare).into_bytes()
    }

    /// The client-final message for the server-first `reply`.
    pub fn final_message(&mut self, reply: &[u8]) -> Result<Vec<u8>, String> {
        let text = std::str::from_utf8(reply).map_err(|_| "server-first is not UTF-8")?;
        let field = |name: &str| {
            text.split(',')
                .find_map(|f| f.strip_prefix(name))
                .ok_or_else(|| format!("server-first has no {name}"))
        };
        let nonce = field("r=")?;
        if !nonce.starts_with(&self.nonce) || nonce.len() == self.nonce.len() {
            return Err("the server's nonce does not extend ours".into());
        }
        let salt = BASE64
            .decode(field("s=")?)
            .map_err(|e| format!("salt: {e}"))?;
        let iterations: u32 = field("i=")?.parse().map_err(|_| "bad iteration count")?;
        if iterations < scram::MIN_ITERATIONS {
            return Err(format!("{iterations} iterations is below the minimum"));
        }
        let without_proof = format!("c=biws,r={nonce}");
        let auth = format!("{},{text},{without_proof}", self.client_first_bare);
        let (proof, signature) = scram::client_proof(
            self.mechanism,
            &self.password,
            &salt,
            iterations,
            auth.as_bytes(),
        );
        self.expected_signature = Some(signature);
        Ok(format!("{without_proof},p={}", BASE64.encode(proof)).into_bytes())
    }

    /// Checks the server-final message (`v=<signature>`): the server knew the credential.
    pub fn check_server_final(&self, reply: &[u8]) -> Result<(), String> {
        let text = std::str::from_utf8(reply).map_err(|_| "server-final is not UTF-8")?;
        let signature = text
            .strip_prefix("v=")
            .and_then(|v| BASE64.decode(v).ok())
            .ok_or_else(|| format!("server-final {text:?} has no signature"))?;
        match &self.expected_signature {
            Some(expected) if constant_time_eq(expected, &signature) => Ok(()),
            _ => Err("the server's signature does not match".into()),
        }
    }
}

pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    struct Users(HashMap<(String, scram::Mechanism), Credential>);

    impl CredentialStore for Users {
        fn credential(&self, user: &str, m: scram::Mechanism) -> Option<Credential> {
            self.0.get(&(user.to_string(), m)).cloned()
        }
    }

    fn users() -> Users {
        let salt = BASE64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
        let mut map = HashMap::new();
        map.insert(
            ("user".to_string(), scram::Mechanism::Sha256),
            Credential::new(scram::Mechanism::Sha256, b"pencil", &salt, 4096),
        );
        Users(map)
    }

    /// RFC 7677 §3 with the server's half of the nonce ours: the client side is computed here
    /// as a client would, and the server's signature checked.
    #[test]
    fn a_scram_sha_256_exchange_authenticates_and_a_wrong_proof_does_not() {
        let users = users();
        for good in [true, false] {
            let mut exchange = Exchange::new(SaslMechanism::Scram(scram::Mechanism::Sha256));
            let first = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO";
            let Step::Continue(server_first) = exchange.step(first, &users) else {
                panic!("no server-first message");
            };
            let server_first = String::from_utf8(server_first).unwrap();
            let nonce = server_first
                .split(',')
                .next()
                .unwrap()
                .strip_prefix("r=")
                .unwrap();
            assert!(nonce.starts_with("rOprNGfwEbeRWgbNEkqO"));
            let without_proof = format!("c=biws,r={nonce}");
            let auth = format!("n=user,r=rOprNGfwEbeRWgbNEkqO,{server_first},{without_proof}");
            let password = if good { "pencil" } else { "pencils" };
            let (proof, expected_signature) = scram::client_proof(
                scram::Mechanism::Sha256,
                password,
                &users.0.values().next().unwrap().salt,
                4096,
                auth.as_bytes(),
            );
            let last = format!("{without_proof},p={}", BASE64.encode(proof));
            match exchange.step(last.as_bytes(), &users) {
                Step::Done { principal, last } => {
                    assert!(good);
                    assert_eq!(principal, Principal::user("user"));
                    assert_eq!(
                        last,
                        format!("v={}", BASE64.encode(expected_signature)).into_bytes()
                    );
                }
                Step::Failed(m) => {
                    assert!(!good);
                    assert!(m.contains("invalid credentials"), "{m}");
                }
                Step::Continue(_) => panic!("a third step"),
            }
        }
    }

    #[test]
    fn our_scram_client_and_server_agree() {
        let users = users();
        for password in ["pencil", "wrong"] {
            let mut client = ScramClient::new(scram::Mechanism::Sha256, "user", password);
            let mut server = Exchange::new(SaslMechanism::Scram(scram::Mechanism::Sha256));
            let Step::Continue(first) = server.step(&client.first_message(), &users) else {
                panic!("no server-first");
            };
            let last = client.final_message(&first).unwrap();
            match server.step(&last, &users) {
                Step::Done { last, .. } => {
                    assert_eq!(password, "pencil");
                    client.check_server_final(&last).unwrap();
                    assert!(client.check_server_final(b"v=AAAA").is_err());
                }
                Step::Failed(_) => assert_eq!(password, "wrong"),
                Step::Continue(_) => panic!("a third step"),
            }
        }
    }

    #[test]
    fn plain_checks_the_password_against_the_scram_credential() {
        let users = users();
        let ok = Exchange::new(SaslMechanism::Plain).step(b"\0user\0pencil", &users);
        assert!(matches!(ok, Step::Done { .. }));
        for bad in [
            &b"\0user\0pencils"[..],
            b"\0nobody\0pencil",
            b"other\0user\0pencil",
            b"user\0pencil",
            b"\0\0pencil",
        ] {
            let step = Exchange::new(SaslMechanism::Plain).step(bad, &users);
            assert!(matches!(step, Step::Failed(_)), "{bad:?}");
        }
    }

    #[test]
    fn scram_refuses_unknown_users_channel_binding_and_tokens() {
        let users = users();
        let m = SaslMechanism::Scram(scram::Mechanism::Sha256);
        for first in [
            &b"n,,n=nobody,r=abc"[..],
            b"p=tls-unique,,n=user,r=abc",
            b"y,,n=user,r=abc",
            b"n,,n=user,r=abc,tokenauth=true",
            b"n,a=other,n=user,r=abc",
            b"n,,n=us=er,r=abc",
        ] {
            let step = Exchange::new(m).step(first, &users);
            assert!(matches!(step, Step::Failed(_)), "{first:?}");
        }
        assert_eq!(decode_saslname("a=2Cb=3Dc").as_deref(), Some("a,b=c"));
    }
}
