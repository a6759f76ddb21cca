//! Fuzzing the request decoder: for every API and version Ferrite serves, a real request
//! frame (header and a populated body) is mutated (bytes flipped, cut, inserted, lengths and
//! counts overwritten with extreme values) and decoded. Decoding must answer, never panic,
//! and never try to allocate for a length the frame cannot hold (which would abort the
//! process). Repeatable and bounded: 20,000 frames from a fixed seed in a few seconds
//! (`ferrite_shards::testing::fuzz_budget`; `scripts/fuzz` runs longer from new seeds).

use super::decode;
use crate::protocol::peek_header;
use crate::protocol::versions::SUPPORTED;
use bytes::Bytes;
use kafka_protocol::messages::ApiKey;
use proptest::prelude::*;
use proptest::sample::Index;
use requests::frame;

/// The sample requests, shared with the wire-level mutation test.
#[allow(dead_code)]
mod requests {
    include!("../../tests/common/requests.rs");
}

/// One change to a frame.
#[derive(Clone, Debug)]
enum Mutation {
    Flip(Index, u8),
    Cut(Index),
    Insert(Index, Vec<u8>),
    /// A 4-byte length or count overwritten (big-endian), as a hostile client would.
    Int32(Index, i32),
    /// A varint overwritten with a large value (flexible versions' compact lengths).
    Varint(Index, u32),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let extreme = prop_oneof![
        Just(-1),
        Just(0),
        Just(i32::MAX),
        Just(0x1000_0000),
        Just(65_536),
        any::<i32>()
    ];
    prop_oneof![
        (any::<Index>(), 1u8..=255).prop_map(|(i, x)| Mutation::Flip(i, x)),
        any::<Index>().prop_map(Mutation::Cut),
        (any::<Index>(), prop::collection::vec(any::<u8>(), 1..8))
            .prop_map(|(i, b)| Mutation::Insert(i, b)),
        (any::<Index>(), extreme).prop_map(|(i, v)| Mutation::Int32(i, v)),
        (
            any::<Index>(),
            prop_oneof![Just(u32::MAX), Just(1 << 28), any::<u32>()]
        )
            .prop_map(|(i, v)| Mutation::Varint(i, v)),
    ]
}

fn apply(frame: &mut Vec<u8>, m: &Mutation) {
    if frame.is_empty() {
        return;
    }
    match m {
        Mutation::Flip(i, x) => {
            let i = i.index(frame.len());
            frame[i] ^= x;
        }
        Mutation::Cut(i) => frame.truncate(i.index(frame.len())),
        Mutation::Insert(i, bytes) => {
            let i = i.index(frame.len());
            frame.splice(i..i, bytes.iter().copied());
        }
        Mutation::Int32(i, v) => {
            let i = i.index(frame.len());
            for (k, b) in v.to_be_bytes().into_iter().enumerate() {
                if let Some(slot) = frame.get_mut(i + k) {
                    *slot = b;
                }
            }
        }
        Mutation::Varint(i, v) => {
            let i = i.index(frame.len());
            let mut encoded = Vec::new();
            let mut v = *v;
            while v >= 0x80 {
                encoded.push((v as u8) | 0x80);
                v >>= 7;
            }
            encoded.push(v as u8);
            for (k, b) in encoded.into_iter().enumerate() {
                if let Some(slot) = frame.get_mut(i + k) {
                    *slot = b;
                }
            }
        }
    }
}

/// Every (API, version) Ferrite serves.
fn served() -> Vec<(ApiKey, i16)> {
    SUPPORTED
        .iter()
        .flat_map(|&(api, min, max)| (min..=max).map(move |v| (api, v)))
        .collect()
}

#[test]
fn every_served_request_decodes_unmutated() {
    for (api, version) in served() {
        let f = Bytes::from(frame(api, version));
        let decoded = decode(f.clone(), peek_header(&f))
            .unwrap_or_else(|_| panic!("{api:?} v{version} does not decode"));
        assert_eq!((decoded.api_key, decoded.version), (api, version));
        assert_eq!(decoded.client_id, "fuzz");
    }
}

proptest! {
    #![proptest_config({
        let (cases, seed) = ferrite_shards::testing::fuzz_budget(20_000);
        ProptestConfig {
            cases,
            rng_seed: proptest::test_runner::RngSeed::Fixed(seed),
            failure_persistence: None,
            ..ProptestConfig::default()
        }
    })]

    #[test]
    fn mutated_requests_are_answered_or_refused_never_a_panic(
        which in any::<Index>(),
        mutations in prop::collection::vec(mutation(), 1..4),
    ) {
        let served = served();
        let (api, version) = served[which.index(served.len())];
        let mut f = frame(api, version);
        for m in &mutations {
            apply(&mut f, m);
        }
        let f = Bytes::from(f);
        // Decoded or refused: either way it returns.
        let _ = decode(f.clone(), peek_header(&f));
    }
}
