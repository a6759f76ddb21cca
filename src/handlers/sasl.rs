//! SaslHandshake (17, v0–1) and SaslAuthenticate (36, v0–2), as Kafka's
//! `SaslServerAuthenticator` runs them on a SASL listener, before any other request:
//!
//! 1. ApiVersions (any number of times), then SaslHandshake naming a mechanism of
//!    `sasl.enabled.mechanisms`; another mechanism is answered UNSUPPORTED_SASL_MECHANISM with
//!    the enabled list, and the connection closed.
//! 2. v1: the tokens go in SaslAuthenticate requests. v0 (old clients): they follow as raw
//!    frames, a 4-byte size and the token, answered the same way.
//! 3. A failed exchange is answered SASL_AUTHENTICATION_FAILED with Kafka's message after
//!    `connection.failed.authentication.delay.ms` (so password guessing is slow) and closed;
//!    in v0 the connection is closed after the delay, as Kafka does.
//!
//! Anything else before the exchange ends closes the connection (`handlers::gate`). After it,
//! or on a listener without SASL, both APIs are answered ILLEGAL_SASL_STATE, as KafkaApis does.

use super::{errors, ConnectionState, Request, Response, SaslState};
use crate::metadata::store::ScramUsers;
use crate::protocol::errors::ErrorCode;
use crate::security::sasl::{CredentialStore, Exchange, SaslMechanism, Step};
use crate::security::scram::{self, Credential};
use crate::shard::Shard;
use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiKey, SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
    SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;
use std::time::Duration;

/// The user store as the exchange reads it: the users' SCRAM credentials in Kafka's text form.
struct Users<'a>(&'a ScramUsers);

impl CredentialStore for Users<'_> {
    fn credential(&self, user: &str, mechanism: scram::Mechanism) -> Option<Credential> {
        let text = self.0.get(user)?.get(mechanism.name())?;
        Credential::from_kafka_string(text).ok()
    }
}

pub fn handle_handshake(shard: &Shard, req: &Request, body: SaslHandshakeRequest) -> Response {
    let connection = &req.connection;
    let enabled: Vec<StrBytes> = connection
        .listener
        .mechanisms
        .iter()
        .map(|m| StrBytes::from_static_str(m.name()))
        .collect();
    let answer = |code: ErrorCode| {
        SaslHandshakeResponse::default()
            .with_error_code(code.code())
            .with_mechanisms(enabled.clone())
    };
    let mut state = connection.sasl.borrow_mut();
    match &*state {
        SaslState::AwaitingHandshake => {}
        SaslState::Exchanging { .. } => {
            return Response::Close("a second SaslHandshake during the exchange".into())
        }
        SaslState::NotRequired | SaslState::Authenticated => {
            errors::refused(
                shard,
                ApiKey::SaslHandshake,
                ErrorCode::ILLEGAL_SASL_STATE,
                &"not expecting a handshake",
            );
            return req.respond(
                ApiKey::SaslHandshake,
                &answer(ErrorCode::ILLEGAL_SASL_STATE),
            );
        }
    }
    let asked = body.mechanism.to_string();
    let mechanism =
        SaslMechanism::from_name(&asked).filter(|m| connection.listener.mechanisms.contains(m));
    let Some(mechanism) = mechanism else {
        errors::refused(
            shard,
            ApiKey::SaslHandshake,
            ErrorCode::UNSUPPORTED_SASL_MECHANISM,
            &format_args!("mechanism {asked:?}"),
        );
        return then_close(
            req.respond(
                ApiKey::SaslHandshake,
                &answer(ErrorCode::UNSUPPORTED_SASL_MECHANISM),
            ),
            format!("unsupported SASL mechanism {asked:?}"),
        );
    };
    *state = SaslState::Exchanging {
        exchange: Exchange::new(mechanism),
        raw_tokens: req.version == 0,
    };
    req.respond(ApiKey::SaslHandshake, &answer(ErrorCode::NONE))
}

pub async fn handle_authenticate(
    shard: &Shard,
    req: &Request,
    body: SaslAuthenticateRequest,
) -> Response {
    let connection = &req.connection;
    let expecting = matches!(
        &*connection.sasl.borrow(),
        SaslState::Exchanging {
            raw_tokens: false,
            ..
        }
    );
    if !expecting {
        if connection.authenticated() {
            errors::refused(
                shard,
                ApiKey::SaslAuthenticate,
                ErrorCode::ILLEGAL_SASL_STATE,
                &"not expecting an authentication",
            );
            let answer = SaslAuthenticateResponse::default()
                .with_error_code(ErrorCode::ILLEGAL_SASL_STATE.code())
                .with_error_message(Some(StrBytes::from_static_str(
                    "SaslAuthenticate request received after successful authentication",
                )));
            return req.respond(ApiKey::SaslAuthenticate, &answer);
        }
        return Response::Close("SaslAuthenticate before SaslHandshake".into());
    }
    match step(shard, connection, &body.auth_bytes) {
        Ok(token) => req.respond(
            ApiKey::SaslAuthenticate,
            &SaslAuthenticateResponse::default().with_auth_bytes(Bytes::from(token)),
        ),
        Err(message) => {
            delay_failure(shard).await;
            let answer = SaslAuthenticateResponse::default()
                .with_error_code(ErrorCode::SASL_AUTHENTICATION_FAILED.code())
                .with_error_message(Some(StrBytes::from_string(message.clone())));
            then_close(req.respond(ApiKey::SaslAuthenticate, &answer), message)
        }
    }
}

/// A raw token after SaslHandshake v0: answered with the next raw token, or, on failure,
/// the connection closed after the delay.
pub async fn raw_token(shard: &Shard, connection: &ConnectionState, token: &[u8]) -> Response {
    match step(shard, connection, token) {
        // Every server token goes back, PLAIN's empty one too (Kafka sends it; v0 clients
        // wait for it).
        Ok(next) => {
            let mut frame = BytesMut::with_capacity(4 + next.len());
            frame.put_i32(next.len() as i32);
            frame.put_slice(&next);
            Response::Frame(frame.freeze())
        }
        Err(message) => {
            delay_failure(shard).await;
            Response::Close(message)
        }
    }
}

/// Feeds `token` to the connection's exchange: the next token, or Kafka's failure message.
/// Success makes the connection its principal's.
fn step(shard: &Shard, connection: &ConnectionState, token: &[u8]) -> Result<Vec<u8>, String> {
    let metadata = shard.metadata();
    let mut state = connection.sasl.borrow_mut();
    let SaslState::Exchanging { exchange, .. } = &mut *state else {
        return Err("no SASL exchange in progress".into());
    };
    let mechanism = exchange.mechanism();
    match exchange.step(token, &Users(&metadata.scram_users)) {
        Step::Continue(next) => Ok(next),
        Step::Done { principal, last } => {
            tracing::debug!(%principal, mechanism = mechanism.name(), "authenticated");
            *connection.principal.borrow_mut() = principal;
            *state = SaslState::Authenticated;
            Ok(last)
        }
        Step::Failed(message) => {
            // Counted as SaslAuthenticate's SASL_AUTHENTICATION_FAILED (raw v0 tokens too).
            errors::refused(
                shard,
                ApiKey::SaslAuthenticate,
                ErrorCode::SASL_AUTHENTICATION_FAILED,
                &message,
            );
            tracing::info!(
                listener = %connection.listener.name,
                client = %connection.client_host,
                mechanism = mechanism.name(),
                %message,
                "authentication failed"
            );
            Err(message)
        }
    }
}

/// `connection.failed.authentication.delay.ms` before a failure is answered.
async fn delay_failure(shard: &Shard) {
    let ms = shard.config.broker.failed_authentication_delay_ms;
    if ms > 0 {
        glommio::timer::sleep(Duration::from_millis(ms)).await;
    }
}

/// `response`, then the connection closed.
fn then_close(response: Response, reason: String) -> Response {
    match response {
        Response::Frame(frame) => Response::FrameThenClose(frame, reason),
        other => other,
    }
}
