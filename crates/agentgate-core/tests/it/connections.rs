//! The HTTP accept loop under a connection flood: idle sockets and
//! slow-header (slowloris) sockets are closed by the server, the connection
//! cap holds, and normal clients are still served. One address gets only
//! its share of the cap, and HTTP/2 PINGs are not activity: a socket that
//! asks nothing is closed at the header timeout, one whose requests are
//! done at the idle timeout, whatever it keeps sending. Floods come from
//! 127.0.0.2 (a loopback alias on Linux), real clients from 127.0.0.1.

use std::time::Duration;

use agentgate_core::mcp::{ConnectionLimits, serve_http_with};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

fn limits() -> ConnectionLimits {
    ConnectionLimits {
        max_connections: 32,
        // This flood and the normal clients share 127.0.0.1: the whole
        // cap is one address's share here, so the backlog is what is tested.
        max_connections_per_peer: Some(32),
        header_read_timeout: Duration::from_secs(1),
        idle_timeout: Duration::from_secs(2),
        ..ConnectionLimits::default()
    }
}

/// Serves a `/healthz`, a quiet `/slow` (answers after 3 s, longer than
/// the idle timeout) and an `/echo` of its body within `limits()`.
async fn server() -> (String, CancellationToken) {
    server_with(limits()).await
}

async fn server_with(limits: ConnectionLimits) -> (String, CancellationToken) {
    let router = axum::Router::new()
        .route("/healthz", axum::routing::get(|| async { "ok" }))
        .route(
            "/slow",
            axum::routing::get(|| async {
                // A long request that writes nothing meanwhile (an inline
                // tools/call, say): quiet, not idle.
                tokio::time::sleep(Duration::from_secs(3)).await;
                "done"
            }),
        )
        // Reads its whole body, as every JSON route does.
        .route(
            "/echo",
            axum::routing::post(|body: axum::body::Bytes| async move { body }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    let shutdown = CancellationToken::new();
    tokio::spawn(serve_http_with(listener, router, limits, shutdown.clone()));
    (addr, shutdown)
}

/// Waits (bounded) for the server to close `socket`.
async fn closed_by_server(mut socket: TcpStream) -> bool {
    let mut buf = [0u8; 512];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        match tokio::time::timeout_at(deadline, socket.read(&mut buf)).await {
            Err(_) => return false,
            Ok(Ok(0) | Err(_)) => return true,
            // A 408 from hyper's header timeout, then the close.
            Ok(Ok(_)) => {}
        }
    }
}

#[tokio::test]
async fn a_connection_flood_does_not_stop_normal_clients_and_idle_sockets_are_closed() {
    let (addr, shutdown) = server().await;

    // 200 sockets that never send a byte, 50 that send headers a byte at a
    // time: far more than the cap of 32.
    let mut idle = Vec::new();
    for _ in 0..200 {
        idle.push(TcpStream::connect(&addr).await.expect("connect"));
    }
    let mut slow = Vec::new();
    for _ in 0..50 {
        let addr = addr.clone();
        slow.push(tokio::spawn(async move {
            let mut socket = TcpStream::connect(&addr).await.expect("connect");
            let _ = socket
                .write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n")
                .await;
            // A byte every 200 ms, forever: only a header timeout ends it.
            let mut interval = tokio::time::interval(Duration::from_millis(200));
            loop {
                interval.tick().await;
                if socket.write_all(b"X").await.is_err() {
                    return true;
                }
                let mut probe = [0u8; 64];
                if let Ok(Ok(0) | Err(_)) =
                    tokio::time::timeout(Duration::from_millis(1), socket.read(&mut probe)).await
                {
                    return true;
                }
            }
        }));
    }

    // Normal clients, each on a new connection, behind the flood in the
    // backlog: every one is answered.
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .timeout(Duration::from_secs(60))
        .build()
        .expect("client");
    let mut answered = 0;
    for _ in 0..20 {
        let response = client
            .get(format!("http://{addr}/healthz"))
            .send()
            .await
            .expect("a normal client is served during the flood");
        assert!(response.status().is_success());
        assert_eq!(response.text().await.expect("body"), "ok");
        answered += 1;
    }
    assert_eq!(answered, 20);

    // Every idle and slow socket was closed by the server.
    let mut still_open = 0;
    for socket in idle {
        if !closed_by_server(socket).await {
            still_open += 1;
        }
    }
    assert_eq!(still_open, 0, "idle sockets the server never closed");
    for slow in slow {
        let closed = tokio::time::timeout(Duration::from_secs(60), slow)
            .await
            .expect("a slow-header socket was never closed")
            .expect("slow task");
        assert!(closed);
    }
    shutdown.cancel();
}

#[tokio::test]
async fn a_quiet_long_request_is_not_cut_off_as_idle() {
    let (addr, shutdown) = server().await;
    let response = reqwest::get(format!("http://{addr}/slow"))
        .await
        .expect("the slow request is answered");
    assert_eq!(response.text().await.expect("body"), "done");
    // And a keep-alive connection is reused for a second request.
    let client = reqwest::Client::new();
    for _ in 0..2 {
        let text = client
            .get(format!("http://{addr}/healthz"))
            .send()
            .await
            .expect("served")
            .text()
            .await
            .expect("body");
        assert_eq!(text, "ok");
    }
    shutdown.cancel();
}

/// The HTTP/2 client preface and an empty SETTINGS frame.
fn h2_preface() -> Vec<u8> {
    let mut bytes = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    bytes.extend(h2_frame(0x4, 0, 0, &[]));
    bytes
}

/// One HTTP/2 frame: 24-bit length, type, flags, stream id, payload.
fn h2_frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = u32::try_from(payload.len())
        .expect("small frame")
        .to_be_bytes();
    let mut frame = vec![len[1], len[2], len[3], kind, flags];
    frame.extend(stream.to_be_bytes());
    frame.extend(payload);
    frame
}

/// `GET /healthz` on stream 1 (END_STREAM | END_HEADERS), HPACK-encoded
/// by hand: static-table `:method GET` and `:scheme http`, literal `:path`
/// and `:authority` with indexed names.
fn h2_get_healthz() -> Vec<u8> {
    let mut block = vec![0x82, 0x86, 0x04, 8];
    block.extend(b"/healthz");
    block.extend([0x01, 9]);
    block.extend(b"localhost");
    h2_frame(0x1, 0x5, 1, &block)
}

/// A TCP connection to `addr` from the loopback alias `source`.
async fn connect_from(source: &str, addr: &str) -> TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket
        .bind(format!("{source}:0").parse().expect("source address"))
        .expect("bind the source address");
    socket
        .connect(addr.parse().expect("server address"))
        .await
        .expect("connect")
}

/// Writes `first`, then an HTTP/2 PING every 500 ms, reading whatever the
/// server sends, until the server closes the connection; returns how long
/// that took. Fails the test if it is still open after `bound`.
async fn ping_until_closed(socket: TcpStream, first: Vec<u8>, bound: Duration) -> Duration {
    let started = tokio::time::Instant::now();
    let (mut read, mut write) = socket.into_split();
    let _ = write.write_all(&first).await;
    let mut interval = tokio::time::interval(Duration::from_millis(500));
    let mut buf = [0u8; 4096];
    let watch = async {
        loop {
            tokio::select! {
                n = read.read(&mut buf) => if let Ok(0) | Err(_) = n {
                    return started.elapsed();
                },
                _ = interval.tick() => {
                    // Write errors are the close showing on this side; the
                    // read above sees it too.
                    let _ = write.write_all(&h2_frame(0x6, 0, 0, &[0; 8])).await;
                }
            }
        }
    };
    tokio::time::timeout(bound, watch)
        .await
        .expect("the server never closed a connection that only PINGs")
}

/// Issue 30: 60 HTTP/2 connections from one address that send the preface
/// and then only PINGs, against a cap of 40, must not starve health checks
/// from elsewhere. The address gets its share (10); the rest are closed at
/// once, and the share is closed at the header timeout (no stream was
/// opened), PINGs notwithstanding.
#[tokio::test]
async fn pinging_http2_sockets_from_one_address_do_not_starve_other_clients() {
    let header_read_timeout = Duration::from_secs(2);
    let (addr, shutdown) = server_with(ConnectionLimits {
        max_connections: 40,
        header_read_timeout,
        idle_timeout: Duration::from_secs(5),
        ..ConnectionLimits::default()
    })
    .await;
    let mut flood = Vec::new();
    for _ in 0..60 {
        flood.push(connect_from("127.0.0.2", &addr).await);
    }
    let flood: Vec<_> = flood
        .into_iter()
        .map(|socket| {
            tokio::spawn(ping_until_closed(
                socket,
                h2_preface(),
                Duration::from_secs(30),
            ))
        })
        .collect();

    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .timeout(Duration::from_secs(10))
        .build()
        .expect("client");
    for i in 0..20 {
        let response = client
            .get(format!("http://{addr}/healthz"))
            .send()
            .await
            .unwrap_or_else(|e| panic!("health check {i} not served during the flood: {e}"));
        assert_eq!(response.text().await.expect("body"), "ok");
    }

    let mut closed_at_once = 0;
    for socket in flood {
        let open_for = socket.await.expect("ping task");
        // Well before the idle timeout: the PINGs kept nothing open.
        assert!(open_for < Duration::from_millis(4500), "{open_for:?}");
        if open_for < header_read_timeout / 2 {
            closed_at_once += 1;
        }
    }
    assert_eq!(closed_at_once, 50, "all but the address's share of 10");
    shutdown.cancel();
}

/// The header timeout counts from the accept and covers HTTP/2: a silent
/// socket is closed then, not held for the idle timeout. And after its
/// request, an HTTP/2 connection that only PINGs is closed as idle.
#[tokio::test]
async fn silent_sockets_close_at_the_header_timeout_and_pings_are_not_activity() {
    let idle_timeout = Duration::from_secs(5);
    let (addr, shutdown) = server_with(ConnectionLimits {
        header_read_timeout: Duration::from_secs(1),
        idle_timeout,
        ..ConnectionLimits::default()
    })
    .await;
    let started = tokio::time::Instant::now();
    let silent = connect_from("127.0.0.2", &addr).await;
    assert!(closed_by_server(silent).await);
    let open_for = started.elapsed();
    assert!(open_for < Duration::from_secs(3), "silent for {open_for:?}");

    // One request, answered, then only PINGs: closed at the idle timeout
    // (plus the grace a GOAWAY gets), not kept open by the PINGs.
    let socket = connect_from("127.0.0.2", &addr).await;
    let mut first = h2_preface();
    first.extend(h2_get_healthz());
    let open_for = ping_until_closed(socket, first, Duration::from_secs(20)).await;
    assert!(
        open_for >= idle_timeout && open_for < idle_timeout + Duration::from_secs(4),
        "an idle pinging HTTP/2 connection was open for {open_for:?}"
    );
    shutdown.cancel();
}

/// Every route's body has a deadline: a body one byte short is cut off at
/// `body_read_timeout` (the handler's read fails: 400), not held open
/// until the client gives up.
#[tokio::test]
async fn a_body_that_never_completes_is_cut_off_at_the_body_read_timeout() {
    let (addr, shutdown) = server_with(ConnectionLimits {
        body_read_timeout: Duration::from_secs(1),
        idle_timeout: Duration::from_secs(60),
        ..ConnectionLimits::default()
    })
    .await;
    let mut socket = TcpStream::connect(&addr).await.expect("connect");
    socket
        .write_all(b"POST /echo HTTP/1.1\r\nHost: localhost\r\nContent-Length: 10\r\n\r\n123456789")
        .await
        .expect("write");
    let mut answer = Vec::new();
    let mut buf = [0u8; 512];
    let read = async {
        while answer.len() < 12 {
            match socket.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => answer.extend_from_slice(&buf[..n]),
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .expect("answered when the body's time is up");
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 400"), "{text}");
    shutdown.cancel();
}
