//! The log against a model: random operation sequences checked against a plain list of
//! batches, in both I/O modes.

use super::tests::*;
use super::*;
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    Append { records: usize, bytes: usize },
    Read { at: usize, max_bytes: usize },
    Truncate { at: usize },
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (1usize..5, 1usize..700).prop_map(|(records, bytes)| Op::Append { records, bytes }),
        3 => (0usize..1000, 1usize..4000).prop_map(|(at, max_bytes)| Op::Read { at, max_bytes }),
        1 => (0usize..1000).prop_map(|at| Op::Truncate { at }),
        1 => Just(Op::Reopen),
    ]
}

fn check(mode: IoMode, ops: Vec<Op>) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t-0");
    run(|| async move {
        let config = LogConfig {
            segment_bytes: 2500,
            index_interval_bytes: 400,
            ..LogConfig::default()
        };
        let mut log = open(&path, mode, config.clone()).await;
        // (base offset, stored bytes)
        let mut model: Vec<(i64, Bytes)> = Vec::new();
        let mut end = 0i64;
        for op in ops {
            match op {
                Op::Append { records: n, bytes } => {
                    let b = records(n, bytes, end);
                    let info = append(&log, &b).await;
                    assert_eq!(info.base_offset, end);
                    model.push((end, stamped(&b, end, 0)));
                    end += n as i64;
                }
                Op::Read { at, max_bytes } => {
                    if model.is_empty() {
                        continue;
                    }
                    let target = (at as i64) % end;
                    let r = log.read(target, max_bytes, end).await.unwrap();
                    let got = batch::split_batches(&r.to_bytes().await.unwrap()).unwrap();
                    let first = model.partition_point(|(b, _)| *b <= target) - 1;
                    assert_eq!(
                        got[0], model[first].1,
                        "starts at the batch holding {target}"
                    );
                    for (k, g) in got.iter().enumerate() {
                        assert_eq!(g, &model[first + k].1);
                    }
                    assert!(got.len() == 1 || r.bytes as usize <= max_bytes);
                }
                Op::Truncate { at } => {
                    if model.is_empty() {
                        continue;
                    }
                    let target = (at as i64) % end;
                    log.truncate_to(target).await.unwrap();
                    let keep = model.partition_point(|(b, bytes)| {
                        let h = batch::BatchHeader::parse(bytes).unwrap();
                        *b + h.offset_count() <= target
                    });
                    model.truncate(keep);
                    end = model
                        .last()
                        .map(|(b, bytes)| {
                            *b + batch::BatchHeader::parse(bytes).unwrap().offset_count()
                        })
                        .unwrap_or(0);
                    assert_eq!(log.log_end_offset(), end);
                }
                Op::Reopen => {
                    log.close().await.unwrap();
                    log = open(&path, mode, config.clone()).await;
                    assert_eq!(log.log_end_offset(), end);
                }
            }
        }
        let got = read_all(&log, log.log_start_offset()).await;
        let want: Vec<Bytes> = model.into_iter().map(|(_, b)| b).collect();
        assert_eq!(got, want);
        log.close().await.unwrap();
    });
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    #[test]
    fn buffered_matches_the_model(ops in proptest::collection::vec(op(), 1..60)) {
        check(IoMode::Buffered, ops);
    }

    #[test]
    fn direct_matches_the_model(ops in proptest::collection::vec(op(), 1..60)) {
        check(IoMode::Direct, ops);
    }
}
