//! A small Kafka client on the codec crate's client side: connections, version negotiation,
//! metadata, topic creation and offsets.
//!
//! Blocking sockets, one connection per broker per task. Responses on a connection come back in
//! request order, so a pipelining sender and a reading thread share a FIFO of what was sent.

use anyhow::{anyhow, bail, Context, Result};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, BrokerId, CreateTopicsRequest,
    ListOffsetsRequest, MetadataRequest, RequestHeader, ResponseHeader, TopicName,
};
use kafka_protocol::protocol::{encode_request_header_into_buffer, Decodable, Request, StrBytes};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

const CLIENT_ID: &str = "ferrite-bench";
/// Versions this client speaks, highest first when the broker allows.
const WANTED: &[(ApiKey, i16)] = &[
    (ApiKey::Produce, 9),
    // Fetch 12 is the first flexible version; some brokers (Tansu 0.6) send tagged fields the
    // codec refuses there. 11 carries everything the bench needs.
    (ApiKey::Fetch, 11),
    (ApiKey::ListOffsets, 7),
    (ApiKey::Metadata, 12),
    (ApiKey::CreateTopics, 7),
    (ApiKey::FindCoordinator, 4),
    (ApiKey::JoinGroup, 7),
    (ApiKey::SyncGroup, 5),
    (ApiKey::Heartbeat, 4),
    (ApiKey::LeaveGroup, 4),
    (ApiKey::OffsetCommit, 8),
    (ApiKey::OffsetFetch, 7),
    (ApiKey::InitProducerId, 4),
    (ApiKey::AddPartitionsToTxn, 3),
    (ApiKey::EndTxn, 3),
];

/// The API versions a broker and this client share.
#[derive(Clone, Debug, Default)]
pub struct Versions(HashMap<i16, i16>);

impl Versions {
    pub fn of(&self, key: ApiKey) -> Result<i16> {
        self.0.get(&(key as i16)).copied().ok_or_else(|| {
            anyhow!("the broker does not serve {key:?} in a version this client speaks")
        })
    }
}

/// Encodes a request frame (size prefix included).
pub fn encode_request<R: Request>(version: i16, correlation_id: i32, body: &R) -> Result<Bytes> {
    let header = RequestHeader::default()
        .with_request_api_key(R::KEY)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_static_str(CLIENT_ID)));
    let mut buf = BytesMut::with_capacity(64 + body.compute_size(version)?);
    buf.put_i32(0);
    encode_request_header_into_buffer(&mut buf, &header)?;
    body.encode(&mut buf, version)?;
    let n = (buf.len() - 4) as i32;
    buf[..4].copy_from_slice(&n.to_be_bytes());
    Ok(buf.freeze())
}

/// Reads one response frame's body (after the size).
pub fn read_frame(stream: &mut impl Read) -> Result<Bytes> {
    let mut size = [0u8; 4];
    stream
        .read_exact(&mut size)
        .context("reading a response size")?;
    let size = i32::from_be_bytes(size);
    if !(0..=256 << 20).contains(&size) {
        bail!("response size {size} is not plausible");
    }
    let mut body = vec![0u8; size as usize];
    stream.read_exact(&mut body).context("reading a response")?;
    Ok(Bytes::from(body))
}

/// Decodes a response frame of `R`'s API at `version`; returns the correlation id too.
pub fn decode_response<R: Request>(version: i16, mut frame: Bytes) -> Result<(i32, R::Response)> {
    let key = ApiKey::try_from(R::KEY).map_err(|_| anyhow!("unknown API key {}", R::KEY))?;
    let header = ResponseHeader::decode(&mut frame, key.response_header_version(version))?;
    let body = <R::Response as Decodable>::decode(&mut frame, version)?;
    Ok((header.correlation_id, body))
}

/// A request sent on a `Conn` whose answer has not been read.
#[must_use = "the answer must be read before the connection is used again"]
pub struct Sent {
    version: i16,
    correlation_id: i32,
}

/// One connection used request by request (no pipelining): metadata, admin, offsets, groups.
pub struct Conn {
    stream: TcpStream,
    next_correlation_id: i32,
    pub versions: Versions,
}

impl Conn {
    pub fn connect(addr: &str) -> Result<Conn> {
        let stream = TcpStream::connect(addr).with_context(|| format!("connecting to {addr}"))?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(Duration::from_secs(60)))?;
        let mut conn = Conn {
            stream,
            next_correlation_id: 1,
            versions: Versions::default(),
        };
        conn.negotiate()?;
        Ok(conn)
    }

    fn negotiate(&mut self) -> Result<()> {
        // ApiVersions v3 first; a broker that refuses it answers in v0 with its range.
        let hello = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("ferrite-bench"))
            .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
        let versions: ApiVersionsResponse = match self.call_at(3, &hello) {
            Ok(v) if v.error_code == 0 => v,
            _ => self.call_at(0, &ApiVersionsRequest::default())?,
        };
        if versions.error_code != 0 {
            bail!("ApiVersions failed with error {}", versions.error_code);
        }
        let mut shared = HashMap::new();
        for (key, ours) in WANTED {
            if let Some(theirs) = versions.api_keys.iter().find(|k| k.api_key == *key as i16) {
                let v = (*ours).min(theirs.max_version);
                if v >= theirs.min_version {
                    shared.insert(*key as i16, v);
                }
            }
        }
        self.versions = Versions(shared);
        Ok(())
    }

    /// A stream for a pipelining sender, after negotiation.
    pub fn into_stream(self) -> (TcpStream, Versions) {
        (self.stream, self.versions)
    }

    fn send_at<R: Request>(&mut self, version: i16, body: &R) -> Result<Sent> {
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id += 1;
        self.stream
            .write_all(&encode_request(version, correlation_id, body)?)?;
        Ok(Sent {
            version,
            correlation_id,
        })
    }

    fn call_at<R: Request>(&mut self, version: i16, body: &R) -> Result<R::Response> {
        let sent = self.send_at(version, body)?;
        self.receive::<R>(sent)
    }

    /// Sends `body` at the negotiated version of its API and decodes the answer.
    pub fn call<R: Request>(&mut self, body: &R) -> Result<R::Response> {
        let sent = self.send(body)?;
        self.receive::<R>(sent)
    }

    /// Sends `body` at the negotiated version of its API without waiting for the answer, which
    /// `receive` reads (before anything else is sent on this connection).
    pub fn send<R: Request>(&mut self, body: &R) -> Result<Sent> {
        let key = ApiKey::try_from(R::KEY).map_err(|_| anyhow!("unknown API key"))?;
        let v = self.versions.of(key)?;
        self.send_at(v, body)
    }

    /// The answer to the request `sent` stands for.
    pub fn receive<R: Request>(&mut self, sent: Sent) -> Result<R::Response> {
        let frame = read_frame(&mut self.stream)?;
        let (got, resp) = decode_response::<R>(sent.version, frame)?;
        if got != sent.correlation_id {
            bail!("correlation id {got}, expected {}", sent.correlation_id);
        }
        Ok(resp)
    }
}

/// Where a topic's partitions live.
#[derive(Clone, Debug)]
pub struct TopicLayout {
    pub partitions: Vec<i32>,
    /// Partition → leader's address.
    pub leaders: HashMap<i32, String>,
}

fn topic_name(t: &str) -> TopicName {
    TopicName(StrBytes::from_string(t.to_string()))
}

/// Asks `bootstrap` for the topic's partitions and leaders, waiting for leaders to be elected.
pub fn topic_layout(bootstrap: &str, topic: &str) -> Result<TopicLayout> {
    let mut conn = Conn::connect(bootstrap)?;
    for attempt in 0..100 {
        let req = MetadataRequest::default()
            .with_topics(Some(vec![
                MetadataRequestTopic::default().with_name(Some(topic_name(topic)))
            ]))
            .with_allow_auto_topic_creation(false);
        let md = conn.call(&req)?;
        let brokers: HashMap<i32, String> = md
            .brokers
            .iter()
            .map(|b| (b.node_id.0, format!("{}:{}", b.host.as_str(), b.port)))
            .collect();
        let t = md
            .topics
            .first()
            .ok_or_else(|| anyhow!("no metadata for {topic}"))?;
        match t.error_code {
            0 => {}
            3 => bail!("topic {topic} does not exist (use --create)"),
            5 if attempt < 99 => {
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
            e => bail!("metadata for {topic}: error {e}"),
        }
        let mut layout = TopicLayout {
            partitions: Vec::new(),
            leaders: HashMap::new(),
        };
        let mut missing = false;
        for p in &t.partitions {
            layout.partitions.push(p.partition_index);
            match brokers.get(&p.leader_id.0) {
                Some(addr) if p.leader_id != BrokerId(-1) => {
                    layout.leaders.insert(p.partition_index, addr.clone());
                }
                _ => missing = true,
            }
        }
        if !missing && !layout.partitions.is_empty() {
            layout.partitions.sort_unstable();
            return Ok(layout);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    bail!("topic {topic} has partitions without leaders")
}

/// Creates the topic with `partitions` partitions; an existing topic is fine.
pub fn create_topic(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    replication_factor: i16,
) -> Result<()> {
    let mut conn = Conn::connect(bootstrap)?;
    let req = CreateTopicsRequest::default()
        .with_topics(vec![CreatableTopic::default()
            .with_name(topic_name(topic))
            .with_num_partitions(partitions)
            .with_replication_factor(replication_factor)])
        .with_timeout_ms(30_000);
    let resp = conn.call(&req)?;
    match resp.topics.first().map(|t| t.error_code) {
        Some(0) | Some(36) => Ok(()),
        Some(e) => bail!(
            "creating {topic}: error {e} {}",
            resp.topics[0]
                .error_message
                .as_ref()
                .map(|m| m.to_string())
                .unwrap_or_default()
        ),
        None => bail!("creating {topic}: empty answer"),
    }
}

/// Earliest (-2) or latest (-1) offset of each partition, asked of its leader.
pub fn offsets(layout: &TopicLayout, topic: &str, which: i64) -> Result<HashMap<i32, i64>> {
    let mut out = HashMap::new();
    let mut by_leader: HashMap<&String, Vec<i32>> = HashMap::new();
    for (p, leader) in &layout.leaders {
        by_leader.entry(leader).or_default().push(*p);
    }
    for (leader, partitions) in by_leader {
        let mut conn = Conn::connect(leader)?;
        let req = ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(topic_name(topic))
                .with_partitions(
                    partitions
                        .iter()
                        .map(|&p| {
                            ListOffsetsPartition::default()
                                .with_partition_index(p)
                                .with_timestamp(which)
                        })
                        .collect(),
                )]);
        let resp = conn.call(&req)?;
        for t in resp.topics {
            for p in t.partitions {
                if p.error_code != 0 {
                    bail!(
                        "offsets of {topic}/{}: error {}",
                        p.partition_index,
                        p.error_code
                    );
                }
                out.insert(p.partition_index, p.offset);
            }
        }
    }
    Ok(out)
}

/// The whole record batches of a fetched record set, as (base offset, record count, batch); a
/// partial batch at the end (a broker may cut one there) is left out.
pub fn batch_headers(mut records: Bytes) -> impl Iterator<Item = (i64, i32, Bytes)> {
    std::iter::from_fn(move || {
        if records.len() < 61 {
            return None;
        }
        let len = i32::from_be_bytes(records[8..12].try_into().ok()?) as usize + 12;
        if len > records.len() {
            return None; // a partial batch at the end of a fetch
        }
        let batch = records.split_to(len);
        let mut h = batch.clone();
        let base = h.get_i64();
        let count = i32::from_be_bytes(batch[57..61].try_into().ok()?);
        Some((base, count, batch))
    })
}
