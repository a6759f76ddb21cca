//! Reserving disk blocks ahead of the buffered writer (`fallocate` with `FALLOC_FL_KEEP_SIZE`).
//!
//! An append into a part of the file with no blocks yet makes ext4 reserve and account each new
//! block as it is written (delayed allocation: `ext4_da_reserve_space`, quota, extent status
//! entries), on the writer's thread; one `fallocate` for a range ahead does that work once per
//! range instead. The file's size does not change (KEEP_SIZE), so everything that reads the
//! size — recovery, fetch, retention — sees the log exactly as before; only blocks beyond the
//! end are held, and they are released when the segment is sealed or the log closed (an
//! `ftruncate` to the same size frees them), so a sealed segment holds no more than its data.
//! After a crash, what the active segment had reserved goes at its next roll or close.
//!
//! How far ahead: as far as the segment has been written already, at most `AHEAD_MAX` and never
//! past `segment.bytes`. A partition written slowly holds little it does not use; one written
//! fast holds at most `AHEAD_MAX` beyond its end. A failed reservation (a full disk) is not an
//! error: the write that follows goes as it would have, and fails as it would have.
//!
//! `ferrite-bench produce --partitions 1 --size 1024`, alternating rounds: 0.58-0.67 s of broker
//! CPU per GB with the reservation against 0.66-0.69 without, lower in 2 of 3 rounds and equal
//! in one (`perf/results/reserve/2026-12-06.txt`).

use crate::uring::File;
use std::cell::Cell;

/// The most a log reserves beyond what it has written.
pub(crate) const AHEAD_MAX: u64 = 8 << 20;

/// What the active segment of one log has reserved.
#[derive(Default)]
pub(crate) struct Reservation {
    /// Blocks are reserved up to here in the active segment's file (0: nothing known).
    until: Cell<u64>,
}

/// A range to reserve before a write lands.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct Ahead {
    pub from: u64,
    pub len: u64,
}

impl Reservation {
    /// The range to reserve before a write of `[write_start, write_end)` in a segment that
    /// rolls at `segment_bytes`, if the reservation does not cover it already. What lies before
    /// the write is written already (after a restart, too), so nothing before it is asked for.
    pub fn ahead(&self, write_start: u64, write_end: u64, segment_bytes: u64) -> Option<Ahead> {
        let until = self.until.get();
        if write_end <= until {
            return None;
        }
        let from = until.max(write_start);
        let target = write_end
            .saturating_add(write_end.min(AHEAD_MAX))
            .min(segment_bytes)
            .max(write_end);
        self.until.set(target);
        Some(Ahead {
            from,
            len: target - from,
        })
    }

    /// Whether this run has reserved anything in the active segment.
    pub fn holds_any(&self) -> bool {
        self.until.get() > 0
    }

    /// A new active segment: nothing reserved in it yet.
    pub fn restart(&self) {
        self.until.set(0);
    }
}

/// Reserves `ahead` in `file`; a refusal (ENOSPC, a filesystem without fallocate) only means
/// the blocks are found as the writes come.
pub(crate) fn reserve(file: &File, ahead: Ahead) {
    use std::os::fd::AsRawFd;
    // SAFETY: fallocate on an open descriptor; it touches no memory of ours.
    let done = unsafe {
        libc::fallocate(
            file.as_raw_fd(),
            libc::FALLOC_FL_KEEP_SIZE,
            ahead.from as libc::off_t,
            ahead.len as libc::off_t,
        )
    };
    if done != 0 {
        tracing::debug!(
            path = %file.path().display(),
            error = %std::io::Error::last_os_error(),
            "reserving blocks ahead of the writer failed"
        );
    }
}

/// Releases the blocks reserved beyond `size` (the segment's logical size, which is the
/// file's): an ftruncate to the same size frees what lies past the end.
pub(crate) async fn release(file: &File, size: u64) -> crate::error::Result<()> {
    file.truncate(size)
        .await
        .map_err(|e| crate::error::Error::io("truncate", file.path(), e))
}

/// Cuts what lies past the active segment's logical `size` before it is sealed (`sealing`) or
/// the log closes: O_DIRECT preallocation and torn tails, which the file's size shows
/// (`trim_file`), and in buffered mode the blocks reserved ahead, which it does not. Those go
/// at every seal (a crash may have left some), at close only from a log that reserved any in
/// this run: thousands of idle partitions would otherwise each pay an ftruncate.
pub(crate) async fn cut_past_end(
    inner: &super::LogInner,
    file: &File,
    size: u64,
    sealing: bool,
) -> crate::error::Result<()> {
    let reserved =
        inner.mode == crate::config::IoMode::Buffered && (sealing || inner.reservation.holds_any());
    if reserved {
        release(file, size).await
    } else {
        super::segment::trim_file(file, size).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::tests::mapped_end_and_size;

    #[test]
    fn reserves_as_far_ahead_as_written_up_to_the_cap_and_the_segment() {
        let r = Reservation::default();
        const SEGMENT: u64 = 1 << 30;
        // First write of 4 KiB: 4 KiB more ahead.
        assert_eq!(
            r.ahead(0, 4096, SEGMENT),
            Some(Ahead { from: 0, len: 8192 })
        );
        assert_eq!(r.ahead(4096, 8192, SEGMENT), None, "covered");
        assert_eq!(
            r.ahead(8192, 10_000, SEGMENT),
            Some(Ahead {
                from: 8192,
                len: 20_000 - 8192
            })
        );
        // Far into the segment (a log reopened there): from the write, AHEAD_MAX beyond it.
        let end = 100 << 20;
        assert_eq!(
            r.ahead(end - 4096, end, SEGMENT),
            Some(Ahead {
                from: end - 4096,
                len: 4096 + AHEAD_MAX
            })
        );
        // Never past segment.bytes.
        assert_eq!(
            r.ahead(SEGMENT - 20, SEGMENT - 10, SEGMENT),
            Some(Ahead {
                from: SEGMENT - 20,
                len: 20
            })
        );
        r.restart();
        assert_eq!(r.ahead(0, 100, SEGMENT), Some(Ahead { from: 0, len: 200 }));
    }

    #[test]
    fn reserved_blocks_are_released_and_the_size_never_moves() {
        crate::testing::run_local(|| async {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("segment");
            let file = File::open(&path, libc::O_RDWR | libc::O_CREAT, 0o644)
                .await
                .unwrap();
            reserve(
                &file,
                Ahead {
                    from: 0,
                    len: 1 << 20,
                },
            );
            let (mapped, size) = mapped_end_and_size(&path);
            assert_eq!(size, 0, "KEEP_SIZE");
            assert!(mapped >= 1 << 20, "blocks to {mapped}");
            file.write_all_at(0, vec![crate::uring::WriteChunk::Owned(vec![7; 4096])])
                .await
                .unwrap();
            release(&file, 4096).await.unwrap();
            let (mapped, size) = mapped_end_and_size(&path);
            assert_eq!(size, 4096);
            assert_eq!(mapped, 4096, "blocks to {mapped} after release");
            assert_eq!(std::fs::read(&path).unwrap(), vec![7; 4096]);
        });
    }
}
