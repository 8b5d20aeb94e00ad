//! Failed authentication, counted per client address: logged at `warn`
//! (once per address per minute, with how many were not logged), and
//! throttled: an address that sent more than [`BURST`] bad tokens, refilled
//! at [`REFILL_PER_SECOND`], has its further bad tokens answered 429 with
//! `Retry-After`.
//!
//! Only the failing are throttled. The token is checked first, and a valid
//! one is served whatever its address did: behind a proxy many clients
//! share one address (or, with `server.trusted_proxies`, a forwarded one a
//! client may forge), and a stranger's bad tokens must not lock them out.
//! A request without a token is no failure either: every MCP client sends
//! its first request without one, to be told where to get one.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Failed attempts an address may make at once.
pub(super) const BURST: u32 = 30;
/// Failed attempts an address regains per second.
pub(super) const REFILL_PER_SECOND: f64 = 2.0;
/// Addresses remembered; past this the oldest half is forgotten.
const MAX_ADDRESSES: usize = 10_000;
/// How often one address's failures are logged.
const LOG_EVERY: Duration = Duration::from_secs(60);

#[derive(Debug)]
struct Entry {
    tokens: f64,
    at: Instant,
    logged_at: Option<Instant>,
    unlogged: u64,
}

/// Failed attempts per client address.
#[derive(Debug, Default)]
pub(super) struct Failures {
    entries: Mutex<HashMap<Option<IpAddr>, Entry>>,
}

impl Failures {
    fn entries(&self) -> std::sync::MutexGuard<'_, HashMap<Option<IpAddr>, Entry>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `Some(wait)` when `peer` has used up its failed attempts: answer its
    /// bad token 429, not 401 (and do not log it).
    pub(super) fn throttled(&self, peer: Option<IpAddr>, now: Instant) -> Option<Duration> {
        let mut entries = self.entries();
        let entry = entries.get_mut(&peer)?;
        refill(entry, now);
        (entry.tokens < 1.0)
            .then(|| Duration::from_secs_f64((1.0 - entry.tokens) / REFILL_PER_SECOND))
    }

    /// Records a failed attempt from `peer`, logging it unless this address
    /// was logged less than a minute ago.
    pub(super) fn record(&self, peer: Option<IpAddr>, path: &str, reason: &str, now: Instant) {
        let mut entries = self.entries();
        if entries.len() >= MAX_ADDRESSES && !entries.contains_key(&peer) {
            let mut ages: Vec<Instant> = entries.values().map(|e| e.at).collect();
            ages.sort();
            let cutoff = ages[ages.len() / 2];
            entries.retain(|_, e| e.at > cutoff);
        }
        let entry = entries.entry(peer).or_insert(Entry {
            tokens: f64::from(BURST),
            at: now,
            logged_at: None,
            unlogged: 0,
        });
        refill(entry, now);
        entry.tokens = (entry.tokens - 1.0).max(0.0);
        let due = entry
            .logged_at
            .is_none_or(|at| now.duration_since(at) >= LOG_EVERY);
        if due {
            let peer = peer.map_or_else(|| "unknown".to_owned(), |ip| ip.to_string());
            tracing::warn!(
                %peer,
                path,
                reason,
                not_logged_since_last = entry.unlogged,
                "refused a request: authentication failed"
            );
            entry.logged_at = Some(now);
            entry.unlogged = 0;
        } else {
            entry.unlogged += 1;
        }
    }
}

fn refill(entry: &mut Entry, now: Instant) {
    let elapsed = now.saturating_duration_since(entry.at).as_secs_f64();
    entry.tokens = (entry.tokens + elapsed * REFILL_PER_SECOND).min(f64::from(BURST));
    entry.at = now;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_is_throttled_after_its_burst_and_recovers_with_time() {
        let failures = Failures::default();
        let t0 = Instant::now();
        let attacker = Some(IpAddr::from([10, 0, 0, 1]));
        let other = Some(IpAddr::from([10, 0, 0, 2]));
        for _ in 0..BURST {
            assert_eq!(failures.throttled(attacker, t0), None);
            failures.record(attacker, "/mcp", "bad token", t0);
        }
        let wait = failures.throttled(attacker, t0).expect("throttled");
        assert_eq!(wait, Duration::from_millis(500));
        assert_eq!(failures.throttled(other, t0), None, "per address");
        // Half a second later one more attempt is allowed.
        assert_eq!(
            failures.throttled(attacker, t0 + Duration::from_millis(500)),
            None
        );
    }
}
