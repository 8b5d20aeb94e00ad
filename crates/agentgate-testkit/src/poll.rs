//! Waiting for a condition instead of sleeping: [`eventually`] re-checks a
//! predicate (sync or async) until it holds and returns what it found, or
//! panics naming what it waited for once the timeout passes.
//!
//! A predicate returns `bool` or `Option<T>` ([`Ready`]); `Some(value)` ends
//! the wait with `value`, so a test can wait for a thing and use it.

use std::fmt::Display;
use std::future::Future;
use std::time::Duration;

/// How often a predicate is re-checked: short, since it is cheap.
const RECHECK: Duration = Duration::from_millis(20);

/// What a predicate returns: whether the wait is over, and with what.
pub trait Ready {
    type Value;
    fn ready(self) -> Option<Self::Value>;
}

impl Ready for bool {
    type Value = ();
    fn ready(self) -> Option<()> {
        self.then_some(())
    }
}

impl<T> Ready for Option<T> {
    type Value = T;
    fn ready(self) -> Option<T> {
        self
    }
}

/// Re-checks `probe` until it is ready; panics with `what` after `timeout`.
pub async fn eventually<R: Ready>(
    what: impl Display,
    timeout: Duration,
    mut probe: impl FnMut() -> R,
) -> R::Value {
    eventually_async(what, timeout, || std::future::ready(probe())).await
}

/// [`eventually`] for a predicate that has to await (a request, a query).
pub async fn eventually_async<R: Ready, F: Future<Output = R>>(
    what: impl Display,
    timeout: Duration,
    mut probe: impl FnMut() -> F,
) -> R::Value {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(value) = probe().await.ready() {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(RECHECK).await;
    }
}
