//! PLAIN logins remembered per shard, so a client that reconnects with the same password does
//! not cost the shard another PBKDF2 derivation.
//!
//! Ferrite checks a PLAIN password against the user's SCRAM credential (Kafka's PLAIN compares
//! a configured password and costs nothing): deriving the stored key takes the credential's
//! 4,096 or more HMAC rounds, milliseconds on the shard's thread, and a reconnect storm of
//! thousands of PLAIN clients after a restart would hold every other request of the shard
//! behind it. What is kept per user and mechanism is the credential the password matched
//! (salt, iterations, stored key) and an HMAC-SHA-256 of the password under a key drawn when
//! the shard starts, never the password. A changed credential or another password misses and
//! is derived again; only matches are kept, at most `ENTRIES_MAX` a shard.
//!
//! Lives on: each shard's thread.

use super::scram::{self, Credential};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::cell::RefCell;
use std::collections::HashMap;

/// Users remembered per shard; beyond it the table starts over.
const ENTRIES_MAX: usize = 10_000;

struct Remembered {
    salt: Vec<u8>,
    iterations: u32,
    stored_key: Vec<u8>,
    password_mac: Vec<u8>,
}

thread_local! {
    static KEY: Vec<u8> = scram::random_bytes(32);
    static MATCHED: RefCell<HashMap<(String, scram::Mechanism), Remembered>> =
        RefCell::new(HashMap::new());
}

#[cfg(test)]
thread_local! {
    static DERIVATIONS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

fn password_mac(password: &[u8]) -> Vec<u8> {
    KEY.with(|key| {
        let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length");
        mac.update(password);
        mac.finalize().into_bytes().to_vec()
    })
}

/// Whether `password` is the one `stored` (user's credential for `mechanism`) was made from.
pub fn matches(
    user: &str,
    mechanism: scram::Mechanism,
    stored: &Credential,
    password: &[u8],
) -> bool {
    let mac = password_mac(password);
    let key = (user.to_string(), mechanism);
    let remembered = MATCHED.with(|m| {
        m.borrow().get(&key).is_some_and(|r| {
            r.salt == stored.salt
                && r.iterations == stored.iterations
                && super::sasl::constant_time_eq(&r.stored_key, &stored.stored_key)
                && super::sasl::constant_time_eq(&r.password_mac, &mac)
        })
    });
    if remembered {
        return true;
    }
    #[cfg(test)]
    DERIVATIONS.with(|d| d.set(d.get() + 1));
    let derived = Credential::new(mechanism, password, &stored.salt, stored.iterations);
    if !super::sasl::constant_time_eq(&derived.stored_key, &stored.stored_key) {
        return false;
    }
    MATCHED.with(|m| {
        let mut m = m.borrow_mut();
        if m.len() >= ENTRIES_MAX {
            m.clear();
        }
        m.insert(
            key,
            Remembered {
                salt: stored.salt.clone(),
                iterations: stored.iterations,
                stored_key: stored.stored_key.clone(),
                password_mac: mac,
            },
        );
    });
    true
}

/// PBKDF2 derivations this thread has made for PLAIN (for tests).
#[cfg(test)]
pub fn derivations() -> u64 {
    DERIVATIONS.with(|d| d.get())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_matched_password_is_not_derived_again_and_nothing_else_skips_the_derivation() {
        let m = scram::Mechanism::ALL[0];
        let salt = scram::random_bytes(16);
        let stored = Credential::new(m, b"secret", &salt, 4096);
        let before = derivations();
        assert!(matches("alice", m, &stored, b"secret"));
        assert!(matches("alice", m, &stored, b"secret"));
        assert_eq!(derivations() - before, 1, "the second login is remembered");
        assert!(!matches("alice", m, &stored, b"wrong"));
        assert!(!matches("alice", m, &stored, b"wrong"));
        assert_eq!(
            derivations() - before,
            3,
            "a wrong password is derived every time"
        );
        // Another user with the same credential bytes is not this one.
        assert!(matches("bob", m, &stored, b"secret"));
        assert_eq!(derivations() - before, 4);
        // A changed credential (a new salt, as an alteration makes) is checked afresh.
        let changed = Credential::new(m, b"new-secret", &scram::random_bytes(16), 4096);
        assert!(!matches("alice", m, &changed, b"secret"));
        assert!(matches("alice", m, &changed, b"new-secret"));
        assert!(matches("alice", m, &changed, b"new-secret"));
        assert_eq!(derivations() - before, 6);
    }
}
