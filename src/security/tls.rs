//! TLS for SSL and SASL_SSL listeners, and for this broker's own connections to the others,
//! with rustls (TLS 1.2 and 1.3) from Kafka's `ssl.*` settings.
//!
//! Kafka's PEM stores only (`ssl.keystore.type=PEM`, `ssl.truststore.type=PEM`): JKS and PKCS12
//! need a JVM's key tools, and `openssl` or `keytool` turns either into PEM. The key store is a
//! PEM file with the private key and the certificate chain (`ssl.keystore.location`), or both
//! inline (`ssl.keystore.key`, `ssl.keystore.certificate.chain`). An encrypted private key
//! (`ssl.key.password`) is refused at start-up with that reason rather than failing later.

use crate::config::SecuritySettings;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, ServerConfig, SignatureScheme};
use std::sync::Arc;

/// `ssl.client.auth`: whether clients of a TLS listener show a certificate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientAuth {
    None,
    Requested,
    Required,
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The TLS versions of `ssl.enabled.protocols` (Kafka's default: TLSv1.2,TLSv1.3).
fn versions(
    settings: &SecuritySettings,
    listener: &str,
) -> Result<Vec<&'static rustls::SupportedProtocolVersion>, String> {
    let text = settings
        .for_listener(listener, "ssl.enabled.protocols")
        .unwrap_or("TLSv1.2,TLSv1.3");
    let mut out = Vec::new();
    for name in text.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        match name {
            "TLSv1.2" => out.push(&rustls::version::TLS12),
            "TLSv1.3" => out.push(&rustls::version::TLS13),
            other => {
                return Err(format!(
                    "ssl.enabled.protocols: {other} is not offered (TLSv1.2 and TLSv1.3 are)"
                ))
            }
        }
    }
    if out.is_empty() {
        return Err("ssl.enabled.protocols names no protocol".into());
    }
    Ok(out)
}

fn require_pem(settings: &SecuritySettings, listener: &str, key: &str) -> Result<(), String> {
    match settings.for_listener(listener, key) {
        None => Ok(()),
        Some(t) if t.eq_ignore_ascii_case("PEM") => Ok(()),
        Some(t) => Err(format!(
            "{key}={t}: only PEM stores are read (convert with openssl or keytool)"
        )),
    }
}

/// The key store: the private key and its certificate chain, or `None` when none is set.
fn key_store(
    settings: &SecuritySettings,
    listener: &str,
) -> Result<Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>, String> {
    require_pem(settings, listener, "ssl.keystore.type")?;
    if settings
        .for_listener(listener, "ssl.key.password")
        .is_some()
    {
        return Err(
            "ssl.key.password: encrypted private keys are not read; store the key \
                    unencrypted (openssl pkey -in key.pem -out plain.pem) and protect the file"
                .into(),
        );
    }
    let location = settings.for_listener(listener, "ssl.keystore.location");
    let inline_key = settings.for_listener(listener, "ssl.keystore.key");
    let inline_chain = settings.for_listener(listener, "ssl.keystore.certificate.chain");
    let (key_pem, chain_pem) = match (location, inline_key, inline_chain) {
        (None, None, None) => return Ok(None),
        (Some(path), None, None) => {
            let pem =
                std::fs::read(path).map_err(|e| format!("ssl.keystore.location {path}: {e}"))?;
            (pem.clone(), pem)
        }
        (None, Some(key), Some(chain)) => (key.as_bytes().to_vec(), chain.as_bytes().to_vec()),
        _ => {
            return Err(
                "give either ssl.keystore.location, or both ssl.keystore.key and \
                        ssl.keystore.certificate.chain"
                    .into(),
            )
        }
    };
    let chain = CertificateDer::pem_slice_iter(&chain_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("key store certificates: {e}"))?;
    if chain.is_empty() {
        return Err("the key store holds no certificate".into());
    }
    let key = PrivateKeyDer::from_pem_slice(&key_pem)
        .map_err(|e| format!("key store private key: {e}"))?;
    Ok(Some((chain, key)))
}

/// The trust store's certificates, or `None` when none is set.
fn trust_store(
    settings: &SecuritySettings,
    listener: &str,
) -> Result<Option<RootCertStore>, String> {
    require_pem(settings, listener, "ssl.truststore.type")?;
    let pem = match (
        settings.for_listener(listener, "ssl.truststore.location"),
        settings.for_listener(listener, "ssl.truststore.certificates"),
    ) {
        (None, None) => return Ok(None),
        (Some(path), None) => {
            std::fs::read(path).map_err(|e| format!("ssl.truststore.location {path}: {e}"))?
        }
        (None, Some(inline)) => inline.as_bytes().to_vec(),
        (Some(_), Some(_)) => {
            return Err("give either ssl.truststore.location or ssl.truststore.certificates".into())
        }
    };
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        let cert = cert.map_err(|e| format!("trust store: {e}"))?;
        roots
            .add(cert)
            .map_err(|e| format!("trust store certificate: {e}"))?;
    }
    if roots.is_empty() {
        return Err("the trust store holds no certificate".into());
    }
    Ok(Some(roots))
}

pub fn client_auth(settings: &SecuritySettings, listener: &str) -> Result<ClientAuth, String> {
    match settings
        .for_listener(listener, "ssl.client.auth")
        .unwrap_or("none")
        .to_ascii_lowercase()
        .as_str()
    {
        "none" => Ok(ClientAuth::None),
        "requested" => Ok(ClientAuth::Requested),
        "required" => Ok(ClientAuth::Required),
        other => Err(format!(
            "ssl.client.auth={other}: one of none, requested, required"
        )),
    }
}

/// The TLS server side of `listener`.
pub fn server_config(
    settings: &SecuritySettings,
    listener: &str,
) -> Result<Arc<ServerConfig>, String> {
    let provider = provider();
    let (chain, key) = key_store(settings, listener)?.ok_or_else(|| {
        "a TLS listener needs a key store: ssl.keystore.location (PEM with the key and the \
         certificate chain)"
            .to_string()
    })?;
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions(settings, listener)?)
        .map_err(|e| e.to_string())?;
    let builder = match client_auth(settings, listener)? {
        ClientAuth::None => builder.with_no_client_auth(),
        auth => {
            let roots = trust_store(settings, listener)?.ok_or_else(|| {
                "ssl.client.auth needs a trust store (ssl.truststore.location) to check client \
                 certificates against"
                    .to_string()
            })?;
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let verifier = if auth == ClientAuth::Requested {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            builder.with_client_cert_verifier(verifier.build().map_err(|e| e.to_string())?)
        }
    };
    let mut config = builder
        .with_single_cert(chain, key)
        .map_err(|e| format!("key store: {e}"))?;
    // Kafka clients do not negotiate an application protocol.
    config.alpn_protocols.clear();
    Ok(Arc::new(config))
}

/// The TLS client side of this broker's connections to `listener` on other brokers: their
/// certificates checked against the trust store, this broker's own certificate shown when a
/// key store is set. With `ssl.endpoint.identification.algorithm` empty (Kafka's way to turn
/// host name checks off) the chain is still verified, the host name is not.
pub fn client_config(
    settings: &SecuritySettings,
    listener: &str,
) -> Result<Arc<ClientConfig>, String> {
    let provider = provider();
    let roots = Arc::new(trust_store(settings, listener)?.ok_or_else(|| {
        "brokers connecting over TLS need a trust store (ssl.truststore.location)".to_string()
    })?);
    let verifier = WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
        .build()
        .map_err(|e| e.to_string())?;
    let check_host = settings
        .for_listener(listener, "ssl.endpoint.identification.algorithm")
        .is_none_or(|a| !a.trim().is_empty());
    let builder = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&versions(settings, listener)?)
        .map_err(|e| e.to_string())?;
    let builder = if check_host {
        builder.with_webpki_verifier(verifier)
    } else {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyHostName(verifier)))
    };
    let config = match key_store(settings, listener)? {
        Some((chain, key)) => builder
            .with_client_auth_cert(chain, key)
            .map_err(|e| format!("key store: {e}"))?,
        None => builder.with_no_client_auth(),
    };
    Ok(Arc::new(config))
}

/// A verifier that checks the chain like `inner` but accepts any host name in it.
#[derive(Debug)]
struct AnyHostName(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyHostName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(rustls::CertificateError::NotValidForName))
            | Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}
