//! The HTTP accept loop, with bounds on what clients can hold.
//!
//! ```text
//! accept ──▶ permit (at most max_connections) ──▶ the peer's share
//!        ──▶ TCP_NODELAY ──▶ hyper (HTTP/1, HTTP/2) ──▶ the axum router
//!        ──▶ watchdog: no request head within header_read_timeout of the
//!            accept → closed; no request in flight for idle_timeout →
//!            closed (gracefully: HTTP/2 gets a GOAWAY)
//! ```
//!
//! A socket that never sends a request, or sends its headers a byte at a
//! time, costs a file descriptor and a task until one of the timeouts closes
//! it; without them a few thousand such sockets exhaust the process's file
//! limit and nobody is served. At the connection cap the loop stops
//! accepting (the kernel's backlog holds new clients) until a slot frees, so
//! the process never runs out of descriptors for its database and files.
//!
//! Fairness: one client address may hold only its share of the cap
//! (`max_connections_per_peer`, a quarter by default; trusted proxies are
//! exempt, as everyone behind them shares their address), so one host
//! cannot take every slot and starve the health checks. Activity is
//! requests, not bytes: an HTTP/2 client that opens no stream and only
//! sends PINGs is closed at the header timeout like a silent socket, and a
//! connection whose requests are done is idle however many PINGs it sends.
//! A request is in flight from its head to the end of its response body,
//! so a long inline `tools/call` or an event stream (`subscriptions/listen`,
//! SSE) is never idle; every request body must arrive within
//! `body_read_timeout`, so a trickled body cannot hold one in flight.

use std::collections::HashMap;
use std::future::Future as _;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::body::{Body as HttpBody, Frame, SizeHint};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt as _;

use crate::auth::client::{ClientAddr, TrustedProxies};

/// Bounds on the connections one process serves.
#[derive(Debug, Clone)]
pub struct ConnectionLimits {
    /// Connections served at once; more wait in the kernel's backlog.
    pub max_connections: usize,
    /// Connections one client address (an IPv6 /64) may hold at once;
    /// `None`: a quarter of `max_connections`, at least 1. Trusted proxies
    /// have no share of their own. A connection past it is closed at once.
    pub max_connections_per_peer: Option<usize>,
    /// Time a new connection has, from its accept, to send a complete
    /// request head (HTTP/1) or open a stream (HTTP/2); on HTTP/1 also the
    /// time the head of each later request may take from its first byte.
    pub header_read_timeout: Duration,
    /// A connection with no request in flight for this long is closed.
    pub idle_timeout: Duration,
    /// Time a request's body has to arrive, from its head; past it reading
    /// the body fails (`/mcp` answers 408, a webhook 408).
    pub body_read_timeout: Duration,
    /// Peers whose `X-Forwarded-For` / `Forwarded` name the client
    /// ([`crate::auth::client`]); the client's address goes into each
    /// request as a [`ClientAddr`].
    pub trusted_proxies: TrustedProxies,
}

impl ConnectionLimits {
    /// The connections one client address may hold.
    pub fn per_peer(&self) -> usize {
        self.max_connections_per_peer
            .unwrap_or(self.max_connections / 4)
            .clamp(1, self.max_connections.max(1))
    }
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        Self {
            // Below the common 1 024 file limit, with room for the store's
            // connections, the database files and logs.
            max_connections: 768,
            max_connections_per_peer: None,
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            body_read_timeout: Duration::from_secs(30),
            trusted_proxies: TrustedProxies::default(),
        }
    }
}

/// How long shutdown waits for open connections to finish their requests.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// Serves `router` on `listener` within `limits` until `shutdown` fires,
/// then lets open connections finish (up to a grace period).
pub async fn serve_http_with(
    listener: tokio::net::TcpListener,
    router: axum::Router,
    limits: ConnectionLimits,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let permits = Arc::new(tokio::sync::Semaphore::new(limits.max_connections.max(1)));
    let peers = Arc::new(Peers::default());
    let share = limits.per_peer();
    let connections = tokio_util::task::TaskTracker::new();
    let mut accept_failing = false;
    let mut at_cap_said = false;
    loop {
        let permit = match permits.clone().try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => {
                if !at_cap_said {
                    tracing::warn!(
                        max_connections = limits.max_connections,
                        "at the connection limit (server.max_connections); new connections \
                         wait until one closes"
                    );
                    at_cap_said = true;
                }
                tokio::select! {
                    permit = permits.clone().acquire_owned() => match permit {
                        Ok(permit) => permit,
                        Err(_) => break,
                    },
                    () = shutdown.cancelled() => break,
                }
            }
        };
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = shutdown.cancelled() => break,
        };
        let (tcp, peer) = match accepted {
            Ok(accepted) => {
                if accept_failing {
                    tracing::info!("accepting connections again");
                    accept_failing = false;
                }
                accepted
            }
            Err(e) => {
                // EMFILE and friends: say it once, then pause instead of
                // spinning on a listener that cannot hand out sockets.
                if !accept_failing {
                    tracing::error!(error = %e, "accepting a connection failed; retrying");
                    accept_failing = true;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        if permits.available_permits() > limits.max_connections / 10 {
            at_cap_said = false;
        }
        // Everyone behind a trusted proxy arrives from its address: its
        // connections are everyone's, not one client's share.
        let slot = if limits.trusted_proxies.contains(peer.ip()) {
            None
        } else {
            match peers.take(peer.ip(), share) {
                Some(slot) => Some(slot),
                None => {
                    if peers.should_warn() {
                        tracing::warn!(
                            peer = %peer.ip(),
                            max_connections_per_peer = share,
                            "closed a connection: its address holds its share of the \
                             connections (server.max_connections_per_peer); logged once a minute"
                        );
                    }
                    // Dropped: the socket closes and its permit is free.
                    continue;
                }
            }
        };
        // See `serve_http`: small Streamable HTTP writes must not wait for
        // the client's delayed ACK.
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "could not set TCP_NODELAY on a connection");
        }
        connections.spawn(serve_connection(
            tcp,
            peer,
            router.clone(),
            limits.clone(),
            shutdown.clone(),
            permit,
            slot,
        ));
    }
    connections.close();
    if tokio::time::timeout(SHUTDOWN_GRACE, connections.wait())
        .await
        .is_err()
    {
        tracing::warn!("connections still open after the shutdown grace period; closing them");
    }
    Ok(())
}

async fn serve_connection(
    tcp: tokio::net::TcpStream,
    peer: SocketAddr,
    router: axum::Router,
    limits: ConnectionLimits,
    shutdown: CancellationToken,
    _permit: tokio::sync::OwnedSemaphorePermit,
    _share: Option<PeerSlot>,
) {
    let accepted = Instant::now();
    let activity = Activity::new(accepted);
    let requests = activity.clone();
    let proxies = limits.trusted_proxies.clone();
    let body_read_timeout = limits.body_read_timeout;
    let service = hyper_util::service::TowerToHyperService::new(tower::service_fn(
        move |request: http::Request<hyper::body::Incoming>| {
            let router = router.clone();
            let client = proxies.client_addr(peer.ip(), request.headers());
            // In flight from its head until its response body is done or
            // dropped: a long inline `tools/call` or an event stream is
            // quiet, not idle.
            let busy = requests.busy();
            async move {
                let mut request = request
                    .map(|body| axum::body::Body::new(Deadline::new(body, body_read_timeout)));
                request
                    .extensions_mut()
                    .insert(axum::extract::ConnectInfo(peer));
                request.extensions_mut().insert(ClientAddr(client));
                let response = router.oneshot(request).await?;
                Ok::<_, std::convert::Infallible>(
                    response.map(|body| axum::body::Body::new(InFlight { body, _busy: busy })),
                )
            }
        },
    ));
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    builder.http2().timer(TokioTimer::new());
    let conn = builder.serve_connection_with_upgrades(TokioIo::new(tcp), service);
    tokio::pin!(conn);
    let mut draining = false;
    // Set once the connection was asked to close: it gets until then, or
    // longer while a request that raced the close is still in flight.
    let mut closing: Option<Instant> = None;
    loop {
        let deadline = match closing {
            Some(_) if activity.in_flight() => None,
            Some(at) => Some(at),
            None => activity.deadline(&limits),
        };
        tokio::select! {
            result = conn.as_mut() => {
                if let Err(e) = result {
                    tracing::debug!(%peer, error = %e, "connection ended with an error");
                }
                return;
            }
            () = sleep_until(deadline) => {
                if closing.is_some() {
                    if activity.in_flight() {
                        continue;
                    }
                    tracing::debug!(%peer, "an idle connection did not close in time; dropped");
                    return;
                }
                match activity.due(&limits) {
                    Due::Not => {}
                    // Nothing was ever asked: nothing to finish politely.
                    Due::NoRequestHead => {
                        tracing::debug!(
                            %peer,
                            "closing a connection that sent no request head in time"
                        );
                        return;
                    }
                    Due::Idle => {
                        tracing::debug!(%peer, "closing an idle connection");
                        conn.as_mut().graceful_shutdown();
                        closing = Some(Instant::now() + CLOSE_GRACE);
                    }
                }
            }
            () = activity.changed() => {}
            () = shutdown.cancelled(), if !draining => {
                draining = true;
                conn.as_mut().graceful_shutdown();
            }
        }
    }
}

/// How long a connection asked to close when idle (an HTTP/2 GOAWAY) may
/// take before it is dropped.
const CLOSE_GRACE: Duration = Duration::from_secs(2);

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// The client addresses holding connections, for the per-peer share.
#[derive(Debug, Default)]
struct Peers {
    held: Mutex<HashMap<IpAddr, usize>>,
    warned_at: Mutex<Option<Instant>>,
}

/// One connection of a peer's share; given back when dropped.
#[derive(Debug)]
struct PeerSlot {
    peers: Arc<Peers>,
    key: IpAddr,
}

impl Peers {
    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<IpAddr, usize>> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A slot of `ip`'s share, `None` when it holds `share` already.
    fn take(self: &Arc<Self>, ip: IpAddr, share: usize) -> Option<PeerSlot> {
        let key = share_key(ip);
        let mut held = self.held();
        let count = held.entry(key).or_insert(0);
        if *count >= share {
            return None;
        }
        *count += 1;
        Some(PeerSlot {
            peers: Arc::clone(self),
            key,
        })
    }

    /// Whether to log a refused connection: at most once a minute, so a
    /// flood does not flood the log too.
    fn should_warn(&self) -> bool {
        let mut at = self.warned_at.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        if at.is_some_and(|at| now.duration_since(at) < Duration::from_secs(60)) {
            return false;
        }
        *at = Some(now);
        true
    }
}

impl Drop for PeerSlot {
    fn drop(&mut self) {
        let mut held = self.peers.held();
        if let Some(count) = held.get_mut(&self.key) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                held.remove(&self.key);
            }
        }
    }
}

/// What a peer's share is counted under: its address, or for IPv6 its
/// /64, which one host usually has whole (one address each would let it
/// take every slot).
fn share_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(Ipv6Addr::from(u128::from(v6) & !(u128::MAX >> 64))),
        },
        v4 @ IpAddr::V4(_) => v4,
    }
}

/// A connection's requests: how many are in flight, whether one ever
/// arrived, and when the last one ended. Bytes do not count: an HTTP/2
/// PING or SETTINGS keeps a socket busy without asking anything.
#[derive(Debug, Clone)]
struct Activity(Arc<ActivityState>);

#[derive(Debug)]
struct ActivityState {
    accepted: Instant,
    counts: Mutex<Counts>,
    changed: tokio::sync::Notify,
}

#[derive(Debug, Clone, Copy)]
struct Counts {
    in_flight: usize,
    started: u64,
    last_end: Instant,
}

/// What the watchdog should do now.
enum Due {
    Not,
    /// No request head arrived within the header timeout of the accept.
    NoRequestHead,
    /// No request in flight for the idle timeout.
    Idle,
}

/// One request in flight; ends when dropped.
#[derive(Debug)]
struct Busy(Activity);

impl Drop for Busy {
    fn drop(&mut self) {
        let mut counts = self.0.counts();
        counts.in_flight = counts.in_flight.saturating_sub(1);
        counts.last_end = Instant::now();
        drop(counts);
        self.0.0.changed.notify_one();
    }
}

impl Activity {
    fn new(accepted: Instant) -> Self {
        Self(Arc::new(ActivityState {
            accepted,
            counts: Mutex::new(Counts {
                in_flight: 0,
                started: 0,
                last_end: accepted,
            }),
            changed: tokio::sync::Notify::new(),
        }))
    }

    fn counts(&self) -> std::sync::MutexGuard<'_, Counts> {
        self.0.counts.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn busy(&self) -> Busy {
        let mut counts = self.counts();
        counts.in_flight += 1;
        counts.started += 1;
        drop(counts);
        self.0.changed.notify_one();
        Busy(self.clone())
    }

    fn in_flight(&self) -> bool {
        self.counts().in_flight > 0
    }

    /// Resolves when a request starts or ends.
    async fn changed(&self) {
        self.0.changed.notified().await;
    }

    /// When the connection is next due to be closed, `None` while a
    /// request is in flight.
    fn deadline(&self, limits: &ConnectionLimits) -> Option<Instant> {
        let counts = *self.counts();
        if counts.in_flight > 0 {
            None
        } else if counts.started == 0 {
            Some(self.0.accepted + limits.header_read_timeout)
        } else {
            Some(counts.last_end + limits.idle_timeout)
        }
    }

    fn due(&self, limits: &ConnectionLimits) -> Due {
        let counts = *self.counts();
        match self.deadline(limits) {
            Some(at) if Instant::now() >= at => {
                if counts.started == 0 {
                    Due::NoRequestHead
                } else {
                    Due::Idle
                }
            }
            _ => Due::Not,
        }
    }
}

/// A response body that keeps its request in flight until it is done.
struct InFlight {
    body: axum::body::Body,
    _busy: Busy,
}

impl HttpBody for InFlight {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// The request body did not arrive within `server.body_read_timeout_seconds`.
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive within {} s", .0.as_secs())]
pub(crate) struct BodyTimedOut(pub(crate) Duration);

/// A request body that must arrive whole within a time from its head: a
/// client trickling one would otherwise hold its request in flight, and
/// its connection open, for ever.
struct Deadline {
    body: hyper::body::Incoming,
    timeout: Duration,
    sleep: Pin<Box<tokio::time::Sleep>>,
}

impl Deadline {
    fn new(body: hyper::body::Incoming, timeout: Duration) -> Self {
        Self {
            body,
            timeout,
            sleep: Box::pin(tokio::time::sleep(timeout)),
        }
    }
}

impl HttpBody for Deadline {
    type Data = axum::body::Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        if let Poll::Ready(frame) = Pin::new(&mut self.body).poll_frame(cx) {
            return Poll::Ready(frame.map(|frame| frame.map_err(Into::into)));
        }
        if self.sleep.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Some(Err(BodyTimedOut(self.timeout).into())));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
