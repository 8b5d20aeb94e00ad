//! Time as the engine sees it: what time it is, and how to wait for a time.
//!
//! Every wait of the scheduler (the claim loop's sleep, a lease's heartbeat
//! interval, a step's timeout, the backoff after a store failure, the
//! sweeper's interval, the shutdown drain) goes through the engine's
//! [`Clock`], never through `tokio::time` directly. So a test that hands the
//! engine a [`ManualClock`] decides when time passes: it moves the clock past
//! a lease, a backoff or a TTL and the engine acts at once, with no real
//! waiting and nothing left to chance on a slow machine.
//!
//! - [`SystemClock`]: the wall clock; waits are `tokio::time` sleeps (so
//!   `#[tokio::test(start_paused = true)]` also drives them, for tests that
//!   touch no database).
//! - [`ManualClock`]: stands still until [`ManualClock::advance`]; a wait
//!   ends when the clock is moved to or past its deadline.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use agentgate_backend::Millis;

/// A wait handed out by a [`Clock`].
pub type Sleep = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// A source of the current time, and of waits measured in it.
pub trait Clock: Send + Sync + std::fmt::Debug + 'static {
    /// The current time.
    fn now(&self) -> Millis;

    /// Completes once `now()` has reached `deadline` (at once if it has).
    fn sleep_until(&self, deadline: Millis) -> Sleep;

    /// Completes once `duration` has passed on this clock.
    fn sleep(&self, duration: Duration) -> Sleep {
        self.sleep_until(self.now().saturating_add(duration))
    }
}

/// The wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Millis {
        Millis::from_unix_ms(chrono::Utc::now().timestamp_millis())
    }

    fn sleep_until(&self, deadline: Millis) -> Sleep {
        self.sleep(deadline.since(self.now()))
    }

    fn sleep(&self, duration: Duration) -> Sleep {
        // `tokio::time` rather than the wall clock: a paused test runtime
        // moves it, and a step of the wall clock (NTP) does not cut a wait
        // short or stretch it.
        Box::pin(tokio::time::sleep(duration))
    }
}

/// A clock that only moves when told to; for tests.
///
/// Waits end when [`advance`](Self::advance) or [`set`](Self::set) moves the
/// clock to or past their deadline, in whichever task is waiting.
#[derive(Debug, Clone)]
pub struct ManualClock(Arc<tokio::sync::watch::Sender<Millis>>);

impl Default for ManualClock {
    fn default() -> Self {
        Self::starting_at(Millis::EPOCH)
    }
}

impl ManualClock {
    pub fn starting_at(now: Millis) -> Self {
        Self(Arc::new(tokio::sync::watch::Sender::new(now)))
    }

    /// Moves the clock forward by `by` (saturating at the end of time).
    pub fn advance(&self, by: Duration) {
        self.0.send_modify(|now| *now = now.saturating_add(by));
    }

    /// Moves the clock to `to`, if that is later than now (a clock never
    /// goes back).
    pub fn set(&self, to: Millis) {
        self.0.send_if_modified(|now| {
            let later = to > *now;
            if later {
                *now = to;
            }
            later
        });
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Millis {
        *self.0.borrow()
    }

    fn sleep_until(&self, deadline: Millis) -> Sleep {
        let mut now = self.0.subscribe();
        Box::pin(async move {
            // The sender lives as long as any clone of the clock; if every
            // clone is gone, time stands still for ever.
            if now.wait_for(|now| *now >= deadline).await.is_err() {
                std::future::pending::<()>().await;
            }
        })
    }
}

/// Runs `future` until it ends or `duration` passes on `clock`; `None` if
/// the time ran out first.
pub async fn timeout<F: Future>(
    clock: &dyn Clock,
    duration: Duration,
    future: F,
) -> Option<F::Output> {
    tokio::select! {
        output = future => Some(output),
        () = clock.sleep(duration) => None,
    }
}

/// Formats a timestamp as ISO 8601 (UTC, millisecond precision), as the
/// Tasks extension's `createdAt` / `lastUpdatedAt` want it.
pub fn iso8601(at: Millis) -> String {
    chrono::DateTime::from_timestamp_millis(at.unix_ms())
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: Millis = Millis::from_unix_ms(1_800_000_000_000);

    #[tokio::test]
    async fn a_manual_wait_ends_when_the_clock_reaches_its_deadline() {
        let clock = ManualClock::starting_at(T0);
        let mut wait = tokio::spawn(clock.sleep(Duration::from_secs(30)));
        // Not before: 29.999 s later the wait is still pending.
        clock.advance(Duration::from_millis(29_999));
        tokio::task::yield_now().await;
        assert!(
            futures::FutureExt::now_or_never(&mut wait).is_none(),
            "the wait ended before its deadline"
        );
        clock.advance(Duration::from_millis(1));
        wait.await.expect("the wait ends at its deadline");
        assert_eq!(clock.now(), T0.saturating_add(Duration::from_secs(30)));
    }

    #[tokio::test]
    async fn a_wait_for_the_past_ends_at_once_and_the_clock_never_goes_back() {
        let clock = ManualClock::starting_at(T0);
        clock.sleep_until(T0).await;
        clock.set(Millis::EPOCH);
        assert_eq!(clock.now(), T0, "set does not move the clock back");
        clock.advance(Duration::MAX);
        assert_eq!(clock.now(), Millis::MAX, "advance saturates");
    }

    #[tokio::test]
    async fn timeout_is_measured_on_the_clock() {
        let clock = ManualClock::starting_at(T0);
        let pending = timeout(&clock, Duration::from_secs(5), std::future::pending::<()>());
        let mover = async {
            clock.advance(Duration::from_secs(5));
        };
        let (timed_out, ()) = tokio::join!(pending, mover);
        assert_eq!(timed_out, None);
        let ready = timeout(&clock, Duration::from_secs(5), async { 7 }).await;
        assert_eq!(ready, Some(7));
    }

    #[tokio::test(start_paused = true)]
    async fn system_clock_waits_follow_tokio_time() {
        let before = tokio::time::Instant::now();
        SystemClock.sleep(Duration::from_secs(3600)).await;
        assert!(tokio::time::Instant::now() - before >= Duration::from_secs(3600));
    }
}
