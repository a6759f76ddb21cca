//! Refusals as the handlers make them: an error code put in a response is counted and logged.

use crate::protocol::errors::ErrorCode;
use crate::shard::Shard;
use kafka_protocol::messages::ApiKey;

/// An error code put in a response: counted by API and code, and logged at debug with why.
/// The request's span (`handlers::dispatch`) adds the API, version and client id.
pub fn refused(shard: &Shard, api: ApiKey, code: ErrorCode, reason: &dyn std::fmt::Display) {
    if !code.is_error() {
        return;
    }
    shard.metrics.error(api, code);
    tracing::debug!(code = code.code(), error = %code, %reason, "refused");
}
