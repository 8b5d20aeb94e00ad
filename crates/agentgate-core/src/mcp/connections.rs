//! The HTTP accept loop, with bounds on what clients can hold.
//!
//! ```text
//! accept ──▶ permit (at most max_connections) ──▶ TCP_NODELAY
//!        ──▶ hyper (HTTP/1 header read timeout, HTTP/2) ──▶ the axum router
//!        ──▶ idle watchdog: no byte either way for idle_timeout → closed
//! ```
//!
//! A socket that never sends a request, or sends its headers a byte at a
//! time, costs a file descriptor and a task until one of the timeouts closes
//! it; without them a few thousand such sockets exhaust the process's file
//! limit and nobody is served. At the connection cap the loop stops
//! accepting (the kernel's backlog holds new clients) until a slot frees, so
//! the process never runs out of descriptors for its database and files.
//! Streaming responses (`subscriptions/listen`, SSE) are not idle: rmcp
//! sends a keep-alive on them every 15 s, well inside the default idle
//! timeout.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt as _;

/// Bounds on the connections one process serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Connections served at once; more wait in the kernel's backlog.
    pub max_connections: usize,
    /// Time an HTTP/1 client has to send a request's headers, counted from
    /// the connection's start or the end of its previous response.
    pub header_read_timeout: Duration,
    /// A connection that moves no byte either way for this long is closed.
    pub idle_timeout: Duration,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        Self {
            // Below the common 1 024 file limit, with room for the store's
            // connections, the database files and logs.
            max_connections: 768,
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
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
        // See `serve_http`: small Streamable HTTP writes must not wait for
        // the client's delayed ACK.
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "could not set TCP_NODELAY on a connection");
        }
        connections.spawn(serve_connection(
            tcp,
            peer,
            router.clone(),
            limits,
            shutdown.clone(),
            permit,
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
) {
    let activity = Activity::new();
    let io = TokioIo::new(Watched {
        inner: tcp,
        activity: activity.clone(),
    });
    let requests = activity.clone();
    let service = hyper_util::service::TowerToHyperService::new(tower::service_fn(
        move |request: http::Request<hyper::body::Incoming>| {
            let (router, activity) = (router.clone(), requests.clone());
            async move {
                let _busy = activity.busy();
                let mut request = request.map(axum::body::Body::new);
                request
                    .extensions_mut()
                    .insert(axum::extract::ConnectInfo(peer));
                router.oneshot(request).await
            }
        },
    ));
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    builder.http2().timer(TokioTimer::new());
    let conn = builder.serve_connection_with_upgrades(io, service);
    tokio::pin!(conn);
    let mut draining = false;
    loop {
        let idle_for = activity.idle_for();
        let check = limits.idle_timeout.saturating_sub(idle_for);
        tokio::select! {
            result = conn.as_mut() => {
                if let Err(e) = result {
                    tracing::debug!(%peer, error = %e, "connection ended with an error");
                }
                return;
            }
            () = tokio::time::sleep(check) => {
                if activity.idle_for() >= limits.idle_timeout && !activity.is_busy() {
                    tracing::debug!(%peer, "closing an idle connection");
                    return;
                }
            }
            () = shutdown.cancelled(), if !draining => {
                draining = true;
                conn.as_mut().graceful_shutdown();
            }
        }
    }
}

/// When a connection last moved a byte, and how many of its requests are
/// being handled (a long inline `tools/call` is quiet, not idle).
#[derive(Debug, Clone)]
struct Activity {
    start: Instant,
    last_ms: Arc<AtomicU64>,
    busy: Arc<AtomicU64>,
}

/// One request being handled; counts as activity until dropped.
struct Busy(Activity);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.busy.fetch_sub(1, Ordering::Relaxed);
        self.0.touch();
    }
}

impl Activity {
    fn new() -> Self {
        Self {
            start: Instant::now(),
            last_ms: Arc::new(AtomicU64::new(0)),
            busy: Arc::new(AtomicU64::new(0)),
        }
    }

    fn busy(&self) -> Busy {
        self.busy.fetch_add(1, Ordering::Relaxed);
        Busy(self.clone())
    }

    fn is_busy(&self) -> bool {
        self.busy.load(Ordering::Relaxed) > 0
    }

    fn touch(&self) {
        let ms = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_ms.store(ms, Ordering::Relaxed);
    }

    fn idle_for(&self) -> Duration {
        let last = Duration::from_millis(self.last_ms.load(Ordering::Relaxed));
        self.start.elapsed().saturating_sub(last)
    }
}

/// A socket that records its activity.
struct Watched {
    inner: tokio::net::TcpStream,
    activity: Activity,
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.activity.touch();
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
