//! Wire-level helpers around the codec: header peeking, response framing, and the few
//! responses the codec cannot encode (old versions, chunked fetch data).

pub mod fetch_response;
pub mod legacy;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, ResponseHeader};
use kafka_protocol::protocol::{Encodable, HeaderVersion};

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
