//! Newtypes for values that must not be mixed up.

use std::fmt;

/// A position in a partition's log, as Kafka numbers records: the first record is offset 0.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Offset(pub i64);

impl Offset {
    pub const ZERO: Offset = Offset(0);

    pub fn value(self) -> i64 {
        self.0
    }

    /// The offset `n` records further on.
    pub fn plus(self, n: i64) -> Offset {
        debug_assert!(n >= 0, "offsets only move forward");
        Offset(self.0 + n)
    }
}

impl fmt::Display for Offset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Milliseconds since the Unix epoch, as Kafka timestamps are.
pub fn now_ms() -> i64 {
    use std::time::{SystemTime, UNIX_EPOCH};
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
