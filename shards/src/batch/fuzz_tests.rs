//! Fuzzing produce-time batch validation as the broker runs it (`whole_batches`, `validate`,
//! then `check_records`) on real batches of every codec, mutated anywhere, with the CRC left
//! as it is or recomputed (so a mutated record section reaches the record walk, as a client
//! that computes its CRC after building bad records would send it). The property: nothing
//! panics, and every batch accepted is one a consumer can read: its record section
//! decompresses and holds exactly `record_count` well-formed records.
//! Repeatable and bounded: a fixed seed and case count (`testing::fuzz_budget`).

use super::build::{build_batch_compressed, NewRecord, ProducerFields};
use super::record_checks::{check_records, RecordRules};
use super::records::{record_section, record_spans};
use super::{validate, whole_batches, BatchOrigin, Compression, CRC_START, HEADER_BYTES};
use bytes::Bytes;
use proptest::prelude::*;
use proptest::sample::Index;

const NOW: i64 = 1_700_000_000_000;
const MAX_BATCH_BYTES: usize = 1 << 20;

fn batch(codec: Compression, records: usize, value_bytes: usize) -> Vec<u8> {
    let records: Vec<NewRecord> = (0..records)
        .map(|i| NewRecord {
            key: (i % 2 == 0).then(|| Bytes::from(format!("key-{i}"))),
            value: Some(Bytes::from(vec![b'a' + (i % 26) as u8; value_bytes])),
            timestamp_ms: NOW - 100 + i as i64,
            headers: vec![(Bytes::from_static(b"h"), Some(Bytes::from_static(b"v")))],
        })
        .collect();
    build_batch_compressed(&records, ProducerFields::NONE, codec)
        .unwrap()
        .to_vec()
}

fn recompute_crc(b: &mut [u8]) {
    if b.len() >= CRC_START {
        let crc = crc32c::crc32c(&b[CRC_START..]);
        b[17..21].copy_from_slice(&crc.to_be_bytes());
    }
}

/// What the broker does with a producer's record set; `Ok` holds the batches it would append.
fn accepted(records: &Bytes) -> Vec<Bytes> {
    let Ok(batches) = whole_batches(records) else {
        return Vec::new();
    };
    let rules = RecordRules::defaults(NOW);
    batches
        .into_iter()
        .filter(
            |b| match validate(b, MAX_BATCH_BYTES, BatchOrigin::Client) {
                Ok(header) => check_records(b, &header, &rules).is_ok(),
                Err(_) => false,
            },
        )
        .collect()
}

proptest! {
    #![proptest_config(crate::testing::fuzz_config(10_000))]

    #[test]
    fn an_accepted_batch_is_always_readable(
        codec in 0usize..5,
        records in 1usize..20,
        value_bytes in 0usize..200,
        changes in prop::collection::vec((any::<Index>(), any::<u8>()), 1..6),
        in_records_only in any::<bool>(),
        fix_crc in any::<bool>(),
        cut in prop::option::of(any::<Index>()),
    ) {
        let mut b = batch(Compression::ALL[codec], records, value_bytes);
        for (at, byte) in &changes {
            let at = if in_records_only {
                HEADER_BYTES + at.index(b.len() - HEADER_BYTES)
            } else {
                at.index(b.len())
            };
            b[at] = *byte;
        }
        if let Some(cut) = cut {
            b.truncate(cut.index(b.len()));
        }
        if fix_crc {
            recompute_crc(&mut b);
        }
        for accepted in accepted(&Bytes::from(b)) {
            let header = super::BatchHeader::parse(&accepted).unwrap();
            let section = record_section(&accepted, MAX_BATCH_BYTES * 4);
            prop_assert!(section.is_ok(), "accepted but its section does not decompress");
            let spans = record_spans(&section.unwrap(), header.record_count);
            prop_assert!(spans.is_ok(), "accepted but its records do not decode: {spans:?}");
            prop_assert_eq!(spans.unwrap().len() as i32, header.record_count);
        }
    }
}

#[test]
fn unmutated_batches_of_every_codec_are_accepted() {
    for codec in Compression::ALL {
        let b = Bytes::from(batch(codec, 7, 50));
        assert_eq!(accepted(&b).len(), 1, "{codec:?}");
    }
}
