//! Wire-level helpers around the codec: header peeking, response framing, and the few
//! responses the codec cannot encode (old versions, chunked fetch data).

pub mod errors;
pub mod fetch_response;
pub mod legacy;
pub mod versions;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, ResponseHeader};
use kafka_protocol::protocol::{Encodable, HeaderVersion};

/// One piece of a response frame as it goes to the socket: encoded bytes, or record data
/// from the log (file ranges to splice, cached batches).
pub enum OutChunk {
    Bytes(Bytes),
    Log(ferrite_shards::log::Chunk),
}

/// Key, version and correlation id sit at fixed offsets in every request header version.
#[derive(Copy, Clone, Debug)]
pub struct PeekedHeader {
    pub api_key: i16,
    pub api_version: i16,
    pub correlation_id: i32,
}

pub fn peek_header(frame: &[u8]) -> Option<PeekedHeader> {
    if frame.len() < 8 {
        return None;
    }
    Some(PeekedHeader {
        api_key: i16::from_be_bytes([frame[0], frame[1]]),
        api_version: i16::from_be_bytes([frame[2], frame[3]]),
        correlation_id: i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]),
    })
}

/// The client id of a request header (every header version carries it right after the
/// correlation id, as a nullable int16-length string), for logging refusals of requests that
/// did not decode. `""` when absent or unreadable.
pub fn peek_client_id(frame: &[u8]) -> String {
    let Some(len) = frame.get(8..10).map(|b| i16::from_be_bytes([b[0], b[1]])) else {
        return String::new();
    };
    let Ok(len) = usize::try_from(len) else {
        return String::new();
    };
    frame
        .get(10..10 + len)
        .map(|b| String::from_utf8_lossy(b).into_owned())
        .unwrap_or_default()
}

/// A whole response frame: size, header (the version the API uses), body.
pub fn encode_response<R: Encodable + HeaderVersion>(
    api_key: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &R,
) -> anyhow::Result<Bytes> {
    let header_version = api_key.response_header_version(version);
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    let size = header.compute_size(header_version)? + body.compute_size(version)?;
    let mut buf = BytesMut::with_capacity(4 + size);
    buf.put_i32(size as i32);
    header.encode(&mut buf, header_version)?;
    body.encode(&mut buf, version)?;
    Ok(buf.freeze())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_client_id_is_read_from_any_header() {
        let mut f = vec![0, 1, 0, 4, 0, 0, 0, 9, 0, 3];
        f.extend_from_slice(b"abcrest");
        assert_eq!(peek_client_id(&f), "abc");
        assert_eq!(peek_client_id(&[0, 1, 0, 4, 0, 0, 0, 9, 0xff, 0xff]), "");
        assert_eq!(peek_client_id(&[0, 1, 0, 4, 0, 0, 0, 9, 0, 50, 1]), "");
        assert_eq!(peek_client_id(&[0, 1]), "");
    }
}
