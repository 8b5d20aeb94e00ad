//! Fault and latency knobs, changeable at run time from tests (interior mutability).
//!
//! - **Latency**: every request waits `latency` plus a uniform random `0..=jitter`.
//! - **Random failures** ([`Faults::set_rates`]): each authenticated request fails with
//!   502 `{"message":"Server Error"}` with probability `p5xx`, else with a secondary rate
//!   limit with probability `p429` (REST: 429; GraphQL: 403 with the secondary-limit
//!   message; both with `retry-after: 1`).
//! - **Primary limit** ([`Faults::set_primary_limited`]): while on, GraphQL answers 200
//!   with a `RATE_LIMITED` error and REST answers 403, both with
//!   `x-ratelimit-remaining: 0` and `x-ratelimit-reset` = the switch time + N s. The real
//!   budget (see `GithubConfig::rate_limit`) being spent has the same effect.
//! - **Script** ([`Faults::script`]): a queue consumed by the next requests (GraphQL and
//!   REST alike), one entry each: `ok`, `502`, `secondary_rate_limit`, `rate_limited`,
//!   `bad_credentials`. The script is consulted before the random failures.
//!
//! - **Lost responses** ([`Faults::set_lost_rate`]): each request that succeeded has its
//!   answer replaced by 502 `{"message":"Server Error"}` with probability `p_lost`,
//!   *after* it was handled: a mutation's effect (an assignment, a comment) stays applied.
//!   This is the case that duplicates effects in a client that retries blindly.
//!   [`Faults::lose_next_writes`] loses the answers of the next N successful writes (GraphQL
//!   mutations, REST calls other than `GET`) for certain, before the random rate applies.
//!
//! Scripted and random failures are decided before the request is parsed or changes any
//! state; only lost responses come after the effect.

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use rand::Rng;

use super::state::epoch_now;

/// One injected failure (or `Ok`: none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum GithubFault {
    /// No fault for this request.
    Ok,
    /// 502 `{"message":"Server Error"}`.
    ServerError,
    /// A secondary rate limit (REST 429, GraphQL 403), `retry-after: 1`.
    SecondaryRateLimit,
    /// The primary rate limit (GraphQL 200 + `RATE_LIMITED`, REST 403), remaining 0.
    RateLimited,
    /// 401 `Bad credentials`.
    BadCredentials,
}

/// A script entry that is not a known fault.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown fault {0:?}: expected ok, 502, secondary_rate_limit, rate_limited or bad_credentials"
)]
pub struct UnknownGithubFault(pub String);

impl std::str::FromStr for GithubFault {
    type Err = UnknownGithubFault;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s.trim().to_ascii_lowercase().as_str() {
            "ok" => Self::Ok,
            "502" | "server_error" | "5xx" => Self::ServerError,
            "secondary_rate_limit" | "429" => Self::SecondaryRateLimit,
            "rate_limited" | "primary_rate_limit" => Self::RateLimited,
            "bad_credentials" | "401" => Self::BadCredentials,
            _ => return Err(UnknownGithubFault(s.to_owned())),
        })
    }
}

#[derive(Debug, Default)]
struct Knobs {
    latency: Duration,
    jitter: Duration,
    p5xx: f64,
    p429: f64,
    p_lost: f64,
    lose_writes: u32,
    script: VecDeque<GithubFault>,
    /// Epoch second when the switched-on primary limit resets.
    primary_reset: Option<u64>,
}

/// The fault and latency knobs of one emulator (see the module docs).
#[derive(Debug, Default)]
pub struct Faults {
    knobs: Mutex<Knobs>,
}

impl Faults {
    fn knobs(&self) -> MutexGuard<'_, Knobs> {
        self.knobs.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sets the fixed latency and the jitter added to every request.
    pub fn set_latency(&self, latency: Duration, jitter: Duration) {
        let mut k = self.knobs();
        k.latency = latency;
        k.jitter = jitter;
    }

    /// Sets the random failure rates (each clamped to `0..=1`).
    pub fn set_rates(&self, p5xx: f64, p429: f64) {
        let mut k = self.knobs();
        k.p5xx = p5xx.clamp(0.0, 1.0);
        k.p429 = p429.clamp(0.0, 1.0);
    }

    /// Sets the probability (clamped to `0..=1`) that a successful answer is lost after
    /// the request was handled (see the module docs).
    pub fn set_lost_rate(&self, p_lost: f64) {
        self.knobs().p_lost = p_lost.clamp(0.0, 1.0);
    }

    /// Loses the answers of the next `n` successful writes, effect applied.
    pub fn lose_next_writes(&self, n: u32) {
        self.knobs().lose_writes = n;
    }

    /// Whether the answer to a request that succeeded is lost: one of the
    /// writes [`Faults::lose_next_writes`] asked for, else per the rate.
    pub(crate) fn lose_answer(&self, write: bool) -> bool {
        let mut k = self.knobs();
        if write && k.lose_writes > 0 {
            k.lose_writes -= 1;
            return true;
        }
        k.p_lost > 0.0 && rand::rng().random_bool(k.p_lost)
    }

    /// Switches the primary rate limit on (resetting `reset_in` from now) or off (`None`).
    pub fn set_primary_limited(&self, reset_in: Option<Duration>) {
        self.knobs().primary_reset = reset_in.map(|d| epoch_now() + d.as_secs().max(1));
    }

    /// The epoch second the switched-on primary limit resets, if it is on (it switches
    /// itself off at that time).
    pub fn primary_limited_until(&self) -> Option<u64> {
        let mut k = self.knobs();
        match k.primary_reset {
            Some(reset) if reset <= epoch_now() => {
                k.primary_reset = None;
                None
            }
            other => other,
        }
    }

    /// Appends entries to the fault script.
    ///
    /// # Panics
    /// On an unknown entry; use [`Faults::try_script`] to get an error instead.
    pub fn script<I, S>(&self, entries: I)
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        if let Err(e) = self.try_script(entries) {
            panic!("{e}");
        }
    }

    /// Appends entries to the fault script; nothing is appended if one is unknown.
    pub fn try_script<I, S>(&self, entries: I) -> Result<(), UnknownGithubFault>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let parsed = entries
            .into_iter()
            .map(|e| e.as_ref().parse())
            .collect::<Result<Vec<GithubFault>, _>>()?;
        self.knobs().script.extend(parsed);
        Ok(())
    }

    /// Script entries not consumed yet.
    pub fn pending_script(&self) -> usize {
        self.knobs().script.len()
    }

    /// Clears the script, the random rates (lost answers included) and the primary-limit
    /// switch (latency stays).
    pub fn clear(&self) {
        let mut k = self.knobs();
        k.script.clear();
        k.p5xx = 0.0;
        k.p429 = 0.0;
        k.p_lost = 0.0;
        k.lose_writes = 0;
        k.primary_reset = None;
    }

    /// The delay for the next request.
    pub(crate) fn delay(&self) -> Duration {
        let k = self.knobs();
        if k.jitter.is_zero() {
            return k.latency;
        }
        let extra = rand::rng().random_range(0..=k.jitter.as_micros());
        k.latency + Duration::from_micros(u64::try_from(extra).unwrap_or(u64::MAX))
    }

    /// The fault for the next request: the next script entry if any, else a random one.
    pub(crate) fn next_fault(&self) -> Option<GithubFault> {
        let mut k = self.knobs();
        if let Some(entry) = k.script.pop_front() {
            return (entry != GithubFault::Ok).then_some(entry);
        }
        if k.p5xx <= 0.0 && k.p429 <= 0.0 {
            return None;
        }
        let mut rng = rand::rng();
        if rng.random_bool(k.p5xx) {
            return Some(GithubFault::ServerError);
        }
        if rng.random_bool(k.p429) {
            return Some(GithubFault::SecondaryRateLimit);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn script_is_consumed_in_order() {
        let faults = Faults::default();
        faults.script(["502", "ok", "rate_limited", "bad_credentials"]);
        let got: Vec<_> = (0..5).map(|_| faults.next_fault()).collect();
        assert_eq!(
            got,
            vec![
                Some(GithubFault::ServerError),
                None,
                Some(GithubFault::RateLimited),
                Some(GithubFault::BadCredentials),
                None
            ]
        );
        assert!(faults.try_script(["ok", "nope"]).is_err());
        assert_eq!(faults.pending_script(), 0);
    }

    #[test]
    fn certain_rates_always_fail() {
        let faults = Faults::default();
        faults.set_rates(1.0, 0.0);
        assert_eq!(faults.next_fault(), Some(GithubFault::ServerError));
        faults.set_rates(0.0, 1.0);
        assert_eq!(faults.next_fault(), Some(GithubFault::SecondaryRateLimit));
        faults.clear();
        assert_eq!(faults.next_fault(), None);
    }

    #[test]
    fn lost_answers_follow_their_rate() {
        let faults = Faults::default();
        assert!(!faults.lose_answer(true));
        faults.set_lost_rate(1.0);
        assert!(faults.lose_answer(false));
        faults.clear();
        assert!(!faults.lose_answer(false));
        faults.lose_next_writes(1);
        assert!(!faults.lose_answer(false), "reads are not counted");
        assert!(faults.lose_answer(true));
        assert!(!faults.lose_answer(true));
    }

    #[test]
    fn the_primary_switch_has_a_reset_time() {
        let faults = Faults::default();
        assert_eq!(faults.primary_limited_until(), None);
        faults.set_primary_limited(Some(Duration::from_secs(30)));
        assert!(
            faults
                .primary_limited_until()
                .is_some_and(|r| r > epoch_now())
        );
        faults.set_primary_limited(None);
        assert_eq!(faults.primary_limited_until(), None);
    }
}
