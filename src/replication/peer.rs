//! A connection from this broker to another one, request by request, for replication: on the
//! inter-broker listener, over TLS and logged in with SASL when that listener asks for them.

use crate::security::listener::{InterBrokerClient, SaslLogin};
use crate::security::sasl::{SaslMechanism, ScramClient};
use bytes::{BufMut, Bytes, BytesMut};
use futures::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use glommio::net::TcpStream;
use kafka_protocol::messages::{
    ApiKey, RequestHeader, ResponseHeader, SaslAuthenticateRequest, SaslAuthenticateResponse,
    SaslHandshakeRequest, SaslHandshakeResponse,
};
use kafka_protocol::protocol::{encode_request_header_into_buffer, Decodable, Encodable, StrBytes};
use rustls::pki_types::ServerName;
use std::time::Duration;

/// Longest response a peer may send (a fetch is asked for far less).
const RESPONSE_MAX_BYTES: usize = 128 << 20;

/// The byte stream to a peer: plain TCP or TLS over it.
trait Transport: AsyncRead + AsyncWrite + Unpin {}
impl<T: AsyncRead + AsyncWrite + Unpin> Transport for T {}

pub struct Peer {
    stream: Box<dyn Transport>,
    client_id: StrBytes,
    correlation: i32,
}

fn io_error(e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(e.to_string())
}

impl Peer {
    /// Connects to `addr` (host, port), then TLS and SASL as `client` says, all within `timeout`.
    pub async fn connect(
        addr: &(String, i32),
        node_id: i32,
        client: &InterBrokerClient,
        timeout: Duration,
    ) -> std::io::Result<Peer> {
        let (host, port) = addr;
        let connected = glommio::timer::timeout(timeout, async {
            let tcp = TcpStream::connect(format!("{host}:{port}"))
                .await
                .map_err(|e| glommio::GlommioError::IoError(io_error(e)))?;
            tcp.set_nodelay(true).ok();
            let stream: Box<dyn Transport> = match &client.tls {
                None => Box::new(tcp),
                Some(connector) => {
                    let name = ServerName::try_from(host.clone()).map_err(|e| {
                        glommio::GlommioError::IoError(io_error(format!("{host}: {e}")))
                    })?;
                    Box::new(
                        connector
                            .connect(name, tcp)
                            .await
                            .map_err(glommio::GlommioError::IoError)?,
                    )
                }
            };
            let mut peer = Peer {
                stream,
                client_id: StrBytes::from_string(format!("ferrite-replica-{node_id}")),
                correlation: 0,
            };
            if let Some(login) = &client.sasl {
                peer.log_in(login)
                    .await
                    .map_err(glommio::GlommioError::IoError)?;
            }
            Ok(peer)
        })
        .await;
        connected.map_err(io_error)
    }

    /// SaslHandshake v1, then the mechanism's exchange in SaslAuthenticate v1 requests.
    async fn log_in(&mut self, login: &SaslLogin) -> std::io::Result<()> {
        let wait = Duration::from_secs(10);
        let handshake: SaslHandshakeResponse = self
            .call(
                ApiKey::SaslHandshake,
                1,
                &SaslHandshakeRequest::default()
                    .with_mechanism(StrBytes::from_static_str(login.mechanism.name())),
                wait,
            )
            .await?;
        if handshake.error_code != 0 {
            return Err(io_error(format!(
                "SaslHandshake {}: error {}",
                login.mechanism.name(),
                handshake.error_code
            )));
        }
        match login.mechanism {
            SaslMechanism::Plain => {
                let token = format!("\0{}\0{}", login.username, login.password);
                self.authenticate(token.into_bytes(), wait).await?;
            }
            SaslMechanism::Scram(m) => {
                let mut scram = ScramClient::new(m, &login.username, &login.password);
                let server_first = self.authenticate(scram.first_message(), wait).await?;
                let last = scram.final_message(&server_first).map_err(io_error)?;
                let server_final = self.authenticate(last, wait).await?;
                scram.check_server_final(&server_final).map_err(io_error)?;
            }
        }
        Ok(())
    }

    /// One SaslAuthenticate step: the server's token, or its error.
    async fn authenticate(&mut self, token: Vec<u8>, wait: Duration) -> std::io::Result<Vec<u8>> {
        let answer: SaslAuthenticateResponse = self
            .call(
                ApiKey::SaslAuthenticate,
                1,
                &SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(token)),
                wait,
            )
            .await?;
        if answer.error_code != 0 {
            return Err(io_error(format!(
                "SaslAuthenticate: error {} {}",
                answer.error_code,
                answer.error_message.as_deref().unwrap_or("")
            )));
        }
        Ok(answer.auth_bytes.to_vec())
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
            self.stream.flush().await?;
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
