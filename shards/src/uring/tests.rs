use super::*;
use crate::testing::run_local as run;
use bytes::Bytes;

#[test]
fn vectored_write_then_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    run(|| async move {
        let f = File::open_rw(&path).await.unwrap();
        let chunks = vec![
            WriteChunk::Stamp([1u8; 16]),
            WriteChunk::Shared(Bytes::from_static(b"hello")),
            WriteChunk::Owned(vec![2u8; 10_000]),
        ];
        f.write_all_at(4, chunks).await.unwrap();
        f.fdatasync().await.unwrap();
        assert_eq!(f.size().unwrap(), 4 + 16 + 5 + 10_000);
        let back = f.read_at(4, 21).await.unwrap();
        assert_eq!(&back[..16], &[1u8; 16]);
        assert_eq!(&back[16..], b"hello");
        let tail = f.read_at(10_000, 1_000).await.unwrap();
        assert_eq!(tail.len(), 25, "short read at end of file");
        f.truncate(10).await.unwrap();
        assert_eq!(f.size().unwrap(), 10);
    });
}

#[test]
fn completions_whose_wakeup_never_comes_are_reaped_by_the_sweeper() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    run(|| async move {
        let f = File::open_rw(&path).await.unwrap();
        set_inline_write_max(0);
        let ring = Ring::current();
        ring.silence_completions(true);
        let before = late_wakeups();
        // Without the sweeper nothing would wake the driver: these writes would never finish.
        // A write whose completion is already there when the driver next runs is reaped
        // without the sweeper (on a loaded machine, all of the first few may be): writes go
        // on until the sweeper has had to reap one.
        let mut written = 0u64;
        while written < 200 && late_wakeups() == before {
            let i = written;
            let write = f.write_all_at(i * 4, vec![WriteChunk::Owned(vec![i as u8; 4])]);
            glommio::timer::timeout(std::time::Duration::from_secs(5), async {
                write.await.map_err(Into::into)
            })
            .await
            .expect("the sweeper reaps a completion its driver was not woken for");
            written += 1;
        }
        assert!(
            late_wakeups() > before,
            "each reap the sweeper makes is counted"
        );
        ring.silence_completions(false);
        set_inline_write_max(INLINE_WRITE_MAX_DEFAULT);
        let last = written - 1;
        assert_eq!(f.read_at(last * 4, 4).await.unwrap(), vec![last as u8; 4]);
    });
}

#[test]
fn many_concurrent_operations_beyond_the_ring_depth_complete() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    run(|| async move {
        let f = File::open_rw(&path).await.unwrap();
        f.write_all_at(
            0,
            vec![WriteChunk::Owned(
                (0..=255u8).cycle().take(1 << 16).collect(),
            )],
        )
        .await
        .unwrap();
        let reads: Vec<_> = (0..1000u64)
            .map(|i| {
                let f = f.clone();
                glommio::spawn_local(async move { f.read_at(i * 7, 3).await.unwrap() })
            })
            .collect();
        for (i, r) in reads.into_iter().enumerate() {
            let got = r.await;
            let want: Vec<u8> = (0..3).map(|k| ((i * 7 + k) % 256) as u8).collect();
            assert_eq!(got, want);
        }
    });
}

#[test]
fn dropped_operation_does_not_disturb_the_next() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    run(|| async move {
        let f = File::open_rw(&path).await.unwrap();
        f.write_all_at(0, vec![WriteChunk::Owned(vec![9u8; 4096])])
            .await
            .unwrap();
        drop(f.read_at(0, 4096)); // never polled
        let mut early = Box::pin(f.read_at(0, 4096));
        let _ = futures::poll!(early.as_mut()); // submitted, then dropped while in flight
        drop(early);
        assert_eq!(f.read_at(0, 4).await.unwrap(), vec![9u8; 4]);
    });
}

#[test]
fn splice_moves_file_bytes_through_a_pipe() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    run(|| async move {
        let f = File::open_rw(&path).await.unwrap();
        f.write_all_at(0, vec![WriteChunk::Owned(b"zero-copy!".to_vec())])
            .await
            .unwrap();
        let mut pipe = [0i32; 2];
        assert_eq!(
            unsafe { libc::pipe2(pipe.as_mut_ptr(), libc::O_CLOEXEC) },
            0
        );
        let n = splice::splice_from_file(&f, 5, pipe[1], 5, ())
            .await
            .unwrap();
        assert_eq!(n, 5);
        let mut out = [0u8; 5];
        let r = unsafe { libc::read(pipe[0], out.as_mut_ptr().cast(), 5) };
        assert_eq!(r, 5);
        assert_eq!(&out, b"copy!");
        unsafe {
            libc::close(pipe[0]);
            libc::close(pipe[1]);
        }
    });
}

#[test]
fn atomic_write_replaces_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("checkpoint");
    run(|| async move {
        write_atomically(&path, b"one".to_vec()).await.unwrap();
        write_atomically(&path, b"two".to_vec()).await.unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        assert!(!path.with_extension("tmp").exists());
    });
}

/// A write within the inline limit is made by this thread, one above it (or any, with the
/// limit at 0) by the ring; the bytes land the same either way.
#[test]
fn small_writes_are_made_inline_and_large_ones_by_the_ring() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    run(|| async move {
        let counts =
            || crate::stats::with_shard_io(|io| (io.inline_writes.get(), io.ring_writes.get()));
        let f = File::open_rw(&path).await.unwrap();
        set_inline_write_max(4096);
        let before = counts();
        let small = vec![
            WriteChunk::Stamp([3u8; 16]),
            WriteChunk::Owned(vec![4u8; 4080]),
        ];
        f.write_all_at(0, small).await.unwrap();
        assert_eq!(
            counts(),
            (before.0 + 1, before.1),
            "4 KiB at a 4 KiB limit: inline"
        );
        f.write_all_at(4096, vec![WriteChunk::Owned(vec![5u8; 4097])])
            .await
            .unwrap();
        assert_eq!(
            counts(),
            (before.0 + 1, before.1 + 1),
            "one byte over: the ring"
        );
        set_inline_write_max(0);
        f.write_all_at(8193, vec![WriteChunk::Owned(vec![6u8; 7])])
            .await
            .unwrap();
        assert_eq!(
            counts(),
            (before.0 + 1, before.1 + 2),
            "limit 0: always the ring"
        );
        set_inline_write_max(INLINE_WRITE_MAX_DEFAULT);
        let back = f.read_at(0, 8200).await.unwrap();
        assert_eq!(&back[..16], &[3u8; 16]);
        assert!(back[16..4096].iter().all(|&b| b == 4));
        assert!(back[4096..8193].iter().all(|&b| b == 5));
        assert_eq!(&back[8193..], &[6u8; 7]);
    });
}

/// An inline write that fails reports the kernel's error, as the ring would.
#[test]
fn an_inline_write_to_a_read_only_descriptor_fails_with_ebadf() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    std::fs::write(&path, b"x").unwrap();
    run(|| async move {
        let f = File::open_read(&path).await.unwrap();
        let err = f
            .write_all_at(0, vec![WriteChunk::Owned(vec![1u8; 10])])
            .await
            .unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EBADF));
    });
}
