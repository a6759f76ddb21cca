use super::build::{build_batch, decode_records, NewRecord, ProducerFields};
use super::*;
use proptest::prelude::*;

fn sample(n: usize) -> Bytes {
    let records: Vec<NewRecord> = (0..n)
        .map(|i| NewRecord {
            key: Some(Bytes::from(format!("k{i}"))),
            value: Some(Bytes::from(vec![i as u8; 100])),
            timestamp_ms: 1_700_000_000_000 + i as i64,
            headers: vec![],
        })
        .collect();
    build_batch(&records, ProducerFields::NONE)
}

#[test]
fn built_batch_validates_and_reports_its_fields() {
    let batch = sample(3);
    let header = validate(&batch, 1 << 20, BatchOrigin::Client).expect("valid");
    assert_eq!(header.record_count, 3);
    assert_eq!(header.last_offset_delta, 2);
    assert_eq!(header.max_timestamp, 1_700_000_000_002);
    assert_eq!(header.total_bytes(), batch.len());
    assert_eq!(header.compression(), Some(Compression::None));
}

#[test]
fn wrong_crc_is_refused() {
    let mut bad = sample(2).to_vec();
    let last = bad.len() - 1;
    bad[last] ^= 0xff;
    assert!(matches!(
        validate(&bad, 1 << 20, BatchOrigin::Client),
        Err(BatchError::CrcMismatch { .. })
    ));
}

#[test]
fn wrong_magic_is_refused() {
    let mut bad = sample(1).to_vec();
    bad[16] = 1;
    assert_eq!(
        validate(&bad, 1 << 20, BatchOrigin::Client),
        Err(BatchError::BadMagic { magic: 1 })
    );
}

#[test]
fn length_beyond_buffer_is_refused() {
    let batch = sample(2);
    let cut = &batch[..batch.len() - 5];
    assert!(matches!(
        validate(cut, 1 << 20, BatchOrigin::Client),
        Err(BatchError::LengthMismatch { .. })
    ));
    let records = Bytes::copy_from_slice(cut);
    assert!(matches!(
        split_batches(&records),
        Err(BatchError::LengthMismatch { .. })
    ));
}

#[test]
fn batch_beyond_the_limit_is_refused() {
    let batch = sample(5);
    assert!(matches!(
        validate(&batch, batch.len() - 1, BatchOrigin::Client),
        Err(BatchError::TooLarge { .. })
    ));
}

#[test]
fn short_buffer_is_refused() {
    assert_eq!(
        validate(&[0u8; 20], 1 << 20, BatchOrigin::Client),
        Err(BatchError::TooShort { len: 20 })
    );
}

#[test]
fn record_count_must_match_the_offset_delta_for_clients() {
    let mut bad = sample(3).to_vec();
    bad[57..61].copy_from_slice(&2i32.to_be_bytes());
    let crc = crc32c::crc32c(&bad[21..]);
    bad[17..21].copy_from_slice(&crc.to_be_bytes());
    assert!(matches!(
        validate(&bad, 1 << 20, BatchOrigin::Client),
        Err(BatchError::BadRecordCount { .. })
    ));
    // A compacted batch from a replica may hold fewer records than its offset span.
    assert!(validate(&bad, 1 << 20, BatchOrigin::Replica).is_ok());
}

#[test]
fn idempotent_batch_needs_a_sequence() {
    let records = [NewRecord {
        value: Some(Bytes::from_static(b"v")),
        ..Default::default()
    }];
    let good = build_batch(
        &records,
        ProducerFields {
            producer_id: 7,
            producer_epoch: 0,
            base_sequence: 0,
        },
    );
    assert!(validate(&good, 1 << 20, BatchOrigin::Client).is_ok());
    let bad = build_batch(
        &records,
        ProducerFields {
            producer_id: 7,
            producer_epoch: 0,
            base_sequence: -1,
        },
    );
    assert!(matches!(
        validate(&bad, 1 << 20, BatchOrigin::Client),
        Err(BatchError::BadProducerFields { .. })
    ));
}

#[test]
fn split_finds_each_batch_as_a_slice() {
    let a = sample(2);
    let b = sample(4);
    let mut joined = a.to_vec();
    joined.extend_from_slice(&b);
    let joined = Bytes::from(joined);
    let parts = split_batches(&joined).expect("two batches");
    assert_eq!(parts.len(), 2);
    assert_eq!(parts[0], a);
    assert_eq!(parts[1], b);
    assert_eq!(
        parts[1].as_ptr(),
        joined[a.len()..].as_ptr(),
        "zero-copy slice"
    );
    assert_eq!(split_batches(&Bytes::new()), Err(BatchError::Empty));
}

#[test]
fn stamp_rewrites_offset_and_epoch_without_touching_the_crc() {
    let batch = sample(2);
    let prefix = stamp(&batch, 42, 7);
    let mut stamped = batch.to_vec();
    stamped[..STAMP_BYTES].copy_from_slice(&prefix);
    // As the log stores it: a replica's view (a producer's batch must have base offset 0).
    let header = validate(&stamped, 1 << 20, BatchOrigin::Replica).expect("crc still holds");
    assert_eq!(header.base_offset, 42);
    assert_eq!(header.partition_leader_epoch, 7);
    assert_eq!(header.last_offset(), 43);
}

/// `batch` with `edit` applied to its bytes and its CRC made right again.
fn edited(batch: &Bytes, edit: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let mut b = batch.to_vec();
    edit(&mut b);
    let crc = crc32c::crc32c(&b[CRC_START..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    b
}

#[test]
fn a_producers_batch_starts_at_offset_zero() {
    let moved = edited(&sample(2), |b| b[0..8].copy_from_slice(&5i64.to_be_bytes()));
    assert_eq!(
        validate(&moved, 1 << 20, BatchOrigin::Client),
        Err(BatchError::NonZeroBaseOffset { base_offset: 5 })
    );
    assert!(
        validate(&moved, 1 << 20, BatchOrigin::Replica).is_ok(),
        "a leader's batch keeps its offsets"
    );
}

#[test]
fn clients_may_not_write_control_batches() {
    let control = edited(&sample(1), |b| b[22] |= 0x20);
    assert_eq!(
        validate(&control, 1 << 20, BatchOrigin::Client),
        Err(BatchError::ControlBatchFromClient)
    );
    assert!(validate(&control, 1 << 20, BatchOrigin::Replica).is_ok());
}

#[test]
fn a_plain_producers_epoch_and_sequence_are_not_looked_at() {
    // Sarama's and other clients' non-idempotent batches: producer id -1 with sequence 0 or
    // epoch 0. Kafka checks producer fields only when the producer id is 0 or more.
    for (epoch, sequence) in [(-1i16, -1i32), (-1, 0), (0, 0), (0, -1), (7, 42)] {
        let b = edited(&sample(1), |b| {
            b[51..53].copy_from_slice(&epoch.to_be_bytes());
            b[53..57].copy_from_slice(&sequence.to_be_bytes());
        });
        assert!(
            validate(&b, 1 << 20, BatchOrigin::Client).is_ok(),
            "epoch {epoch} sequence {sequence}"
        );
    }
    let transactional_without_id = edited(&sample(1), |b| b[22] |= 0x10);
    assert!(validate(&transactional_without_id, 1 << 20, BatchOrigin::Client).is_ok());
}

#[test]
fn a_codec_id_beyond_zstd_is_unknown() {
    for codec in 5..=7i16 {
        let b = edited(&sample(1), |b| {
            b[21..23].copy_from_slice(&codec.to_be_bytes())
        });
        assert_eq!(
            validate(&b, 1 << 20, BatchOrigin::Client),
            Err(BatchError::UnsupportedCompression {
                codec: codec as u16
            })
        );
    }
}

#[test]
fn the_crc_is_checked_before_the_fields_it_covers() {
    // A corrupt batch whose count is also wrong is corrupt first, as Kafka finds it.
    let mut b = sample(2).to_vec();
    b[57..61].copy_from_slice(&9i32.to_be_bytes());
    assert!(matches!(
        validate(&b, 1 << 20, BatchOrigin::Client),
        Err(BatchError::CrcMismatch { .. })
    ));
}

#[test]
fn whole_batches_drops_a_cut_tail_and_refuses_impossible_lengths() {
    let a = sample(2);
    let with_tail = Bytes::from([a.to_vec(), a[..20].to_vec()].concat());
    assert_eq!(whole_batches(&with_tail).unwrap(), vec![a.clone()]);
    assert_eq!(whole_batches(&a.slice(..40)), Err(BatchError::Empty));
    let mut tiny = a.to_vec();
    tiny[8..12].copy_from_slice(&10i32.to_be_bytes());
    assert!(matches!(
        whole_batches(&Bytes::from(tiny)),
        Err(BatchError::LengthMismatch { .. })
    ));
}

#[test]
fn a_rewritten_max_timestamp_keeps_the_batch_valid() {
    let b = with_max_timestamp(&sample(2), TimestampType::LogAppendTime, 99);
    let h = validate(&b, 1 << 20, BatchOrigin::Client).unwrap();
    assert_eq!(
        (h.max_timestamp, h.timestamp_type()),
        (99, TimestampType::LogAppendTime)
    );
    let back = with_max_timestamp(&b, TimestampType::CreateTime, 5);
    let h = validate(&back, 1 << 20, BatchOrigin::Client).unwrap();
    assert_eq!(
        (h.max_timestamp, h.timestamp_type()),
        (5, TimestampType::CreateTime)
    );
}

proptest! {
    #[test]
    fn records_round_trip(values in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 1..20),
                          ts in 0i64..2_000_000_000_000) {
        let records: Vec<NewRecord> = values.iter().enumerate().map(|(i, v)| NewRecord {
            key: if i % 2 == 0 { None } else { Some(Bytes::from(format!("key-{i}"))) },
            value: Some(Bytes::from(v.clone())),
            timestamp_ms: ts + i as i64,
            headers: vec![(Bytes::from_static(b"h"), None)],
        }).collect();
        let batch = build_batch(&records, ProducerFields::NONE);
        prop_assert!(validate(&batch, 1 << 24, BatchOrigin::Client).is_ok());
        let decoded = decode_records(&batch).expect("decodes");
        prop_assert_eq!(decoded.len(), records.len());
        for (i, (d, r)) in decoded.iter().zip(records.iter()).enumerate() {
            prop_assert_eq!(d.offset, i as i64);
            prop_assert_eq!(d.timestamp_ms, r.timestamp_ms);
            prop_assert_eq!(&d.key, &r.key);
            prop_assert_eq!(&d.value, &r.value);
        }
    }

    #[test]
    fn validate_never_panics_on_garbage(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = validate(&bytes, 1 << 20, BatchOrigin::Client);
        let _ = split_batches(&Bytes::from(bytes));
    }
}
