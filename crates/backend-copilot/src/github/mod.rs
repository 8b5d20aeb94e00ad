//! A small GitHub client: GraphQL and the few REST calls the tools make, with
//! GitHub's errors kept typed and its rate limits honoured.
//!
//! ```text
//! GitHub::graphql / rest_get / rest_post
//!   ├─ RateGate: while a limit is in force, fail fast with RateLimited
//!   ├─ HTTP (bearer token, API version header, 30 s timeout)
//!   ├─ body read through a cap: ANSWER_CAP (16 MiB), ERROR_BODY_CAP (64 KiB)
//!   └─ response → GitHubError: 401, 403/429 + retry-after, x-ratelimit-*,
//!      GraphQL `errors[].type` (NOT_FOUND, FORBIDDEN, RATE_LIMITED, ...)
//! ```
//!
//! An answer over its cap is [`GitHubError::TooLarge`], not retried (the same
//! query would get the same answer); an error body over its cap is not read,
//! and the error is judged on its status and headers alone.
//!
//! The token is only ever put in the `Authorization` header; every message
//! that could echo it is scrubbed.

mod error;
pub mod model;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentgate_backend::{
    BodyError, ConnectFailure, FirstContact, UpstreamMetrics, UpstreamOutcome, read_bounded,
};
use reqwest::header::{HeaderMap, HeaderValue};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

pub use error::GitHubError;

use crate::settings::Endpoint;

/// The feature flags the assignment mutation needs (model selection is a
/// separate preview flag).
pub const ASSIGNMENT_FEATURES: &str =
    "issues_copilot_assignment_api_support, coding_agent_model_selection";

const USER_AGENT: &str = concat!("agentgate/", env!("CARGO_PKG_VERSION"));
const TIMEOUT: Duration = Duration::from_secs(30);
/// Backoff when GitHub says "slow down" without saying for how long.
const DEFAULT_BACKOFF: Duration = Duration::from_secs(60);
/// The longest GitHub may hold calls back: its limits reset within the hour,
/// and a larger `retry-after` / `x-ratelimit-reset` (a broken proxy, a
/// clock far off) would otherwise overflow `Instant` arithmetic and panic.
const MAX_BACKOFF: Duration = Duration::from_secs(3600);
/// The most of a successful answer read. The largest the tools ask for is
/// the watcher's batch of 25 issues and pull requests with their timelines,
/// well under 1 MiB; 16 MiB leaves room and still bounds a broken proxy.
pub const ANSWER_CAP: usize = 16 * 1024 * 1024;
/// The most of an error answer read: GitHub's are a `message` and a
/// documentation URL.
pub const ERROR_BODY_CAP: usize = 64 * 1024;

/// A GraphQL response: `data` and GitHub's `errors`, kept apart so a batched
/// query can use what resolved.
#[derive(Debug, Clone)]
pub struct GraphqlResponse {
    pub data: Value,
    pub errors: Vec<model::GraphqlError>,
}

impl GraphqlResponse {
    /// The whole response as one result: any error fails it.
    pub fn into_data<T: DeserializeOwned>(self) -> Result<T, GitHubError> {
        if let Some(first) = self.errors.into_iter().next() {
            return Err(GitHubError::from_graphql(first));
        }
        serde_json::from_value(self.data).map_err(|e| GitHubError::Decode(e.to_string()))
    }
}

/// What GitHub said about our rate limit on the last response.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RateLimit {
    pub remaining: Option<u64>,
    pub limit: Option<u64>,
}

/// A cheap-to-clone GitHub client for one endpoint and token.
#[derive(Debug, Clone)]
pub struct GitHub {
    http: reqwest::Client,
    endpoint: Endpoint,
    gate: Arc<RateGate>,
    /// Where requests are counted, if anywhere.
    upstream: Option<UpstreamMetrics>,
    /// Whether GitHub answered since start: until it has, a name that does
    /// not resolve or a refused connection is a setting to fix.
    contact: FirstContact,
}

/// Shared by every request of the instance: once GitHub says stop, nobody
/// calls it until the time it named.
#[derive(Debug, Default)]
struct RateGate {
    blocked_until: Mutex<Option<Instant>>,
    last: Mutex<RateLimit>,
}

impl RateGate {
    fn check(&self) -> Result<(), GitHubError> {
        let blocked = *self.blocked_until.lock().unwrap_or_else(|p| p.into_inner());
        match blocked {
            Some(until) if until > Instant::now() => Err(GitHubError::RateLimited {
                retry_after: until - Instant::now(),
                message: "waiting for GitHub's rate limit to reset".into(),
            }),
            _ => Ok(()),
        }
    }

    /// Holds calls back for `wait`, at most [`MAX_BACKOFF`]; returns the
    /// wait that applies.
    fn block_for(&self, wait: Duration) -> Duration {
        let wait = wait.min(MAX_BACKOFF);
        let until = Instant::now() + wait;
        let mut blocked = self.blocked_until.lock().unwrap_or_else(|p| p.into_inner());
        if blocked.is_none_or(|b| b < until) {
            *blocked = Some(until);
        }
        wait
    }
}

impl GitHub {
    pub fn new(endpoint: Endpoint) -> Self {
        let http = reqwest::Client::builder()
            .user_agent(USER_AGENT)
            .timeout(TIMEOUT)
            .connect_timeout(Duration::from_secs(10))
            .build()
            .unwrap_or_else(|_| reqwest::Client::new());
        Self {
            http,
            endpoint,
            gate: Arc::new(RateGate::default()),
            upstream: None,
            contact: FirstContact::default(),
        }
    }

    /// Counts every HTTP request into `upstream`, by operation
    /// (`graphql_query`, `graphql_mutation`, `rest_get`, `rest_post`).
    pub fn with_upstream_metrics(mut self, upstream: UpstreamMetrics) -> Self {
        self.upstream = Some(upstream);
        self
    }

    /// The same GitHub with another token (a principal's own): its own rate
    /// limit, since GitHub counts per token; the same HTTP pool and metrics.
    pub fn with_token(&self, token: crate::settings::Token) -> Self {
        let mut endpoint = self.endpoint.clone();
        endpoint.token = Some(token);
        Self {
            http: self.http.clone(),
            endpoint,
            gate: Arc::new(RateGate::default()),
            upstream: self.upstream.clone(),
            // The same host: its having answered counts for every token.
            contact: self.contact.clone(),
        }
    }

    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// How long calls are held back by a rate limit, if they are.
    pub fn backoff(&self) -> Option<Duration> {
        match self.gate.check() {
            Err(GitHubError::RateLimited { retry_after, .. }) => Some(retry_after),
            _ => None,
        }
    }

    pub fn last_rate_limit(&self) -> RateLimit {
        *self.gate.last.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn token(&self) -> Result<&str, GitHubError> {
        self.endpoint
            .token
            .as_ref()
            .map(|t| t.expose())
            .ok_or(GitHubError::NoToken)
    }

    fn headers(&self, features: Option<&str>) -> Result<HeaderMap, GitHubError> {
        let mut headers = HeaderMap::new();
        let auth = HeaderValue::from_str(&format!("bearer {}", self.token()?))
            .map_err(|_| GitHubError::BadToken)?;
        let mut auth = auth;
        auth.set_sensitive(true);
        headers.insert(reqwest::header::AUTHORIZATION, auth);
        headers.insert(
            reqwest::header::ACCEPT,
            HeaderValue::from_static("application/vnd.github+json"),
        );
        headers.insert(
            "x-github-api-version",
            HeaderValue::from_static("2022-11-28"),
        );
        if let Some(features) = features {
            headers.insert(
                "graphql-features",
                HeaderValue::from_str(features)
                    .map_err(|_| GitHubError::Decode("bad feature flag".into()))?,
            );
        }
        Ok(headers)
    }

    /// Runs a GraphQL document. HTTP-level failures are errors; GraphQL
    /// `errors` come back in the response for the caller to judge, except
    /// `RATE_LIMITED`, which blocks further calls until the reset.
    pub async fn graphql(
        &self,
        query: &str,
        variables: Value,
        features: Option<&str>,
    ) -> Result<GraphqlResponse, GitHubError> {
        self.gate.check()?;
        let body = serde_json::json!({ "query": query, "variables": variables });
        let request = self
            .http
            .post(self.endpoint.graphql.clone())
            .headers(self.headers(features)?)
            .json(&body);
        // Documents start with their operation type (`query(…)`, `mutation(…)`
        // or a bare selection, which is a query).
        let operation = if query.trim_start().starts_with("mutation") {
            "graphql_mutation"
        } else {
            "graphql_query"
        };
        let (status, headers, bytes) = self.send(operation, request).await?;
        if !status.is_success() {
            return Err(self.http_error(status, &headers, &bytes));
        }
        let raw: model::RawGraphql = serde_json::from_slice(&bytes)
            .map_err(|e| GitHubError::Decode(format!("GraphQL response is not JSON: {e}")))?;
        if let Some(limited) = raw
            .errors
            .iter()
            .find(|e| e.kind.as_deref() == Some("RATE_LIMITED"))
        {
            let wait = self
                .gate
                .block_for(reset_wait(&headers).unwrap_or(DEFAULT_BACKOFF));
            return Err(GitHubError::RateLimited {
                retry_after: wait,
                message: self.scrub(&limited.message),
            });
        }
        Ok(GraphqlResponse {
            data: raw.data.unwrap_or(Value::Null),
            errors: raw
                .errors
                .into_iter()
                .map(|mut e| {
                    e.message = self.scrub(&e.message);
                    e
                })
                .collect(),
        })
    }

    /// `GET` a REST path (relative to the API root) into `T`.
    pub async fn rest_get<T: DeserializeOwned>(
        &self,
        path: &str,
        query: &[(&str, String)],
        version: Option<&'static str>,
    ) -> Result<T, GitHubError> {
        self.gate.check()?;
        let url = self.rest_url(path)?;
        let mut headers = self.headers(None)?;
        if let Some(version) = version {
            headers.insert("x-github-api-version", HeaderValue::from_static(version));
        }
        let request = self.http.get(url).headers(headers).query(query);
        self.rest_response("rest_get", request).await
    }

    /// `POST` JSON to a REST path into `T`.
    pub async fn rest_post<B: Serialize + ?Sized, T: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
        version: Option<&'static str>,
    ) -> Result<T, GitHubError> {
        self.gate.check()?;
        let url = self.rest_url(path)?;
        let mut headers = self.headers(None)?;
        if let Some(version) = version {
            headers.insert("x-github-api-version", HeaderValue::from_static(version));
        }
        let request = self.http.post(url).headers(headers).json(body);
        self.rest_response("rest_post", request).await
    }

    async fn rest_response<T: DeserializeOwned>(
        &self,
        operation: &str,
        request: reqwest::RequestBuilder,
    ) -> Result<T, GitHubError> {
        let (status, headers, bytes) = self.send(operation, request).await?;
        if !status.is_success() {
            return Err(self.http_error(status, &headers, &bytes));
        }
        serde_json::from_slice(&bytes)
            .map_err(|e| GitHubError::Decode(format!("unexpected REST response: {e}")))
    }

    fn rest_url(&self, path: &str) -> Result<url::Url, GitHubError> {
        self.endpoint
            .rest
            .join(path.trim_start_matches('/'))
            .map_err(|e| GitHubError::Decode(format!("bad path {path}: {e}")))
    }

    async fn send(
        &self,
        operation: &str,
        request: reqwest::RequestBuilder,
    ) -> Result<(reqwest::StatusCode, HeaderMap, Vec<u8>), GitHubError> {
        let response = request.send().await;
        if let Some(upstream) = &self.upstream {
            let outcome = match &response {
                Ok(response) => UpstreamOutcome::from_status(response.status().as_u16()),
                Err(_) => UpstreamOutcome::Transport,
            };
            upstream.record(operation, outcome);
        }
        let response = response.map_err(|e| match ConnectFailure::of(&e) {
            Some(failure) if !self.contact.answered() => GitHubError::Unreachable {
                url: self.endpoint.rest.to_string(),
                failure,
            },
            _ => GitHubError::Network(self.scrub(&without_url(&e))),
        })?;
        self.contact.saw_answer();
        let status = response.status();
        let headers = response.headers().clone();
        self.note_rate_limit(&headers);
        let cap = if status.is_success() {
            ANSWER_CAP
        } else {
            ERROR_BODY_CAP
        };
        let bytes = match read_bounded(response, cap).await {
            Ok(bytes) => bytes,
            Err(BodyError::Cut(e)) => {
                return Err(GitHubError::Network(self.scrub(&without_url(&e))));
            }
            Err(BodyError::TooLarge(limit)) if status.is_success() => {
                return Err(GitHubError::TooLarge {
                    operation: operation.to_owned(),
                    limit,
                });
            }
            // An error is judged on its status and headers (rate limits
            // included); this stands in for the message it would carry.
            Err(BodyError::TooLarge(limit)) => format!("(an error body {limit})").into_bytes(),
        };
        Ok((status, headers, self.scrub_body(bytes)))
    }

    /// Removes the token from a response body before anything reads it, so
    /// no decode error or field that quotes the body can carry it on.
    fn scrub_body(&self, body: Vec<u8>) -> Vec<u8> {
        let Some(token) = self.endpoint.token.as_ref().map(|t| t.expose().as_bytes()) else {
            return body;
        };
        if token.is_empty() || !body.windows(token.len()).any(|w| w == token) {
            return body;
        }
        self.scrub(&String::from_utf8_lossy(&body)).into_bytes()
    }

    fn note_rate_limit(&self, headers: &HeaderMap) {
        let number = |name: &str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok())
        };
        let seen = RateLimit {
            remaining: number("x-ratelimit-remaining"),
            limit: number("x-ratelimit-limit"),
        };
        if seen.remaining.is_some() {
            *self.gate.last.lock().unwrap_or_else(|p| p.into_inner()) = seen;
        }
    }

    fn http_error(
        &self,
        status: reqwest::StatusCode,
        headers: &HeaderMap,
        body: &[u8],
    ) -> GitHubError {
        let message = serde_json::from_slice::<model::RestError>(body)
            .map(|e| self.scrub(&e.message))
            .unwrap_or_else(|_| {
                self.scrub(&String::from_utf8_lossy(body))
                    .chars()
                    .take(200)
                    .collect()
            });
        let retry_after = headers
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let exhausted = headers
            .get("x-ratelimit-remaining")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim() == "0");
        let limited = status.as_u16() == 429
            || (status.as_u16() == 403
                && (retry_after.is_some()
                    || exhausted
                    || message.to_lowercase().contains("rate limit")));
        if limited {
            let wait = self.gate.block_for(
                retry_after
                    .or_else(|| exhausted.then(|| reset_wait(headers)).flatten())
                    .unwrap_or(DEFAULT_BACKOFF),
            );
            return GitHubError::RateLimited {
                retry_after: wait,
                message,
            };
        }
        let scopes = headers
            .get("x-accepted-oauth-scopes")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        GitHubError::from_status(status.as_u16(), message, scopes)
    }

    /// Removes the token from text that came from elsewhere.
    fn scrub(&self, text: &str) -> String {
        match &self.endpoint.token {
            Some(token) if !token.expose().is_empty() => text.replace(token.expose(), "<redacted>"),
            _ => text.to_owned(),
        }
    }
}

/// How long until `x-ratelimit-reset` (epoch seconds), at least one second.
fn reset_wait(headers: &HeaderMap) -> Option<Duration> {
    let reset = headers
        .get("x-ratelimit-reset")?
        .to_str()
        .ok()?
        .trim()
        .parse::<i64>()
        .ok()?;
    let now = chrono::Utc::now().timestamp();
    Some(Duration::from_secs(
        u64::try_from(reset.saturating_sub(now)).unwrap_or(0).max(1),
    ))
}

/// A reqwest error's text without its URL (which is ours, but long).
fn without_url(error: &reqwest::Error) -> String {
    let kind = if error.is_timeout() {
        "timed out"
    } else if error.is_connect() {
        "could not connect"
    } else {
        "request failed"
    };
    let mut text = kind.to_owned();
    let mut source = std::error::Error::source(error);
    while let Some(inner) = source {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        source = inner.source();
    }
    text
}
