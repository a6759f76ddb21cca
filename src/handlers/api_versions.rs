//! ApiVersions: which APIs and versions this broker serves (`SUPPORTED`).
//!
//! From v3 the client names its software (KIP-511); Kafka refuses names and versions outside
//! `[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?` with INVALID_REQUEST
//! (`ApiVersionsRequest.isValid`), and so does this.

use super::{errors, Request, Response, SUPPORTED};
use crate::protocol::errors::ErrorCode;
use crate::shard::Shard;
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse};

pub fn handle(shard: &Shard, req: &Request, body: ApiVersionsRequest) -> Response {
    if req.version >= 3 {
        for (what, value) in [
            ("client software name", body.client_software_name.as_str()),
            (
                "client software version",
                body.client_software_version.as_str(),
            ),
        ] {
            if !is_software_token(value) {
                errors::refused(
                    shard,
                    ApiKey::ApiVersions,
                    ErrorCode::INVALID_REQUEST,
                    &format_args!(
                        "{what} {value:?} is not [a-zA-Z0-9](?:[a-zA-Z0-9-.]*[a-zA-Z0-9])?"
                    ),
                );
                let body = ApiVersionsResponse::default()
                    .with_error_code(ErrorCode::INVALID_REQUEST.code());
                return req.respond(ApiKey::ApiVersions, &body);
            }
        }
    }
    let api_keys = SUPPORTED
        .iter()
        .map(|&(key, min, max)| {
            ApiVersion::default()
                .with_api_key(key as i16)
                .with_min_version(min)
                .with_max_version(max)
        })
        .collect();
    let body = ApiVersionsResponse::default()
        .with_error_code(0)
        .with_api_keys(api_keys)
        .with_throttle_time_ms(0);
    req.respond(ApiKey::ApiVersions, &body)
}

/// Kafka's `SOFTWARE_NAME_VERSION_PATTERN`: letters and digits at both ends, and `-` or `.`
/// allowed between.
fn is_software_token(s: &str) -> bool {
    let bytes = s.as_bytes();
    let (Some(first), Some(last)) = (bytes.first(), bytes.last()) else {
        return false;
    };
    first.is_ascii_alphanumeric()
        && last.is_ascii_alphanumeric()
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'-' || *b == b'.')
}

#[cfg(test)]
mod tests {
    use super::is_software_token;

    #[test]
    fn software_names_follow_kafkas_pattern() {
        for good in [
            "librdkafka",
            "2.16.1",
            "confluent-kafka-python",
            "a",
            "apache-kafka-java",
        ] {
            assert!(is_software_token(good), "{good}");
        }
        for bad in ["", "-x", "x-", ".1", "has space", "name_underscore", "ü"] {
            assert!(!is_software_token(bad), "{bad}");
        }
    }
}
