//! Fault knobs, changeable at run time from tests. Each counts down per request, so a
//! test says exactly which requests fail:
//!
//! - [`A2aFaults::fail_next`]: the next N JSON-RPC POSTs (after authentication and the
//!   version check) answer HTTP 503 with a JSON-RPC -32603 body, *before* any effect;
//! - [`A2aFaults::lose_next_answers`]: the next N `SendMessage` calls are applied (the
//!   task starts or continues, the messageId is recorded) and then answered HTTP 500 —
//!   the case where a client that retries with a new messageId would run twice;
//! - [`A2aFaults::drop_next_streams`]: the next N SSE streams (`SendStreamingMessage`,
//!   `SubscribeToTask`) are cut after `after_events` events: when the next event is
//!   due, the connection ends without the chunked body's terminator, as when a proxy
//!   drops it. The task goes on; other streams of it are unaffected (§3.5.2). A
//!   stream that ends (terminal state) before then is not cut;
//! - [`A2aFaults::drop_next_pushes`]: the next N push notifications are not sent at
//!   all, as by an agent that gave up delivering (§4.3.3: agents MAY stop after
//!   failures), so a client must not depend on every notification arriving.

use std::sync::Mutex;

#[derive(Debug, Default)]
struct Counters {
    fail: u64,
    lose: u64,
    drop_streams: u64,
    drop_after: usize,
    drop_pushes: u64,
}

/// The fault knobs of an [`A2aSim`](super::A2aSim).
#[derive(Debug, Default)]
pub struct A2aFaults {
    counters: Mutex<Counters>,
}

impl A2aFaults {
    fn counters(&self) -> std::sync::MutexGuard<'_, Counters> {
        self.counters
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The next `n` JSON-RPC requests fail with 503 before doing anything.
    pub fn fail_next(&self, n: u64) {
        self.counters().fail = n;
    }

    /// The next `n` SendMessage calls take effect, then answer 500.
    pub fn lose_next_answers(&self, n: u64) {
        self.counters().lose = n;
    }

    /// The next `n` streams are cut after `after_events` events.
    pub fn drop_next_streams(&self, n: u64, after_events: usize) {
        let mut counters = self.counters();
        counters.drop_streams = n;
        counters.drop_after = after_events;
    }

    /// The next `n` push notifications are skipped.
    pub fn drop_next_pushes(&self, n: u64) {
        self.counters().drop_pushes = n;
    }

    /// Clears every knob.
    pub fn reset(&self) {
        *self.counters() = Counters::default();
    }

    pub(crate) fn take_failure(&self) -> bool {
        take(&mut self.counters().fail)
    }

    pub(crate) fn take_push_drop(&self) -> bool {
        take(&mut self.counters().drop_pushes)
    }

    pub(crate) fn take_lost_answer(&self) -> bool {
        take(&mut self.counters().lose)
    }

    /// `Some(k)`: cut this stream after k events.
    pub(crate) fn take_stream_drop(&self) -> Option<usize> {
        let mut counters = self.counters();
        let after = counters.drop_after;
        take(&mut counters.drop_streams).then_some(after)
    }
}

fn take(counter: &mut u64) -> bool {
    if *counter == 0 {
        return false;
    }
    *counter -= 1;
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn knobs_count_down_to_zero() {
        let faults = A2aFaults::default();
        faults.fail_next(2);
        assert!(faults.take_failure());
        assert!(faults.take_failure());
        assert!(!faults.take_failure());
        faults.drop_next_streams(1, 3);
        assert_eq!(faults.take_stream_drop(), Some(3));
        assert_eq!(faults.take_stream_drop(), None);
        faults.lose_next_answers(1);
        faults.reset();
        assert!(!faults.take_lost_answer());
    }
}
