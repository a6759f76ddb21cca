//! A connection from this broker to another one, request by request, for replication.

use bytes::{BufMut, Bytes, BytesMut};
use futures::io::{AsyncReadExt, AsyncWriteExt};
use glommio::net::TcpStream;
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{encode_request_header_into_buffer, Decodable, Encodable, StrBytes};
use std::time::Duration;

/// Longest response a peer may send (a fetch is asked for far less).
const RESPONSE_MAX_BYTES: usize = 128 << 20;

pub struct Peer {
    stream: TcpStream,
    client_id: StrBytes,
    correlation: i32,
}

impl Peer {
    pub async fn connect(addr: &str, node_id: i32, timeout: Duration) -> std::io::Result<Peer> {
        let stream = glommio::timer::timeout(timeout, async {
            TcpStream::connect(addr)
                .await
                .map_err(|e| glommio::GlommioError::IoError(std::io::Error::other(e.to_string())))
        })
        .await
        .map_err(|e| std::io::Error::other(e.to_string()))?;
        stream.set_nodelay(true).ok();
        Ok(Peer {
            stream,
            client_id: StrBytes::from_string(format!("ferrite-replica-{node_id}")),
            correlation: 0,
        })
    }

    /// Sends one request and reads its response, within `timeout`.
    pub async fn call<Req: Encodable, Resp: Decodable>(
        &mut self,
        key: ApiKey,
        version: i16,
        body: &Req,
        timeout: Duration,
    ) -> std::io::Result<Resp> {
        self.correlation = self.correlation.wrapping_add(1);
        let header = RequestHeader::default()
            .with_request_api_key(key as i16)
            .with_request_api_version(version)
            .with_correlation_id(self.correlation)
            .with_client_id(Some(self.client_id.clone()));
        let mut buf = BytesMut::new();
        buf.put_i32(0);
        encode_request_header_into_buffer(&mut buf, &header).map_err(std::io::Error::other)?;
        body.encode(&mut buf, version)
            .map_err(std::io::Error::other)?;
        let n = (buf.len() - 4) as i32;
        buf[..4].copy_from_slice(&n.to_be_bytes());
        let correlation = self.correlation;
        let exchange = async {
            self.stream.write_all(&buf).await?;
            let mut size = [0u8; 4];
            self.stream.read_exact(&mut size).await?;
            let size = i32::from_be_bytes(size);
            if size < 0 || size as usize > RESPONSE_MAX_BYTES {
                return Err(std::io::Error::other(format!("response of {size} bytes")));
            }
            let mut frame = vec![0u8; size as usize];
            self.stream.read_exact(&mut frame).await?;
            Ok(Bytes::from(frame))
        };
        let mut frame = glommio::timer::timeout(timeout, async {
            exchange
                .await
                .map_err(|e: std::io::Error| glommio::GlommioError::IoError(e))
        })
        .await
        .map_err(|e| std::io::Error::other(e.to_string()))?;
        let header = ResponseHeader::decode(&mut frame, key.response_header_version(version))
            .map_err(std::io::Error::other)?;
        if header.correlation_id != correlation {
            return Err(std::io::Error::other("response for another request"));
        }
        Resp::decode(&mut frame, version).map_err(std::io::Error::other)
    }
}
