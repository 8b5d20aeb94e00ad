//! Time as the engine sees it: Unix milliseconds from an injectable clock, so
//! lease and TTL tests move time instead of sleeping.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

pub use agentgate_backend::Millis;

/// A source of the current time.
pub trait Clock: Send + Sync + std::fmt::Debug + 'static {
    fn now(&self) -> Millis;
}

/// The wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Millis {
        chrono::Utc::now().timestamp_millis()
    }
}

/// A clock that only moves when told to; for tests.
#[derive(Debug, Clone, Default)]
pub struct ManualClock(Arc<AtomicI64>);

impl ManualClock {
    pub fn starting_at(now: Millis) -> Self {
        Self(Arc::new(AtomicI64::new(now)))
    }

    pub fn advance(&self, by: std::time::Duration) {
        self.0.fetch_add(by.as_millis() as i64, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Millis {
        self.0.load(Ordering::SeqCst)
    }
}

/// Formats a timestamp as ISO 8601 (UTC, millisecond precision), as the
/// Tasks extension's `createdAt` / `lastUpdatedAt` want it.
pub fn iso8601(at: Millis) -> String {
    chrono::DateTime::from_timestamp_millis(at)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}
