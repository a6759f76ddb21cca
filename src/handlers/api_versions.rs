//! ApiVersions: which APIs and versions this broker serves (`SUPPORTED`).

use super::{Request, Response, SUPPORTED};
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse};

pub fn handle(req: &Request, _body: ApiVersionsRequest) -> Response {
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
