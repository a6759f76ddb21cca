//! Errors that repeat, logged once and then counted.
//!
//! On a full disk every batch fails the same way: one log line per batch would write thousands
//! of lines to a disk that is already full and bury the first, useful one. Each kind of failure
//! (its fixed message) gets at most one line per `QUIET_WINDOW` on a shard: the first failure is
//! logged at once, later ones are counted, and the count goes out with the next line: the next
//! failure after the window, or "works again" at the first success after it.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt::Display;
use std::time::{Duration, Instant};

/// The least time between two lines about one kind of failure.
pub const QUIET_WINDOW: Duration = Duration::from_secs(10);

#[derive(Default)]
struct Kind {
    /// When a line about this failure was last written.
    logged_at: Option<Instant>,
    /// Failures since that line, not logged.
    quiet: u64,
    /// Failed since the last "works again".
    failing: bool,
}

impl Kind {
    fn may_log(&self, now: Instant) -> bool {
        self.logged_at
            .is_none_or(|at| now.duration_since(at) >= QUIET_WINDOW)
    }
}

thread_local! {
    static KINDS: RefCell<HashMap<&'static str, Kind>> = RefCell::new(HashMap::new());
}

/// Reports a failure `what` (a fixed message) of `subject` (a file, a partition).
pub fn error(what: &'static str, subject: &dyn Display, error: &dyn Display) {
    let now = Instant::now();
    let line = KINDS.with(|kinds| {
        let mut kinds = kinds.borrow_mut();
        let kind = kinds.entry(what).or_default();
        kind.failing = true;
        if !kind.may_log(now) {
            kind.quiet += 1;
            return None;
        }
        kind.logged_at = Some(now);
        Some(std::mem::take(&mut kind.quiet))
    });
    match line {
        None => {}
        Some(0) => tracing::error!(subject = %subject, error = %error, "{what}"),
        Some(repeats) => tracing::error!(
            subject = %subject,
            error = %error,
            repeats,
            "{what} (again; {repeats} more since the last report)"
        ),
    }
}

/// The operation behind `what` worked. After failures, the first success once the window has
/// passed logs "works again" with the failures not yet reported.
pub fn cleared(what: &'static str) {
    let now = Instant::now();
    let line = KINDS.with(|kinds| {
        let mut kinds = kinds.borrow_mut();
        let kind = kinds.get_mut(what)?;
        if !kind.failing || !kind.may_log(now) {
            return None;
        }
        kind.failing = false;
        kind.logged_at = Some(now);
        Some(std::mem::take(&mut kind.quiet))
    });
    if let Some(repeats) = line {
        tracing::info!(
            repeats,
            "{what}: works again ({repeats} more failures since the last report)"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(what: &'static str) -> (u64, bool) {
        KINDS.with(|k| {
            let k = k.borrow();
            let kind = &k[what];
            (kind.quiet, kind.failing)
        })
    }

    fn age(what: &'static str, by: Duration) {
        KINDS.with(|k| {
            let mut k = k.borrow_mut();
            let kind = k.get_mut(what).unwrap();
            kind.logged_at = kind.logged_at.map(|t| t - by);
        })
    }

    #[test]
    fn one_line_per_window_with_the_count_of_what_it_left_out() {
        const WHAT: &str = "test: writing failed";
        error(WHAT, &"file-a", &"No space left on device");
        assert_eq!(state(WHAT), (0, true), "the first failure is logged");
        for _ in 0..100 {
            error(WHAT, &"file-a", &"No space left on device");
            cleared(WHAT); // successes in between stay quiet within the window
        }
        assert_eq!(
            state(WHAT),
            (100, true),
            "repeats within the window are counted"
        );
        age(WHAT, QUIET_WINDOW);
        cleared(WHAT);
        assert_eq!(state(WHAT), (0, false), "works again, with the count");
        cleared(WHAT);
        assert_eq!(state(WHAT), (0, false));
        error(WHAT, &"file-a", &"again");
        assert_eq!(
            state(WHAT),
            (1, true),
            "within the window of the last line: counted"
        );
        age(WHAT, QUIET_WINDOW);
        error(WHAT, &"file-a", &"again");
        assert_eq!(state(WHAT), (0, true), "after it: logged with the count");
    }
}
