//! The HTTP accept loop under a connection flood: idle sockets and
//! slow-header (slowloris) sockets are closed by the server, the connection
//! cap holds, and normal clients are still served.

use std::time::Duration;

use agentgate_core::mcp::{ConnectionLimits, serve_http_with};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

const LIMITS: ConnectionLimits = ConnectionLimits {
    max_connections: 32,
    header_read_timeout: Duration::from_secs(1),
    idle_timeout: Duration::from_secs(2),
};

/// Serves a `/healthz` and a quiet `/slow` (answers after 3 s, longer than
/// the idle timeout) within `LIMITS`.
async fn server() -> (String, CancellationToken) {
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
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    let shutdown = CancellationToken::new();
    tokio::spawn(serve_http_with(listener, router, LIMITS, shutdown.clone()));
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
