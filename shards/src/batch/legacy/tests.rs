use super::down::down_convert;
use super::up::up_convert;
use super::*;
use crate::batch::build::{
    build_batch_compressed, decode_record_section, NewRecord, ProducerFields,
};
use crate::batch::records::record_section;
use crate::batch::{validate, BatchHeader, BatchOrigin};
use bytes::Bytes;

fn message(
    offset: i64,
    magic: u8,
    timestamp: i64,
    key: Option<&'static [u8]>,
    value: &'static [u8],
) -> Message<'static> {
    Message {
        offset,
        magic,
        attributes: 0,
        timestamp,
        key,
        value: Some(value),
    }
}

/// A set of `messages`, compressed into one wrapper when `codec` is not None.
fn set_of(messages: &[Message<'_>], codec: Compression) -> Bytes {
    let mut plain = BytesMut::new();
    for m in messages {
        put_message(&mut plain, m);
    }
    if codec == Compression::None {
        return plain.freeze();
    }
    let magic = messages[0].magic;
    let packed = deflate(codec, magic, &plain).unwrap();
    let mut out = BytesMut::new();
    put_message(
        &mut out,
        &Message {
            offset: messages.last().unwrap().offset,
            magic,
            attributes: legacy_codec_bits(codec).unwrap(),
            timestamp: messages.iter().map(|m| m.timestamp).max().unwrap(),
            key: None,
            value: Some(&packed),
        },
    );
    out.freeze()
}

fn sample(magic: u8) -> Vec<Message<'static>> {
    let ts = |t: i64| if magic == MAGIC_V0 { -1 } else { t };
    vec![
        message(0, magic, ts(1_000), Some(b"k0"), b"first"),
        message(1, magic, ts(1_005), None, b"second"),
        message(2, magic, ts(1_002), Some(b"k2"), b"third"),
    ]
}

/// (offset delta, timestamp, key, value) of every record in a v2 batch.
fn v2_records(batch: &Bytes) -> Vec<(i64, i64, Option<Bytes>, Option<Bytes>)> {
    let header = BatchHeader::parse(batch).unwrap();
    let section = Bytes::from(record_section(batch, 1 << 20).unwrap());
    decode_record_section(&header, &section)
        .unwrap()
        .into_iter()
        .map(|r| (r.offset, r.timestamp_ms, r.key, r.value))
        .collect()
}

const LEGACY_CODECS: [Compression; 4] = [
    Compression::None,
    Compression::Gzip,
    Compression::Snappy,
    Compression::Lz4,
];

#[test]
fn every_legacy_set_up_converts_to_one_valid_v2_batch() {
    for magic in [MAGIC_V0, MAGIC_V1] {
        for codec in LEGACY_CODECS {
            let set = set_of(&sample(magic), codec);
            let (batch, count) = up_convert(&set).unwrap();
            assert_eq!(count, 3);
            let header = validate(&batch, 1 << 20, BatchOrigin::Client).unwrap();
            assert_eq!(header.compression(), Some(codec), "magic {magic}");
            assert_eq!(header.record_count, 3);
            assert_eq!(header.producer_id, -1);
            let got = v2_records(&batch);
            let want: Vec<_> = sample(magic)
                .iter()
                .enumerate()
                .map(|(i, m)| {
                    (
                        i as i64,
                        m.timestamp,
                        m.key.map(Bytes::copy_from_slice),
                        m.value.map(Bytes::copy_from_slice),
                    )
                })
                .collect();
            assert_eq!(got, want, "magic {magic} {codec:?}");
            let expected_max = if magic == MAGIC_V0 { -1 } else { 1_005 };
            assert_eq!(header.max_timestamp, expected_max);
        }
    }
}

#[test]
fn a_flipped_byte_fails_the_message_crc() {
    let mut set = set_of(&sample(MAGIC_V1), Compression::None).to_vec();
    let last = set.len() - 1;
    set[last] ^= 0x01;
    assert!(matches!(
        up_convert(&set),
        Err(BatchError::CorruptLegacyMessage { .. })
    ));
}

#[test]
fn a_cut_last_message_is_dropped_and_sizes_under_the_overhead_are_corrupt() {
    let set = set_of(&sample(MAGIC_V0), Compression::None);
    let cut = &set[..set.len() - 3];
    assert_eq!(
        up_convert(cut).unwrap().1,
        2,
        "the cut third message is dropped"
    );
    let mut tiny = set.to_vec();
    tiny[8..12].copy_from_slice(&5i32.to_be_bytes());
    assert!(matches!(
        up_convert(&tiny),
        Err(BatchError::CorruptLegacyMessage { .. })
    ));
    assert_eq!(up_convert(&[]), Err(BatchError::Empty));
}

#[test]
fn magic_1_inner_offsets_are_rebuilt_but_the_wrapper_offset_must_cover_them() {
    let mut messages = sample(MAGIC_V1);
    messages[1].offset = 7;
    messages[2].offset = 8;
    let set = set_of(&messages, Compression::Gzip);
    let (batch, count) = up_convert(&set).unwrap();
    assert_eq!(count, 3);
    let offsets: Vec<i64> = v2_records(&batch).iter().map(|r| r.0).collect();
    assert_eq!(
        offsets,
        [0, 1, 2],
        "offsets count up again, as Kafka rebuilds them"
    );
    // A wrapper at offset 5 cannot hold an inner message at relative offset 8.
    let inner = set_of(&messages, Compression::None);
    let packed = deflate(Compression::Gzip, MAGIC_V1, &inner).unwrap();
    let mut wrapper = BytesMut::new();
    put_message(
        &mut wrapper,
        &Message {
            attributes: 1,
            value: Some(&packed),
            ..message(5, MAGIC_V1, 1_005, None, b"")
        },
    );
    assert!(matches!(
        up_convert(&wrapper),
        Err(BatchError::InvalidLegacyMessage { .. })
    ));
}

/// `set` wrapped once more: a one-message set whose value is `inner` compressed with gzip.
fn gzip_wrapper(inner: &[u8], attributes: u8) -> BytesMut {
    let packed = deflate(Compression::Gzip, MAGIC_V1, inner).unwrap();
    let mut wrapper = BytesMut::new();
    put_message(
        &mut wrapper,
        &Message {
            attributes,
            value: Some(&packed),
            ..message(0, MAGIC_V1, 1, None, b"")
        },
    );
    wrapper
}

#[test]
fn kafkas_wrapper_rules_hold() {
    let invalid = |set: &[u8]| {
        matches!(
            up_convert(set),
            Err(BatchError::InvalidLegacyMessage { .. })
        )
    };
    let one = set_of(&sample(MAGIC_V1), Compression::Gzip);
    assert!(
        invalid(&[one.to_vec(), one.to_vec()].concat()),
        "two compressed wrappers"
    );
    let mut inner_magic = sample(MAGIC_V1);
    inner_magic[1].magic = MAGIC_V0;
    inner_magic[1].timestamp = -1;
    let set = set_of(&inner_magic, Compression::Snappy);
    assert!(matches!(
        up_convert(&set),
        Err(BatchError::RecordsRefused { errors, .. }) if errors[0].index == 1
    ));
    let mut nested = BytesMut::new();
    put_message(
        &mut nested,
        &Message {
            attributes: 1,
            ..message(0, MAGIC_V1, 1, None, b"claims gzip")
        },
    );
    assert!(invalid(&gzip_wrapper(&nested, 1)), "nested compression");
    let mut zstd = BytesMut::new();
    put_message(
        &mut zstd,
        &Message {
            attributes: 4,
            ..message(0, MAGIC_V1, 1, None, b"zstd has no legacy form")
        },
    );
    assert!(invalid(&zstd), "a zstd wrapper");
    let mut null_value = BytesMut::new();
    put_message(
        &mut null_value,
        &Message {
            attributes: 1,
            value: None,
            ..message(0, MAGIC_V1, 1, None, b"")
        },
    );
    assert!(invalid(&null_value), "a wrapper without a value");
    assert!(invalid(&gzip_wrapper(&[], 1)), "a wrapper holding nothing");
}

#[test]
fn a_producer_claiming_log_append_time_is_refused() {
    let mut messages = sample(MAGIC_V1);
    messages[0].attributes = LOG_APPEND_TIME_FLAG;
    let set = set_of(&messages, Compression::None);
    assert!(matches!(
        up_convert(&set),
        Err(BatchError::RecordsRefused { errors, .. })
            if errors[0].kind == crate::batch::record_checks::RecordErrorKind::InvalidTimestamp
    ));
}

/// A v2 batch at `base` holding values `v{base}..`.
fn stored_batch(base: i64, count: usize, codec: Compression) -> Vec<u8> {
    let records: Vec<NewRecord> = (0..count)
        .map(|i| NewRecord {
            key: Some(Bytes::from(format!("k{}", base + i as i64))),
            value: Some(Bytes::from(format!("v{}", base + i as i64))),
            timestamp_ms: 50 + i as i64,
            headers: vec![(Bytes::from_static(b"h"), None)],
        })
        .collect();
    let mut b = build_batch_compressed(&records, ProducerFields::NONE, codec)
        .unwrap()
        .to_vec();
    b[0..8].copy_from_slice(&base.to_be_bytes());
    b
}

/// (absolute offset, timestamp, value) of every message in a down-converted set.
fn read_back(set: &[u8]) -> Vec<(i64, i64, String)> {
    let mut out = Vec::new();
    for m in messages(set).unwrap() {
        if m.compression().unwrap() == Compression::None {
            out.push((
                m.offset,
                m.timestamp,
                String::from_utf8(m.value.unwrap().to_vec()).unwrap(),
            ));
            continue;
        }
        let inflated = inflate(&m).unwrap();
        let inner = messages(&inflated).unwrap();
        let last_relative = inner.last().unwrap().offset;
        for i in &inner {
            let offset = if m.magic == MAGIC_V0 {
                i.offset
            } else {
                m.offset - last_relative + i.offset
            };
            out.push((
                offset,
                i.timestamp,
                String::from_utf8(i.value.unwrap().to_vec()).unwrap(),
            ));
        }
    }
    out
}

#[test]
fn v2_batches_down_convert_to_both_old_magics_with_absolute_offsets_kept() {
    for magic in [MAGIC_V0, MAGIC_V1] {
        for codec in LEGACY_CODECS {
            let data =
                Bytes::from([stored_batch(10, 3, codec), stored_batch(13, 2, codec)].concat());
            let converted = down_convert(&data, magic, 11, 1 << 20).unwrap();
            assert_eq!((converted.batches, converted.records), (2, 4));
            let got = read_back(&converted.set);
            let ts = |t: i64| if magic == MAGIC_V0 { -1 } else { t };
            assert_eq!(
                got,
                vec![
                    (11, ts(51), "v11".to_string()),
                    (12, ts(52), "v12".to_string()),
                    (13, ts(50), "v13".to_string()),
                    (14, ts(51), "v14".to_string()),
                ],
                "magic {magic} {codec:?}"
            );
        }
    }
}

#[test]
fn down_conversion_stops_at_the_limit_but_always_converts_one_batch() {
    let data = Bytes::from(
        [
            stored_batch(0, 3, Compression::None),
            stored_batch(3, 3, Compression::None),
        ]
        .concat(),
    );
    let one = down_convert(&data, MAGIC_V1, 0, 1).unwrap();
    assert_eq!(one.batches, 1);
    assert_eq!(read_back(&one.set).len(), 3);
    let partial = Bytes::from(
        [
            stored_batch(0, 3, Compression::None),
            stored_batch(3, 3, Compression::None)[..30].to_vec(),
        ]
        .concat(),
    );
    assert_eq!(
        down_convert(&partial, MAGIC_V1, 0, 1 << 20)
            .unwrap()
            .batches,
        1,
        "a cut batch is left out"
    );
}

#[test]
fn zstd_cannot_be_down_converted() {
    let data = Bytes::from(stored_batch(0, 2, Compression::Zstd));
    assert!(matches!(
        down_convert(&data, MAGIC_V1, 0, 1 << 20),
        Err(BatchError::UnsupportedCompression { .. })
    ));
    let mixed = Bytes::from(
        [
            stored_batch(0, 2, Compression::None),
            stored_batch(2, 2, Compression::Zstd),
        ]
        .concat(),
    );
    let converted = down_convert(&mixed, MAGIC_V1, 0, 1 << 20).unwrap();
    assert_eq!(
        converted.records, 2,
        "what comes before the zstd batch is returned"
    );
}

#[test]
fn up_then_down_conversion_gives_the_messages_back() {
    for codec in LEGACY_CODECS {
        let set = set_of(&sample(MAGIC_V1), codec);
        let (mut batch, _) = up_convert(&set).map(|(b, n)| (b.to_vec(), n)).unwrap();
        batch[0..8].copy_from_slice(&40i64.to_be_bytes());
        let converted = down_convert(&Bytes::from(batch), MAGIC_V1, 0, 1 << 20).unwrap();
        let got = read_back(&converted.set);
        assert_eq!(
            got,
            vec![
                (40, 1_000, "first".to_string()),
                (41, 1_005, "second".to_string()),
                (42, 1_002, "third".to_string()),
            ],
            "{codec:?}"
        );
    }
}
