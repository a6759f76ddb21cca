//! Responses in versions the codec crate does not encode.
//!
//! - ApiVersions with an unsupported request version: Kafka answers in v0 (error 35 plus the
//!   ApiVersions row, KIP-511) so the client can retry with a version both support.
//! - Produce v0–2: advertised (librdkafka before 2.11.1 only compresses when Produce v0 is in the
//!   advertised range) but refused per partition with UNSUPPORTED_VERSION, as Kafka 4 does.

use bytes::{Buf, BufMut, Bytes, BytesMut};

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

fn read_string(buf: &mut Bytes) -> Option<Bytes> {
    if buf.remaining() < 2 {
        return None;
    }
    let len = buf.get_i16();
    if len < 0 {
        return Some(Bytes::new());
    }
    if buf.remaining() < len as usize {
        return None;
    }
    Some(buf.split_to(len as usize))
}

/// Answers a Produce v0–2 request body (after the request header) with UNSUPPORTED_VERSION
/// for every partition it names; `None` if the body cannot be read (the connection closes).
/// acks = 0 gets no answer, as with any produce.
pub fn produce_unsupported(
    version: i16,
    correlation_id: i32,
    mut body: Bytes,
) -> Option<Option<Bytes>> {
    if body.remaining() < 6 {
        return None;
    }
    let acks = body.get_i16();
    let _timeout = body.get_i32();
    if body.remaining() < 4 {
        return None;
    }
    let topics = body.get_i32().max(0) as usize;
    let mut out = BytesMut::new();
    out.put_i32(0); // size, patched
    out.put_i32(correlation_id);
    out.put_i32(topics as i32);
    for _ in 0..topics {
        let name = read_string(&mut body)?;
        if body.remaining() < 4 {
            return None;
        }
        let partitions = body.get_i32().max(0) as usize;
        out.put_i16(name.len() as i16);
        out.put_slice(&name);
        out.put_i32(partitions as i32);
        for _ in 0..partitions {
            if body.remaining() < 8 {
                return None;
            }
            let index = body.get_i32();
            let records = body.get_i32();
            if records > 0 {
                if body.remaining() < records as usize {
                    return None;
                }
                body.advance(records as usize);
            }
            out.put_i32(index);
            out.put_i16(UNSUPPORTED_VERSION);
            out.put_i64(-1); // base_offset
            if version >= 2 {
                out.put_i64(-1); // log_append_time
            }
        }
    }
    if version >= 1 {
        out.put_i32(0); // throttle_time_ms
    }
    let size = out.len() as i32 - 4;
    out[0..4].copy_from_slice(&size.to_be_bytes());
    Some((acks != 0).then(|| out.freeze()))
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

    #[test]
    fn produce_v2_is_refused_per_partition() {
        let mut req = BytesMut::new();
        req.put_i16(1);
        req.put_i32(1000);
        req.put_i32(1);
        req.put_i16(1);
        req.put_slice(b"t");
        req.put_i32(1);
        req.put_i32(5);
        req.put_i32(3);
        req.put_slice(b"abc");
        let out = produce_unsupported(2, 7, req.freeze()).unwrap().unwrap();
        let mut b = out.clone();
        assert_eq!(b.get_i32() as usize, out.len() - 4);
        assert_eq!(b.get_i32(), 7);
        assert_eq!(b.get_i32(), 1);
        assert_eq!(b.get_i16(), 1);
        b.advance(1);
        assert_eq!(b.get_i32(), 1);
        assert_eq!(b.get_i32(), 5);
        assert_eq!(b.get_i16(), UNSUPPORTED_VERSION);
        assert!(produce_unsupported(2, 7, Bytes::from_static(&[0, 1])).is_none());
    }
}
