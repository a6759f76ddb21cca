//! The Fetch response, encoded by hand so each partition's records go out as file ranges.
//!
//! The codec crate would need the records as one in-memory buffer; here the protocol bytes are
//! encoded around them and the records stay as `Chunk`s (spliced from the page cache, or cached
//! batches). Layout of versions 0 to 17, checked field by field against the crate's decoder
//! and byte for byte against its encoder in the tests below:
//!
//! ```text
//! size i32 | correlation_id i32 | [v12: header tags]
//! [v1+: throttle_time_ms i32] | [v7+: error_code i16, session_id i32]
//! responses: [topic string (v13+: topic_id uuid), partitions: [index i32, error i16, high_watermark i64,
//!   [v4+: last_stable_offset i64], [v5+: log_start_offset i64],
//!   [v4+: aborted_transactions nullable array], [v11+: preferred_read_replica i32],
//!   records bytes, [v12: tags]], [v12: tags]] [v12: tags]
//! ```
//! v12 is the flexible encoding: compact arrays and strings (length + 1 as unsigned varint).
//! v13 names topics by id; v14–17 change only requests and tagged fields Ferrite leaves out.

use crate::protocol::OutChunk;
use bytes::{BufMut, Bytes, BytesMut};
use ferrite_shards::log::Chunk;

/// One partition of the response.
pub struct PartitionOut {
    pub index: i32,
    pub error_code: i16,
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    pub log_start_offset: i64,
    /// READ_COMMITTED: (producer id, first offset) of each aborted transaction in the range
    /// returned; `None` (null on the wire) for READ_UNCOMMITTED readers, as Kafka sends.
    pub aborted: Option<Vec<(i64, i64)>>,
    pub records: Vec<Chunk>,
    pub records_bytes: u64,
}

pub struct TopicOut {
    pub name: String,
    /// The topic's id: what v13 and later carry instead of the name.
    pub id: [u8; 16],
    pub partitions: Vec<PartitionOut>,
}

fn put_uvarint(buf: &mut BytesMut, mut v: u64) {
    while v >= 0x80 {
        buf.put_u8((v as u8) | 0x80);
        v >>= 7;
    }
    buf.put_u8(v as u8);
}

fn put_len(buf: &mut BytesMut, flexible: bool, n: usize) {
    if flexible {
        put_uvarint(buf, n as u64 + 1);
    } else {
        buf.put_i32(n as i32);
    }
}

/// Encodes the whole frame (size prefix included) as chunks in wire order.
/// The response's top-level fields.
#[derive(Copy, Clone, Debug, Default)]
pub struct Head {
    pub throttle_time_ms: i32,
    /// v7+: a fetch session's error (the response then carries no partitions).
    pub error_code: i16,
    /// v7+: the fetch session the response belongs to, 0 for none.
    pub session_id: i32,
}

pub fn encode(
    version: i16,
    correlation_id: i32,
    head: Head,
    topics: Vec<TopicOut>,
) -> Vec<OutChunk> {
    assert!(
        (0..=17).contains(&version),
        "Fetch v{version} is not encoded here"
    );
    let flexible = version >= 12;
    let mut buf = BytesMut::with_capacity(128 + topics.len() * 64);
    // (position in `buf` where records go, their chunks)
    let mut records_at: Vec<(usize, Vec<Chunk>)> = Vec::new();
    let mut records_total = 0u64;
    buf.put_i32(0); // size, patched below
    buf.put_i32(correlation_id);
    if flexible {
        put_uvarint(&mut buf, 0);
    }
    if version >= 1 {
        buf.put_i32(head.throttle_time_ms);
    }
    if version >= 7 {
        buf.put_i16(head.error_code);
        buf.put_i32(head.session_id);
    }
    put_len(&mut buf, flexible, topics.len());
    for t in topics {
        if version >= 13 {
            buf.put_slice(&t.id);
        } else {
            if flexible {
                put_uvarint(&mut buf, t.name.len() as u64 + 1);
            } else {
                buf.put_i16(t.name.len() as i16);
            }
            buf.put_slice(t.name.as_bytes());
        }
        put_len(&mut buf, flexible, t.partitions.len());
        for p in t.partitions {
            buf.put_i32(p.index);
            buf.put_i16(p.error_code);
            buf.put_i64(p.high_watermark);
            if version >= 4 {
                buf.put_i64(p.last_stable_offset);
            }
            if version >= 5 {
                buf.put_i64(p.log_start_offset);
            }
            if version >= 4 {
                match &p.aborted {
                    None if flexible => put_uvarint(&mut buf, 0),
                    None => buf.put_i32(-1),
                    Some(list) => {
                        put_len(&mut buf, flexible, list.len());
                        for &(producer_id, first_offset) in list {
                            buf.put_i64(producer_id);
                            buf.put_i64(first_offset);
                            if flexible {
                                put_uvarint(&mut buf, 0);
                            }
                        }
                    }
                }
            }
            if version >= 11 {
                buf.put_i32(-1); // preferred_read_replica: none
            }
            // Never null: librdkafka refuses a null record set.
            if flexible {
                put_uvarint(&mut buf, p.records_bytes + 1);
            } else {
                buf.put_i32(p.records_bytes as i32);
            }
            records_total += p.records_bytes;
            if !p.records.is_empty() {
                records_at.push((buf.len(), p.records));
            }
            if flexible {
                put_uvarint(&mut buf, 0); // partition tags
            }
        }
        if flexible {
            put_uvarint(&mut buf, 0); // topic tags
        }
    }
    if flexible {
        put_uvarint(&mut buf, 0); // response tags
    }
    let size = buf.len() as u64 - 4 + records_total;
    buf[0..4].copy_from_slice(&(size as i32).to_be_bytes());
    let meta: Bytes = buf.freeze();
    let mut out = Vec::with_capacity(records_at.len() * 2 + 1);
    let mut from = 0;
    for (at, chunks) in records_at {
        if at > from {
            out.push(OutChunk::Bytes(meta.slice(from..at)));
        }
        out.extend(chunks.into_iter().map(OutChunk::Log));
        from = at;
    }
    if from < meta.len() {
        out.push(OutChunk::Bytes(meta.slice(from..)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::fetch_response::{
        AbortedTransaction, FetchResponse, FetchableTopicResponse, PartitionData,
    };
    use kafka_protocol::messages::{ProducerId, ResponseHeader, TopicName};
    use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
    use uuid::Uuid;

    fn flatten(chunks: &[OutChunk]) -> Vec<u8> {
        let mut out = Vec::new();
        for c in chunks {
            match c {
                OutChunk::Bytes(b) => out.extend_from_slice(b),
                OutChunk::Log(Chunk::Memory(b)) => out.extend_from_slice(b),
                OutChunk::Log(Chunk::Batch { stamp, body }) => {
                    out.extend_from_slice(stamp);
                    out.extend_from_slice(body);
                }
                OutChunk::Log(Chunk::File { .. }) => panic!("no files in this test"),
            }
        }
        out
    }

    #[test]
    fn every_version_matches_the_codec_byte_for_byte() {
        let records = Bytes::from_static(b"not really a batch, but bytes all the same");
        for version in 0..=17i16 {
            let topics = vec![
                TopicOut {
                    name: "orders".into(),
                    id: [7; 16],
                    partitions: vec![
                        PartitionOut {
                            index: 0,
                            error_code: 0,
                            high_watermark: 42,
                            last_stable_offset: 42,
                            log_start_offset: 7,
                            aborted: Some(vec![(5, 10), (6, 12)]),
                            records: vec![Chunk::Memory(records.clone())],
                            records_bytes: records.len() as u64,
                        },
                        PartitionOut {
                            index: 3,
                            error_code: 1,
                            high_watermark: -1,
                            last_stable_offset: -1,
                            log_start_offset: -1,
                            aborted: None,
                            records: vec![],
                            records_bytes: 0,
                        },
                    ],
                },
                TopicOut {
                    name: "x".repeat(200),
                    id: [9; 16],
                    partitions: vec![],
                },
            ];
            let wire = flatten(&encode(version, 99, Head::default(), topics));
            assert_eq!(
                i32::from_be_bytes(wire[0..4].try_into().unwrap()) as usize,
                wire.len() - 4
            );
            let mut body = Bytes::from(wire[4..].to_vec());
            let hv = if version >= 12 { 1 } else { 0 };
            let header = ResponseHeader::decode(&mut body, hv).unwrap();
            assert_eq!(header.correlation_id, 99);
            let decoded = FetchResponse::decode(&mut body, version).unwrap();
            assert!(body.is_empty(), "v{version}: nothing left over");
            let p = &decoded.responses[0].partitions[0];
            assert_eq!(p.high_watermark, 42);
            assert_eq!(p.records.as_ref().unwrap(), &records);
            assert_eq!(decoded.responses[0].partitions[1].error_code, 1);
            if version >= 13 {
                assert_eq!(decoded.responses[1].topic_id, Uuid::from_bytes([9; 16]));
            } else {
                assert_eq!(decoded.responses[1].topic.0.as_str().len(), 200);
            }
            // The crate's own encoder gives the same bytes.
            let mut expect = FetchResponse::default();
            expect.responses = vec![
                FetchableTopicResponse::default()
                    .with_topic(if version < 13 {
                        TopicName(StrBytes::from_static_str("orders"))
                    } else {
                        TopicName::default()
                    })
                    .with_topic_id(if version >= 13 {
                        Uuid::from_bytes([7; 16])
                    } else {
                        Uuid::nil()
                    })
                    .with_partitions(vec![
                        PartitionData::default()
                            .with_partition_index(0)
                            .with_high_watermark(42)
                            .with_last_stable_offset(if version >= 4 { 42 } else { -1 })
                            .with_log_start_offset(if version >= 5 { 7 } else { -1 })
                            .with_aborted_transactions((version >= 4).then(|| {
                                [(5, 10), (6, 12)]
                                    .map(|(pid, first)| {
                                        AbortedTransaction::default()
                                            .with_producer_id(ProducerId(pid))
                                            .with_first_offset(first)
                                    })
                                    .to_vec()
                            }))
                            .with_records(Some(records.clone())),
                        PartitionData::default()
                            .with_partition_index(3)
                            .with_error_code(1)
                            .with_high_watermark(-1)
                            .with_last_stable_offset(-1)
                            .with_log_start_offset(-1)
                            .with_aborted_transactions(None)
                            .with_records(Some(Bytes::new())),
                    ]),
                FetchableTopicResponse::default()
                    .with_topic(if version < 13 {
                        TopicName(StrBytes::from_string("x".repeat(200)))
                    } else {
                        TopicName::default()
                    })
                    .with_topic_id(if version >= 13 {
                        Uuid::from_bytes([9; 16])
                    } else {
                        Uuid::nil()
                    }),
            ];
            let mut theirs = BytesMut::new();
            ResponseHeader::default()
                .with_correlation_id(99)
                .encode(&mut theirs, hv)
                .unwrap();
            expect.encode(&mut theirs, version).unwrap();
            assert_eq!(&wire[4..], &theirs[..], "v{version}");
        }
    }
}
