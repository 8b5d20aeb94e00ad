//! The engine's time, as a type that cannot overflow.
//!
//! Stores keep instants as Unix milliseconds in a 64-bit integer. They were
//! plain `i64`s once, which let a truncating `as` cast or an unchecked `+`
//! slip in: an absurd `retention_hours` then wrapped into the past and the
//! sweep deleted every ended task. [`Millis`] only offers saturating
//! arithmetic, so "too far in the future" means "never", on every store.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// An instant: milliseconds since the Unix epoch, as the engine's clock
/// reads it and the stores keep it.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
#[cfg_attr(feature = "sqlx", derive(sqlx::Type), sqlx(transparent))]
pub struct Millis(i64);

impl Millis {
    /// The Unix epoch.
    pub const EPOCH: Self = Self(0);
    /// The end of time: what an instant saturates to.
    pub const MAX: Self = Self(i64::MAX);

    /// The instant `ms` milliseconds after the Unix epoch.
    pub const fn from_unix_ms(ms: i64) -> Self {
        Self(ms)
    }

    /// Milliseconds since the Unix epoch, as the stores keep it.
    pub const fn unix_ms(self) -> i64 {
        self.0
    }

    /// `by` later, saturating at [`Millis::MAX`].
    #[must_use]
    pub fn saturating_add(self, by: Duration) -> Self {
        Self(self.0.saturating_add(duration_ms(by)))
    }

    /// `by` earlier, saturating at the earliest instant.
    #[must_use]
    pub fn saturating_sub(self, by: Duration) -> Self {
        Self(self.0.saturating_sub(duration_ms(by)))
    }

    /// How long after `earlier` this is; zero if `earlier` is not before.
    pub fn since(self, earlier: Self) -> Duration {
        Duration::from_millis(u64::try_from(self.0.saturating_sub(earlier.0)).unwrap_or(0))
    }
}

impl fmt::Display for Millis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Whole milliseconds of `duration`, saturating at `i64::MAX`.
pub(crate) fn duration_ms(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

/// Whole milliseconds of `duration` as the wire's unsigned fields carry
/// them (`pollIntervalMs`, `ttlMs`), saturating at `u64::MAX`.
pub fn wire_ms(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absurd_durations_saturate_instead_of_wrapping() {
        let now = Millis::from_unix_ms(1_700_000_000_000);
        assert_eq!(now.saturating_add(Duration::MAX), Millis::MAX);
        assert!(now.saturating_sub(Duration::MAX) < Millis::EPOCH);
        assert_eq!(
            Millis::from_unix_ms(i64::MIN + 1).saturating_sub(Duration::MAX),
            Millis::from_unix_ms(i64::MIN)
        );
        assert_eq!(duration_ms(Duration::MAX), i64::MAX);
        assert_eq!(
            Millis::MAX.saturating_add(Duration::from_millis(1)),
            Millis::MAX
        );
    }

    #[test]
    fn since_is_never_negative() {
        let a = Millis::from_unix_ms(10);
        let b = Millis::from_unix_ms(25);
        assert_eq!(b.since(a), Duration::from_millis(15));
        assert_eq!(a.since(b), Duration::ZERO);
        assert_eq!(
            Millis::MAX.since(Millis::from_unix_ms(i64::MIN)),
            Duration::from_millis(i64::MAX as u64)
        );
    }

    #[test]
    fn an_instant_serializes_as_a_plain_number() {
        let json = serde_json::to_string(&Millis::from_unix_ms(5)).expect("serializes");
        assert_eq!(json, "5");
    }
}
