//! Agents that answer without end (issue 30, item 5): a JSON-RPC answer, an
//! error body, a stream event, a card and a token answer that never stop,
//! and a card whose `Content-Length` announces a gigabyte. Each call must
//! end within a time bound with an error naming the cap, having read about
//! the cap and no more: the server counts what it handed to the connection
//! and sees the connection dropped.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use agentgate_backend::{JobError, UpstreamMetrics};
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::Response;
use backend_a2a::A2aBackend;
use backend_a2a::auth::Auth;
use backend_a2a::client::{
    ANSWER_CAP, AgentClient, CARD_CAP, CallError, Clients, ERROR_BODY_CAP, EVENT_CAP,
};
use backend_a2a::guard::Guard;
use serde_json::json;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// The longest any call here may take: without the caps, the endless
/// stream has no timeout at all, and the rest run into the 10 s request
/// timeout with a different error.
const BOUND: Duration = Duration::from_secs(30);

/// What the flood server answers to every request.
#[derive(Debug, Clone)]
struct Flood {
    status: StatusCode,
    content_type: &'static str,
    /// Sent first; then `x` without end.
    prefix: &'static str,
    /// A `Content-Length` to announce (the body still never ends).
    announce: Option<u64>,
}

/// Set off when the body's stream is dropped: the server stopped sending
/// because the connection went away.
struct Closed(Arc<Notify>);

impl Drop for Closed {
    fn drop(&mut self) {
        self.0.notify_one();
    }
}

#[derive(Clone)]
struct Shared {
    flood: Flood,
    written: Arc<AtomicU64>,
    closed: Arc<Notify>,
}

async fn flood(State(shared): State<Shared>) -> Response {
    let closed = Closed(shared.closed.clone());
    let written = shared.written.clone();
    let filler = Bytes::from(vec![b'x'; 64 * 1024]);
    let first = Bytes::from_static(shared.flood.prefix.as_bytes());
    let body = futures::stream::unfold((Some(first), closed), move |(first, closed)| {
        let chunk = first.unwrap_or_else(|| filler.clone());
        written.fetch_add(chunk.len() as u64, Ordering::Relaxed);
        async move { Some((Ok::<_, std::convert::Infallible>(chunk), (None, closed))) }
    });
    let mut response = Response::builder()
        .status(shared.flood.status)
        .header(header::CONTENT_TYPE, shared.flood.content_type);
    if let Some(length) = shared.flood.announce {
        response = response.header(header::CONTENT_LENGTH, length);
    }
    response
        .body(Body::from_stream(body))
        .expect("a valid response")
}

/// A server answering every request with `flood`.
struct Server {
    url: String,
    written: Arc<AtomicU64>,
    closed: Arc<Notify>,
    shutdown: CancellationToken,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

impl Server {
    async fn start(flood: Flood) -> Self {
        let shared = Shared {
            flood,
            written: Arc::new(AtomicU64::new(0)),
            closed: Arc::new(Notify::new()),
        };
        let router = axum::Router::new()
            .fallback(self::flood)
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("its address"));
        let shutdown = CancellationToken::new();
        tokio::spawn(agentgate_sim::a2a::serve(
            listener,
            router,
            shutdown.clone(),
        ));
        Self {
            url,
            written: shared.written,
            closed: shared.closed,
            shutdown,
        }
    }

    /// Waits until the server stopped sending (the connection was
    /// dropped); then how much it handed over. `cap` is what the reader
    /// may hold: beyond it, only what the sockets buffer may have gone.
    async fn stopped_near(&self, cap: usize) -> u64 {
        tokio::time::timeout(BOUND, self.closed.notified())
            .await
            .expect("the reader dropped the connection");
        let written = self.written.load(Ordering::Relaxed);
        // Loopback socket buffers hold a few MiB at most; an unbounded
        // reader would have taken everything the server could send.
        let bound = cap as u64 + 16 * 1024 * 1024;
        assert!(
            written < bound,
            "the server wrote {written} bytes, more than {bound}"
        );
        written
    }
}

fn env(name: &str) -> Option<String> {
    (name == "LIMITS_SECRET").then(|| "limits-secret".to_owned())
}

/// A client of the one agent in `agent` (an `[[a2a.agents]]` table), with
/// the backend's own settings, guard and credentials, but plain HTTP clients
/// (nothing here resolves names).
fn client(agent: serde_json::Value) -> AgentClient {
    let config = A2aBackend::parse(Some(json!({"agents": [agent]}))).expect("the config parses");
    let settings = config.resolve(&env).expect("the config resolves");
    let agent = &settings.agents[0];
    let guard = Guard::new(agent);
    let build = |timeout: Option<Duration>| {
        let builder = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none());
        match timeout {
            Some(t) => builder.timeout(t),
            None => builder,
        }
        .build()
        .expect("a client")
    };
    let http = build(Some(Duration::from_secs(10)));
    let auth = Auth::new(&agent.credentials, &agent.at, http.clone(), guard.clone());
    AgentClient::new(
        Clients {
            http: http.clone(),
            cards: http,
            // As in production: no overall timeout on a stream.
            streams: build(None),
        },
        auth,
        guard,
        UpstreamMetrics::detached("a2a"),
    )
}

async fn bounded<T>(call: impl Future<Output = T>) -> T {
    tokio::time::timeout(BOUND, call)
        .await
        .expect("the call ended within the bound")
}

#[tokio::test]
async fn an_endless_answer_fails_at_its_cap_without_a_retry() {
    let server = Server::start(Flood {
        status: StatusCode::OK,
        content_type: "application/json",
        prefix: r#"{"jsonrpc":"2.0","id":1,"result":{"id":""#,
        announce: None,
    })
    .await;
    let client = client(json!({"name": "h", "url": server.url}));
    let error = bounded(client.get_task(&format!("{}/", server.url), "t1"))
        .await
        .expect_err("an endless answer");
    assert!(
        matches!(error, CallError::TooLarge { .. }),
        "not the cap: {error:?}"
    );
    assert!(
        error
            .to_string()
            .starts_with("the answer is over the 8 MiB cap"),
        "{error}"
    );
    let written = server.stopped_near(ANSWER_CAP).await;
    assert!(
        written > ANSWER_CAP as u64,
        "the cap was reached: {written}"
    );
    match error.into_job_error("h", "GetTask") {
        JobError::Fatal(e) => assert!(
            e.message
                .contains("A2A agent `h`: GetTask failed: the answer is over"),
            "{}",
            e.message
        ),
        other => panic!("an oversized answer is retried: {other:?}"),
    }
}

#[tokio::test]
async fn an_endless_error_body_is_read_up_to_its_cap_only() {
    let server = Server::start(Flood {
        status: StatusCode::INTERNAL_SERVER_ERROR,
        content_type: "application/json",
        prefix: r#"{"error":{"message":""#,
        announce: None,
    })
    .await;
    let client = client(json!({"name": "h", "url": server.url}));
    let error = bounded(client.get_task(&format!("{}/", server.url), "t1"))
        .await
        .expect_err("an HTTP 500");
    assert_eq!(
        error,
        CallError::Http {
            status: 500,
            retry_after: None,
            detail: None
        }
    );
    server.stopped_near(ERROR_BODY_CAP).await;
}

#[tokio::test]
async fn an_endless_stream_event_ends_the_stream_at_its_cap() {
    let server = Server::start(Flood {
        status: StatusCode::OK,
        content_type: "text/event-stream",
        prefix: "data: ",
        announce: None,
    })
    .await;
    let client = client(json!({"name": "h", "url": server.url}));
    let mut stream = bounded(client.subscribe(&format!("{}/", server.url), "t1"))
        .await
        .expect("a stream");
    let error = bounded(stream.next()).await.expect_err("an endless event");
    assert!(
        error
            .to_string()
            .starts_with("one stream event is over the 8 MiB cap"),
        "{error}"
    );
    drop(stream);
    server.stopped_near(EVENT_CAP).await;
}

#[tokio::test]
async fn an_endless_card_and_a_card_announcing_a_gigabyte_are_refused() {
    let server = Server::start(Flood {
        status: StatusCode::OK,
        content_type: "application/json",
        prefix: r#"{"name":"huge","description":""#,
        announce: None,
    })
    .await;
    let client = client(json!({"name": "h", "url": server.url}));
    let url: url::Url = format!("{}/.well-known/agent-card.json", server.url)
        .parse()
        .expect("a URL");
    let error = bounded(client.card(&url))
        .await
        .expect_err("an endless card");
    assert!(
        error.contains(&format!("the card at {url} is over the 256 KiB cap")),
        "{error}"
    );
    server.stopped_near(CARD_CAP).await;

    let server = Server::start(Flood {
        status: StatusCode::OK,
        content_type: "application/json",
        prefix: "{",
        announce: Some(1 << 30),
    })
    .await;
    let url: url::Url = format!("{}/.well-known/agent-card.json", server.url)
        .parse()
        .expect("a URL");
    let error = bounded(client.card(&url)).await.expect_err("a huge card");
    assert!(
        error.contains("over the 256 KiB cap (its Content-Length says 1024 MiB; not read)"),
        "{error}"
    );
    // Refused on the header: nothing of the body was taken, so only what
    // the sockets buffer left the server.
    server.stopped_near(0).await;
}

#[tokio::test]
async fn an_endless_token_answer_fails_without_a_retry() {
    let server = Server::start(Flood {
        status: StatusCode::OK,
        content_type: "application/json",
        prefix: r#"{"access_token":""#,
        announce: None,
    })
    .await;
    let client = client(json!({"name": "h", "url": server.url, "oauth": {
        "client_id": "agentgate", "client_secret_env": "LIMITS_SECRET",
        "token_url": format!("{}/token", server.url)}}));
    let error = bounded(client.get_task(&format!("{}/", server.url), "t1"))
        .await
        .expect_err("an endless token answer");
    let message = error.to_string();
    assert!(
        message.contains("the OAuth token endpoint")
            && message.contains("an answer over the 64 KiB cap"),
        "{message}"
    );
    assert!(
        matches!(error.into_job_error("h", "GetTask"), JobError::Fatal(_)),
        "an oversized token answer is not retried"
    );
    server.stopped_near(64 * 1024).await;
}
