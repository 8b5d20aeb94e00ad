//! What the property tests share: their [`config`], the hostile-input
//! generators ([`nasty_string`], [`any_json`]) and a canned upstream
//! ([`CannedUpstream`]) that answers each request with the next of the
//! answers a case chose.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use proptest::prelude::*;
use proptest::test_runner::Config;
use serde_json::Value;

/// CI-sized case counts; `PROPTEST_CASES` overrides them. The runners are
/// not the `proptest!` macro (they do not know the source file), so
/// failures are reported, and kept as regression tests by hand, rather
/// than persisted.
pub fn config(cases: u32) -> Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(cases);
    Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    }
}

/// Strings that stress parsers: unicode, control characters, escapes,
/// names, huge ones (ASCII and multi-byte); plus `extra` (e.g. a secret the
/// test must never see echoed).
pub fn nasty_string(extra: &[String]) -> BoxedStrategy<String> {
    let mut choices: Vec<(u32, BoxedStrategy<String>)> = vec![
        (6, ".{0,24}".boxed()),
        (2, "[a-z_/]{1,16}".boxed()),
        (1, Just(String::new()).boxed()),
        (
            1,
            Just("\u{0}\u{1f}\"\\\u{202e}\u{feff}😀".to_owned()).boxed(),
        ),
        (1, (1usize..200_000).prop_map(|n| "x".repeat(n)).boxed()),
        (1, (1usize..100_000).prop_map(|n| "é".repeat(n)).boxed()),
    ];
    choices.extend(extra.iter().map(|s| (1, Just(s.clone()).boxed())));
    proptest::strategy::Union::new_weighted(choices).boxed()
}

/// Arbitrary JSON: every type, numbers at the edges, strings from
/// `strings`, nesting `depth` deep, objects keyed by `keys`.
pub fn any_json(
    strings: BoxedStrategy<String>,
    keys: BoxedStrategy<String>,
    depth: u32,
) -> BoxedStrategy<Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("JSON numbers are finite", |f| f.is_finite())
            .prop_map(Value::from),
        strings.prop_map(Value::from),
    ];
    let width = (depth + 2) as usize;
    leaf.prop_recursive(depth, depth * 8 + 8, depth + 2, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..width).prop_map(Value::Array),
            prop::collection::btree_map(keys.clone(), inner, 0..width)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
    .boxed()
}

/// One canned upstream answer.
#[derive(Debug, Clone)]
pub struct Canned {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
}

/// Which queue a request path is answered from.
type Route = fn(&str) -> &'static str;

/// A fake upstream on a loopback port: each request is answered from the
/// queue its path routes to, the queue's last answer repeating; an empty
/// queue answers `fallback`.
#[derive(Clone)]
pub struct CannedUpstream {
    queues: Arc<Mutex<BTreeMap<&'static str, VecDeque<Canned>>>>,
    route: Route,
    fallback: Canned,
}

impl std::fmt::Debug for CannedUpstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CannedUpstream").finish_non_exhaustive()
    }
}

impl CannedUpstream {
    pub fn new(route: Route, fallback: Canned) -> Self {
        Self {
            queues: Arc::default(),
            route,
            fallback,
        }
    }

    /// Replaces `queue`'s answers.
    pub fn set(&self, queue: &'static str, answers: Vec<Canned>) {
        self.lock().insert(queue, answers.into());
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<&'static str, VecDeque<Canned>>> {
        self.queues.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The answer for a request to `path`.
    pub fn answer(&self, path: &str) -> Canned {
        let mut queues = self.lock();
        let queue = queues.entry((self.route)(path)).or_default();
        let next = if queue.len() > 1 {
            queue.pop_front()
        } else {
            queue.front().cloned()
        };
        next.unwrap_or_else(|| self.fallback.clone())
    }

    /// Serves on a free loopback port (on the current runtime); returns
    /// `http://127.0.0.1:<port>`.
    pub async fn serve(&self) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let served = self.clone();
        let app = axum::Router::new().fallback(move |uri: axum::http::Uri| {
            let canned = served.answer(uri.path());
            async move {
                let mut response =
                    axum::response::Response::new(axum::body::Body::from(canned.body));
                *response.status_mut() = axum::http::StatusCode::from_u16(canned.status)
                    .unwrap_or(axum::http::StatusCode::INTERNAL_SERVER_ERROR);
                for (name, value) in canned.headers {
                    if let Ok(value) = axum::http::HeaderValue::from_str(&value) {
                        response.headers_mut().insert(name, value);
                    }
                }
                response
            }
        });
        tokio::spawn(async move { axum::serve(listener, app).await });
        format!("http://{addr}")
    }
}
