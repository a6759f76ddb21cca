//! SCRAM credentials (RFC 5802, RFC 7677) as Kafka stores them: never the password, only a
//! random salt, the iteration count, and the stored and server keys derived from the salted
//! password. Kafka's text form, kept in `/config/users/<name>` under the mechanism's name:
//! `salt=<base64>,stored_key=<base64>,server_key=<base64>,iterations=<n>`.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256, Sha512};

/// Kafka's minimum (`ScramMechanism.minIterations`); `ferrite user add` uses the RFC's 4096
/// unless told more.
pub const MIN_ITERATIONS: u32 = 4096;
/// Kafka's maximum.
pub const MAX_ITERATIONS: u32 = 16384;

#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Mechanism {
    Sha256,
    Sha512,
}

impl Mechanism {
    pub const ALL: [Mechanism; 2] = [Mechanism::Sha256, Mechanism::Sha512];

    /// The SASL mechanism name, which is also the config key credentials are kept under.
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Sha256 => "SCRAM-SHA-256",
            Mechanism::Sha512 => "SCRAM-SHA-512",
        }
    }

    pub fn from_name(name: &str) -> Option<Mechanism> {
        Mechanism::ALL.into_iter().find(|m| m.name() == name)
    }

    /// The mechanism's code in DescribeUserScramCredentials / AlterUserScramCredentials
    /// (Kafka's `ScramMechanism.type`; 0 is UNKNOWN).
    pub fn code(self) -> i8 {
        match self {
            Mechanism::Sha256 => 1,
            Mechanism::Sha512 => 2,
        }
    }

    pub fn from_code(code: i8) -> Option<Mechanism> {
        Mechanism::ALL.into_iter().find(|m| m.code() == code)
    }

    fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        match self {
            Mechanism::Sha256 => {
                let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key");
                mac.update(data);
                mac.finalize().into_bytes().to_vec()
            }
            Mechanism::Sha512 => {
                let mut mac = Hmac::<Sha512>::new_from_slice(key).expect("HMAC takes any key");
                mac.update(data);
                mac.finalize().into_bytes().to_vec()
            }
        }
    }

    fn hash(self, data: &[u8]) -> Vec<u8> {
        match self {
            Mechanism::Sha256 => Sha256::digest(data).to_vec(),
            Mechanism::Sha512 => Sha512::digest(data).to_vec(),
        }
    }

    /// RFC 5802 `Hi(password, salt, i)`: PBKDF2 with HMAC of the mechanism's hash.
    fn salted_password(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        match self {
            Mechanism::Sha256 => {
                let mut out = vec![0u8; 32];
                pbkdf2::pbkdf2_hmac::<Sha256>(password, salt, iterations, &mut out);
                out
            }
            Mechanism::Sha512 => {
                let mut out = vec![0u8; 64];
                pbkdf2::pbkdf2_hmac::<Sha512>(password, salt, iterations, &mut out);
                out
            }
        }
    }
}

/// What is kept of one user's password for one mechanism.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Credential {
    pub salt: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
    pub iterations: u32,
}

impl Credential {
    /// The credential of `password` with `salt` (random, from the caller) and `iterations`.
    pub fn new(mechanism: Mechanism, password: &[u8], salt: &[u8], iterations: u32) -> Credential {
        let salted = mechanism.salted_password(password, salt, iterations);
        Credential::from_salted_password(mechanism, &salted, salt, iterations)
    }

    /// From a salted password, as AlterUserScramCredentials sends it.
    pub fn from_salted_password(
        mechanism: Mechanism,
        salted: &[u8],
        salt: &[u8],
        iterations: u32,
    ) -> Credential {
        let client_key = mechanism.hmac(salted, b"Client Key");
        Credential {
            salt: salt.to_vec(),
            stored_key: mechanism.hash(&client_key),
            server_key: mechanism.hmac(salted, b"Server Key"),
            iterations,
        }
    }

    /// The server's check of a client's proof (RFC 5802 §3): ClientKey = ClientProof XOR
    /// HMAC(StoredKey, AuthMessage), and H(ClientKey) must be StoredKey. Gives the server
    /// signature, HMAC(ServerKey, AuthMessage), when the proof holds.
    pub fn verify_proof(
        &self,
        mechanism: Mechanism,
        auth_message: &[u8],
        proof: &[u8],
    ) -> Option<Vec<u8>> {
        let signature = mechanism.hmac(&self.stored_key, auth_message);
        let client_key: Vec<u8> = proof.iter().zip(&signature).map(|(p, s)| p ^ s).collect();
        let holds = proof.len() == signature.len()
            && crate::security::sasl::constant_time_eq(
                &mechanism.hash(&client_key),
                &self.stored_key,
            );
        holds.then(|| mechanism.hmac(&self.server_key, auth_message))
    }

    /// Kafka's text form (`ScramCredentialUtils.credentialToString`).
    pub fn to_kafka_string(&self) -> String {
        format!(
            "salt={},stored_key={},server_key={},iterations={}",
            BASE64.encode(&self.salt),
            BASE64.encode(&self.stored_key),
            BASE64.encode(&self.server_key),
            self.iterations
        )
    }

    /// Parses Kafka's text form.
    pub fn from_kafka_string(text: &str) -> Result<Credential, String> {
        let (mut salt, mut stored_key, mut server_key, mut iterations) = (None, None, None, None);
        for part in text.split(',') {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| format!("{part:?} is not key=value"))?;
            let bytes = || BASE64.decode(v).map_err(|e| format!("{k}: {e}"));
            match k {
                "salt" => salt = Some(bytes()?),
                "stored_key" => stored_key = Some(bytes()?),
                "server_key" => server_key = Some(bytes()?),
                "iterations" => {
                    iterations = Some(v.parse::<u32>().map_err(|e| format!("iterations: {e}"))?)
                }
                _ => {}
            }
        }
        match (salt, stored_key, server_key, iterations) {
            (Some(salt), Some(stored_key), Some(server_key), Some(iterations)) => Ok(Credential {
                salt,
                stored_key,
                server_key,
                iterations,
            }),
            _ => Err(format!(
                "{text:?} lacks salt, stored_key, server_key or iterations"
            )),
        }
    }
}

/// The client's side of RFC 5802 §3: its proof for `auth_message`, and the server signature
/// it must then receive (this broker as a client of another, and the tests).
pub fn client_proof(
    mechanism: Mechanism,
    password: &str,
    salt: &[u8],
    iterations: u32,
    auth_message: &[u8],
) -> (Vec<u8>, Vec<u8>) {
    let salted = mechanism.salted_password(password.as_bytes(), salt, iterations);
    let client_key = mechanism.hmac(&salted, b"Client Key");
    let stored_key = mechanism.hash(&client_key);
    let signature = mechanism.hmac(&stored_key, auth_message);
    let proof = client_key
        .iter()
        .zip(&signature)
        .map(|(k, s)| k ^ s)
        .collect();
    let server_key = mechanism.hmac(&salted, b"Server Key");
    (proof, mechanism.hmac(&server_key, auth_message))
}

/// `n` random bytes from the kernel (salts).
pub fn random_bytes(n: usize) -> Vec<u8> {
    let mut out = vec![0u8; n];
    let mut filled = 0;
    while filled < n {
        // SAFETY: getrandom writes at most `n - filled` bytes into the rest of `out`.
        let got = unsafe { libc::getrandom(out[filled..].as_mut_ptr().cast(), n - filled, 0) };
        assert!(
            got > 0,
            "getrandom failed: {}",
            std::io::Error::last_os_error()
        );
        filled += got as usize;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7677 §3's SCRAM-SHA-256 exchange: user "user", password "pencil".
    #[test]
    fn the_rfc_7677_exchange_verifies_with_the_stored_credential() {
        let salt = BASE64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
        let credential = Credential::new(Mechanism::Sha256, b"pencil", &salt, 4096);
        let auth_message = "n=user,r=rOprNGfwEbeRWgbNEkqO,\
r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096,\
c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
        let proof = BASE64
            .decode("dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
            .unwrap();
        let server_signature = credential
            .verify_proof(Mechanism::Sha256, auth_message.as_bytes(), &proof)
            .expect("the RFC's proof verifies");
        let (client_side_proof, expected) = client_proof(
            Mechanism::Sha256,
            "pencil",
            &salt,
            4096,
            auth_message.as_bytes(),
        );
        assert_eq!(client_side_proof, proof);
        assert_eq!(expected, server_signature);
        assert_eq!(
            BASE64.encode(server_signature),
            "6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
        );
        let mut wrong = proof.clone();
        wrong[0] ^= 1;
        assert!(credential
            .verify_proof(Mechanism::Sha256, auth_message.as_bytes(), &wrong)
            .is_none());
    }

    #[test]
    fn kafkas_text_form_round_trips_and_holds_no_password() {
        let c = Credential::new(
            Mechanism::Sha512,
            b"secret-password",
            &random_bytes(32),
            4096,
        );
        let text = c.to_kafka_string();
        assert!(
            text.starts_with("salt=") && text.ends_with(",iterations=4096"),
            "{text}"
        );
        assert!(!text.contains("secret"));
        assert_eq!(Credential::from_kafka_string(&text).unwrap(), c);
        assert!(Credential::from_kafka_string("salt=AA==,iterations=1").is_err());
        assert_ne!(random_bytes(16), random_bytes(16));
    }
}
