//! ApiVersions with an unsupported request version: Kafka answers in v0 (error 35 plus the
//! ApiVersions row, KIP-511) so the client can retry with a version both support. The request
//! cannot be decoded (its version is unknown), so the answer is built by hand.

use bytes::{BufMut, Bytes, BytesMut};

pub const UNSUPPORTED_VERSION: i16 = 35;

/// ApiVersions v0 body with error 35 and our ApiVersions range, framed.
pub fn api_versions_unsupported(correlation_id: i32, min: i16, max: i16) -> Bytes {
    let mut buf = BytesMut::with_capacity(20);
    buf.put_i32(16);
    buf.put_i32(correlation_id);
    buf.put_i16(UNSUPPORTED_VERSION);
    buf.put_i32(1);
    buf.put_i16(18);
    buf.put_i16(min);
    buf.put_i16(max);
    buf.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_versions_error_is_the_v0_layout() {
        let b = api_versions_unsupported(43, 0, 3);
        assert_eq!(
            &b[..],
            &[0, 0, 0, 16, 0, 0, 0, 43, 0, 35, 0, 0, 0, 1, 0, 18, 0, 0, 0, 3]
        );
    }
}
