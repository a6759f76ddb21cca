//! A segment's `.log` file, opened when it is used and closed again when the shard needs its
//! descriptor for another: a broker holds tens of thousands of segments, and a process only so
//! many descriptors (issue 18). Kafka keeps every segment open and asks operators for a large
//! `ulimit -n`; Ferrite keeps at most a per-shard budget open (`set_open_segment_files_max`,
//! derived from RLIMIT_NOFILE at start) and reopens the others on demand.
//!
//! Each shard thread keeps a clock (second-chance) list of the files it opened: a use marks a
//! file referenced; when an open would pass the budget the hand sweeps, clearing marks, and
//! closes the first unmarked file. Closing only drops the handle's own `File`: a read or write
//! in flight holds another clone, and the descriptor closes when the last one goes.
//!
//! A file about to be unlinked, or replaced by a rename (the cleaner's swap), is `pin`ned
//! first: opened and never closed by the clock, so a reader that took the handle before keeps
//! reading the bytes it was promised, as it would with a descriptor held all along.
//!
//! Reopening never creates the file (no O_CREAT): a segment removed underneath is an error,
//! not a new empty file.
//!
//! Lives on: any shard. The handle is `Send`; a shard reading another's segment opens it on its
//! own ring and counts it against its own budget.

use crate::error::{Error, Result};
use crate::uring::File;
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

/// The budget of a thread nobody configured (tests, tools): high enough never to matter.
const OPEN_MAX_DEFAULT: usize = 1 << 20;

thread_local! {
    static CLOCK: RefCell<Clock> = RefCell::new(Clock::default());
    static OPEN_MAX: Cell<usize> = const { Cell::new(OPEN_MAX_DEFAULT) };
}

/// Segment files reopened after the clock closed them, over every shard.
static REOPENS: AtomicU64 = AtomicU64::new(0);
/// Segment files whose handle holds a descriptor now, over every shard.
static OPEN: AtomicUsize = AtomicUsize::new(0);

/// How many segment files this thread keeps open at most (at least 1).
pub fn set_open_segment_files_max(files: usize) {
    OPEN_MAX.with(|m| m.set(files.max(1)));
}

/// The segment files this thread holds open now, and its budget.
pub fn open_segment_files() -> (usize, usize) {
    let open = CLOCK.with(|c| c.borrow().open());
    (open, OPEN_MAX.with(Cell::get))
}

/// The segment files open now over every shard (descriptors the handles hold; a read in
/// flight may hold one a little longer).
pub fn segment_files_open_in_process() -> usize {
    OPEN.load(Ordering::Relaxed)
}

/// Segment files reopened (after being closed for the budget) since the process started.
pub fn segment_file_reopens() -> u64 {
    REOPENS.load(Ordering::Relaxed)
}

struct Shared {
    path: PathBuf,
    file: Mutex<Option<File>>,
    /// Used since the clock's hand last passed.
    referenced: AtomicBool,
    /// Never closed by the clock (about to be unlinked or renamed over).
    pinned: AtomicBool,
    /// Has been open once: a later open is a reopen.
    opened_before: AtomicBool,
}

impl Drop for Shared {
    fn drop(&mut self) {
        if self.file.get_mut().map(|f| f.is_some()).unwrap_or(false) {
            OPEN.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

#[derive(Default)]
struct Clock {
    files: VecDeque<Weak<Shared>>,
}

impl Clock {
    fn open(&self) -> usize {
        self.files
            .iter()
            .filter_map(Weak::upgrade)
            .filter(|s| s.file.lock().expect("segment file lock").is_some())
            .count()
    }

    /// Registers a file just opened, closing others while the thread is over its budget.
    fn admit(&mut self, opened: &Arc<Shared>, max: usize) {
        self.files.push_back(Arc::downgrade(opened));
        // Two turns at most: the first clears every mark, the second finds an unmarked file
        // unless all are pinned or in use by the one just admitted.
        let mut budget = self.files.len() * 2;
        while self.files.len() > max && budget > 0 {
            budget -= 1;
            let Some(weak) = self.files.pop_front() else {
                break;
            };
            let Some(shared) = weak.upgrade() else {
                continue;
            };
            let mut file = shared.file.lock().expect("segment file lock");
            if file.is_none() {
                continue;
            }
            let spare = Arc::ptr_eq(&shared, opened)
                || shared.pinned.load(Ordering::Relaxed)
                || shared.referenced.swap(false, Ordering::Relaxed);
            if spare {
                drop(file);
                self.files.push_back(weak);
            } else {
                *file = None;
                OPEN.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }
}

/// A segment's `.log` file; clones share it.
#[derive(Clone)]
pub(crate) struct SegmentFile {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for SegmentFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SegmentFile({})", self.shared.path.display())
    }
}

impl SegmentFile {
    /// A file just opened (or created) by the caller, counted against this thread's budget.
    pub fn opened(file: File) -> SegmentFile {
        OPEN.fetch_add(1, Ordering::Relaxed);
        let shared = Arc::new(Shared {
            path: file.path().to_path_buf(),
            file: Mutex::new(Some(file)),
            referenced: AtomicBool::new(true),
            pinned: AtomicBool::new(false),
            opened_before: AtomicBool::new(true),
        });
        let max = OPEN_MAX.with(Cell::get);
        CLOCK.with(|c| c.borrow_mut().admit(&shared, max));
        SegmentFile { shared }
    }

    /// A file that exists at `path`, opened on first use.
    pub fn closed(path: &Path) -> SegmentFile {
        SegmentFile {
            shared: Arc::new(Shared {
                path: path.to_path_buf(),
                file: Mutex::new(None),
                referenced: AtomicBool::new(false),
                pinned: AtomicBool::new(false),
                opened_before: AtomicBool::new(false),
            }),
        }
    }

    pub fn path(&self) -> &Path {
        &self.shared.path
    }

    /// The open file, opening it (read-write, never creating it) when the clock had closed it.
    pub async fn get(&self) -> Result<File> {
        if let Some(file) = self.open_now() {
            return Ok(file);
        }
        let file = File::open(&self.shared.path, libc::O_RDWR, 0)
            .await
            .map_err(|e| Error::io("open", &self.shared.path, e))?;
        let kept = {
            let mut slot = self.shared.file.lock().expect("segment file lock");
            match &*slot {
                // Another task opened it meanwhile: use theirs, drop ours.
                Some(theirs) => return Ok(theirs.clone()),
                None => {
                    *slot = Some(file.clone());
                    OPEN.fetch_add(1, Ordering::Relaxed);
                    file
                }
            }
        };
        if self.shared.opened_before.swap(true, Ordering::Relaxed) {
            REOPENS.fetch_add(1, Ordering::Relaxed);
        }
        self.shared.referenced.store(true, Ordering::Relaxed);
        let max = OPEN_MAX.with(Cell::get);
        CLOCK.with(|c| c.borrow_mut().admit(&self.shared, max));
        Ok(kept)
    }

    /// The file if it is open, marked as used.
    fn open_now(&self) -> Option<File> {
        let file = self.shared.file.lock().expect("segment file lock").clone();
        if file.is_some() {
            self.shared.referenced.store(true, Ordering::Relaxed);
        }
        file
    }

    /// Opens the file and keeps it open for as long as any handle lives: the caller is about
    /// to unlink it or rename another file over its path.
    pub async fn pin(&self) -> Result<()> {
        self.shared.pinned.store(true, Ordering::Relaxed);
        self.get().await.map(drop)
    }

    /// Whether the file is open now (tests).
    #[cfg(test)]
    pub fn is_open(&self) -> bool {
        self.shared
            .file
            .lock()
            .expect("segment file lock")
            .is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::run_local as run;
    use crate::uring::WriteChunk;

    async fn create(dir: &Path, name: &str, contents: &[u8]) -> SegmentFile {
        let file = File::open_rw(&dir.join(name)).await.unwrap();
        file.write_all_at(0, vec![WriteChunk::Owned(contents.to_vec())])
            .await
            .unwrap();
        SegmentFile::opened(file)
    }

    #[test]
    fn past_the_budget_the_least_recently_used_files_close_and_reopen_on_use() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().to_path_buf();
        run(move || async move {
            set_open_segment_files_max(2);
            let a = create(&path, "a", b"aaaa").await;
            let b = create(&path, "b", b"bbbb").await;
            assert!(a.is_open() && b.is_open());
            let c = create(&path, "c", b"cccc").await;
            assert_eq!(open_segment_files().0, 2, "the budget holds");
            assert!(c.is_open(), "the file just opened stays open");
            let reopens = segment_file_reopens();
            for (file, want) in [(&a, b"aaaa"), (&b, b"bbbb"), (&c, b"cccc")] {
                let got = file.get().await.unwrap().read_at(0, 4).await.unwrap();
                assert_eq!(&got, want);
                assert!(open_segment_files().0 <= 2);
            }
            assert!(
                segment_file_reopens() > reopens,
                "a closed file was reopened"
            );
            set_open_segment_files_max(OPEN_MAX_DEFAULT);
        });
    }

    #[test]
    fn a_pinned_file_stays_readable_after_its_path_is_unlinked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().to_path_buf();
        run(move || async move {
            set_open_segment_files_max(1);
            let doomed = create(&path, "doomed", b"kept").await;
            doomed.pin().await.unwrap();
            std::fs::remove_file(path.join("doomed")).unwrap();
            let _other = create(&path, "other", b"x").await;
            let _third = create(&path, "third", b"y").await;
            assert!(doomed.is_open(), "the clock never closes a pinned file");
            let got = doomed.get().await.unwrap().read_at(0, 4).await.unwrap();
            assert_eq!(&got, b"kept");
            set_open_segment_files_max(OPEN_MAX_DEFAULT);
        });
    }

    #[test]
    fn a_closed_file_that_was_removed_is_an_error_not_a_new_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().to_path_buf();
        run(move || async move {
            let gone = SegmentFile::closed(&path.join("gone.log"));
            assert!(gone.get().await.is_err());
            assert!(!path.join("gone.log").exists());
        });
    }
}
