//! HTTP authentication end to end, against the real `agentgate serve`
//! binary: bearer tokens from `agentgate auth new-token`, OAuth JWTs checked
//! against a JWKS served by this test (RFC 9068 `typ`, scopes and their 403
//! challenge, streams that end with their token, the required resource),
//! the protected-resource metadata, the refusal to listen openly without
//! auth, and task ownership: another principal's task looks exactly like an
//! unknown id on all five paths. Also the failure throttle (bad tokens only,
//! per forwarded client behind a trusted proxy) and the A2A webhook's token
//! check before its body.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentgate_sim::qbusiness::{QBusinessConfig, QBusinessSim};
use agentgate_testkit::sse::SseReader;
use agentgate_testkit::*;
use rmcp::model::{CallToolResponse, CancelTaskParams, GetTaskParams, UpdateTaskParams};
use rmcp::service::{ClientServiceExt as _, ServiceError};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};
use tokio::process::Command;
use tokio_util::sync::CancellationToken;

const BIN: &str = env!("CARGO_BIN_EXE_agentgate");
const QBUSINESS: &str = "QBusinessQueryTool";
const UNKNOWN: &str = "0123456789abcdef-no-such-task";

/// A running `agentgate serve` in a directory of its own.
struct Server {
    gate: Gate,
    base: String,
    _dir: tempfile::TempDir,
}

impl Server {
    fn mcp(&self) -> String {
        format!("{}/mcp", self.base)
    }

    /// Kills it; returns everything it wrote to stderr.
    async fn stop(mut self) -> String {
        self.gate_stop().await
    }

    /// As [`Self::stop`], keeping its directory (the store) for a look.
    async fn gate_stop(&mut self) -> String {
        self.gate.kill();
        self.gate.wait_with_stderr().await.1
    }
}

/// Starts `agentgate serve` with `config` (TOML), debug logging and extra
/// `env`, pointed at the Q Business emulator.
async fn serve(config: &str, env: &[(&str, &str)], q: &Emulator<QBusinessSim>) -> Server {
    let dir = tempfile::tempdir().expect("tempdir");
    let gate = GateBuilder::agentgate(BIN, dir.path())
        .config(config)
        .upstream(q)
        .env("RUST_LOG", "debug")
        .envs(env.iter().copied())
        .start()
        .await;
    let base = gate
        .url
        .strip_suffix("/mcp")
        .expect("an /mcp URL")
        .to_owned();
    Server {
        gate,
        base,
        _dir: dir,
    }
}

async fn qbusiness() -> Emulator<QBusinessSim> {
    emulators::qbusiness(QBusinessConfig::default())
        .start()
        .await
}

/// An rmcp client (tasks extension, 2026-07-28) sending `Authorization: Bearer token`.
async fn client_with(url: &str, token: &str) -> Client {
    let client = TestClient::tasks();
    let lifecycle = client.lifecycle();
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url.to_owned()).auth_header(token.to_owned()),
    );
    client
        .serve_with_lifecycle(transport, lifecycle)
        .await
        .expect("connect with a bearer token")
}

/// A raw MCP request (server/discover) with an optional Authorization header.
async fn post(url: &str, authorization: Option<&str>) -> reqwest::Response {
    let mut request = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .body(
            json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {}})
                .to_string(),
        );
    if let Some(value) = authorization {
        request = request.header("authorization", value);
    }
    request.send().await.expect("POST /mcp")
}

fn challenge(response: &reqwest::Response) -> String {
    response
        .headers()
        .get("www-authenticate")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}

fn mcp_error(result: Result<impl std::fmt::Debug, ServiceError>) -> String {
    match result {
        Err(ServiceError::McpError(error)) => {
            serde_json::to_string(&error).expect("serialize error")
        }
        other => panic!("expected a JSON-RPC error, got {other:?}"),
    }
}

/// The token and the `[[auth.tokens]]` entry `agentgate auth new-token` prints.
async fn new_token(principal: &str) -> (String, String) {
    let out = Command::new(BIN)
        .args(["auth", "new-token", "--principal", principal])
        .output()
        .await
        .expect("run auth new-token");
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).expect("utf-8");
    let token = text
        .lines()
        .find(|l| l.starts_with("agt_"))
        .expect("a token line")
        .to_owned();
    let entry = text[text.find("[[auth.tokens]]").expect("config entry")..].to_owned();
    assert!(
        !entry.contains(&token),
        "only the hash goes into the config"
    );
    (token, entry)
}

#[tokio::test]
async fn bearer_tokens_gate_mcp_and_metrics_and_tasks_belong_to_their_principal() {
    let q = qbusiness().await;
    let (alice, alice_entry) = new_token("alice").await;
    let bob = "bob-token-from-the-environment";
    let config = format!(
        "[auth]\nmode = \"tokens\"\n\n{alice_entry}\n\n[[auth.tokens]]\nprincipal = \"bob\"\n\
         token_env = \"BOB_TOKEN\"\n"
    );
    let server = serve(&config, &[("BOB_TOKEN", bob)], &q).await;
    let mcp = server.mcp();

    // No token, a wrong token, another scheme: 401 with a Bearer challenge.
    let none = post(&mcp, None).await;
    assert_eq!(none.status(), 401);
    assert!(challenge(&none).starts_with("Bearer"), "{none:?}");
    assert!(!challenge(&none).contains("invalid_token"), "{none:?}");
    for bad in [
        "Bearer agt_not-a-real-token",
        "Basic YWxpY2U6eA==",
        "Bearer ",
    ] {
        let response = post(&mcp, Some(bad)).await;
        assert_eq!(response.status(), 401, "{bad}");
        assert!(
            challenge(&response).contains("error=\"invalid_token\""),
            "{bad}: {response:?}"
        );
    }
    // A good token gets past the gate to rmcp (which has its own opinion
    // of this bare request); the clients below show it fully working.
    let good = post(&mcp, Some(&format!("Bearer {alice}"))).await;
    assert_ne!(good.status(), 401, "{good:?}");
    assert!(challenge(&good).is_empty(), "{good:?}");
    // The probes stay open; /metrics does not.
    let http = reqwest::Client::new();
    for open in ["/healthz", "/readyz"] {
        let response = http
            .get(format!("{}{open}", server.base))
            .send()
            .await
            .expect("GET");
        assert_eq!(response.status(), 200, "{open}");
    }
    let metrics = format!("{}/metrics", server.base);
    let response = http.get(&metrics).send().await.expect("GET /metrics");
    assert_eq!(response.status(), 401);
    let response = http
        .get(&metrics)
        .bearer_auth(bob)
        .send()
        .await
        .expect("GET /metrics");
    assert_eq!(response.status(), 200);
    // No protected-resource metadata in token mode: there is no issuer.
    let response = http
        .get(format!(
            "{}/.well-known/oauth-protected-resource",
            server.base
        ))
        .send()
        .await
        .expect("GET metadata");
    assert_eq!(response.status(), 404);

    // Each principal starts a task and sees it.
    let as_alice = client_with(&mcp, &alice).await;
    let as_bob = client_with(&mcp, bob).await;
    let alice_task = start_task(&as_alice, QBUSINESS, json!({"query": "vacation days?"}))
        .await
        .task
        .task_id;
    let bob_task = start_task(&as_bob, QBUSINESS, json!({"query": "expense policy?"}))
        .await
        .task
        .task_id;
    poll_until(&as_alice, &alice_task, is_terminal).await;
    poll_until(&as_bob, &bob_task, is_terminal).await;

    // 1. tasks/get
    let get = |id: &str| as_bob.peer().get_task(GetTaskParams::new(id.to_owned()));
    let foreign = mcp_error(get(&alice_task).await);
    assert_eq!(foreign, mcp_error(get(UNKNOWN).await));
    assert!(foreign.contains("unknown or expired task id"), "{foreign}");
    // 2. tasks/update
    let update = |id: &str| {
        as_bob
            .peer()
            .update_task(UpdateTaskParams::new(id.to_owned(), Default::default()))
    };
    assert_eq!(
        mcp_error(update(&alice_task).await),
        mcp_error(update(UNKNOWN).await)
    );
    // 3. tasks/cancel
    let cancel = |id: &str| {
        as_bob
            .peer()
            .cancel_task(CancelTaskParams::new(id.to_owned()))
    };
    assert_eq!(
        mcp_error(cancel(&alice_task).await),
        mcp_error(cancel(UNKNOWN).await)
    );
    // 4. the task_status tool (its message echoes the id asked about)
    let status = |id: String| {
        let as_bob = &as_bob;
        async move {
            let response = as_bob
                .call_tool_once(call("task_status", json!({"task_id": id})))
                .await
                .expect("task_status");
            let CallToolResponse::Complete(result) = response else {
                panic!("task_status answers at once: {response:?}");
            };
            serde_json::to_string(&result)
                .expect("serialize")
                .replace(&id, "<id>")
        }
    };
    let foreign = status(alice_task.clone()).await;
    assert_eq!(foreign, status(UNKNOWN.to_owned()).await);
    assert!(foreign.contains("\"isError\":true"), "{foreign}");
    // 4b. the task_answer and task_cancel tools, the same way.
    let tool = |name: &'static str, id: String| {
        let as_bob = &as_bob;
        async move {
            let args = match name {
                "task_answer" => json!({"task_id": id, "responses": {"q": {"action": "decline"}}}),
                _ => json!({"task_id": id}),
            };
            let response = as_bob.call_tool_once(call(name, args)).await.expect(name);
            let CallToolResponse::Complete(result) = response else {
                panic!("{name} answers at once: {response:?}");
            };
            serde_json::to_string(&result)
                .expect("serialize")
                .replace(&id, "<id>")
        }
    };
    for name in ["task_answer", "task_cancel"] {
        let foreign = tool(name, alice_task.clone()).await;
        assert_eq!(foreign, tool(name, UNKNOWN.to_owned()).await, "{name}");
        assert!(
            foreign.contains("unknown or expired task id"),
            "{name}: {foreign}"
        );
    }
    // The owner's own view works on every path (the principal reached the gateway).
    as_alice
        .peer()
        .get_task(GetTaskParams::new(alice_task.clone()))
        .await
        .expect("alice sees her task");
    let own = status(bob_task.clone()).await;
    assert!(!own.contains("\"isError\":true"), "{own}");
    // 5. subscriptions/listen: alice's task and an unknown id say nothing;
    // bob's own task, listed last, is the first notification.
    let listen = reqwest::Client::new()
        .post(&mcp)
        .bearer_auth(bob)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "subscriptions/listen")
        .body(
            json!({
                "jsonrpc": "2.0", "id": 41, "method": "subscriptions/listen",
                "params": {
                    "notifications": {"taskIds": [&alice_task, UNKNOWN, &bob_task]},
                    "_meta": {
                        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                        "io.modelcontextprotocol/clientCapabilities":
                            {"extensions": {"io.modelcontextprotocol/tasks": {}}}
                    }
                }
            })
            .to_string(),
        )
        .send()
        .await
        .expect("POST subscriptions/listen");
    assert_eq!(listen.status(), 200);
    let mut events = SseReader::new(listen);
    let ack = events.next().await;
    assert_eq!(
        ack["method"], "notifications/subscriptions/acknowledged",
        "{ack}"
    );
    let first = events.next().await;
    assert_eq!(first["method"], "notifications/tasks", "{first}");
    assert_eq!(first["params"]["taskId"], json!(bob_task), "{first}");
    drop(events);

    as_alice.cancel().await.expect("close");
    as_bob.cancel().await.expect("close");
    let stderr = server.stop().await;
    assert!(
        stderr.contains("refused"),
        "rejections are logged:\n{stderr}"
    );
    for secret in [alice.as_str(), bob, "agt_not-a-real-token"] {
        assert!(
            !stderr.contains(secret),
            "a bearer token reached the log:\n{stderr}"
        );
    }
}

// ---------------------------------------------------------------- OAuth

const RSA_KEY: &[u8] = include_bytes!("../fixtures/auth/rsa-test-key.pem");
const OTHER_RSA_KEY: &[u8] = include_bytes!("../fixtures/auth/rsa-other-key.pem");
const EC_KEY: &[u8] = include_bytes!("../fixtures/auth/ec-test-key.pem");
const JWKS: &str = include_str!("../fixtures/auth/jwks.json");
const RESOURCE: &str = "https://mcp.example.com/mcp";

/// A fake authorization server: RFC 8414 metadata and a JWKS, counting
/// JWKS fetches.
async fn issuer(stop: &CancellationToken) -> (String, Arc<AtomicUsize>) {
    issuer_serving(stop, Arc::new(Mutex::new(JWKS.to_owned()))).await
}

/// As [`issuer`], serving whatever `jwks` holds at the time of each fetch.
async fn issuer_serving(
    stop: &CancellationToken,
    jwks: Arc<Mutex<String>>,
) -> (String, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let fetches = Arc::new(AtomicUsize::new(0));
    let metadata = json!({"issuer": url, "jwks_uri": format!("{url}/jwks")});
    let counter = fetches.clone();
    let router = axum::Router::new()
        .route(
            "/.well-known/oauth-authorization-server",
            axum::routing::get(move || {
                let metadata = metadata.clone();
                async move { axum::Json(metadata) }
            }),
        )
        .route(
            "/jwks",
            axum::routing::get(move || {
                counter.fetch_add(1, Ordering::SeqCst);
                let body = jwks.lock().expect("lock").clone();
                async move {
                    (
                        [(axum::http::header::CONTENT_TYPE, "application/json")],
                        body,
                    )
                }
            }),
        );
    let stop = stop.clone();
    tokio::spawn(async move {
        axum::serve(listener, router)
            .with_graceful_shutdown(async move { stop.cancelled().await })
            .await
    });
    (url, fetches)
}

fn now() -> u64 {
    jsonwebtoken::get_current_timestamp()
}

/// An RFC 9068 access token (`typ: at+jwt`).
fn sign(alg: jsonwebtoken::Algorithm, kid: &str, pem: &[u8], claims: &Value) -> String {
    sign_typed(Some("at+jwt"), alg, kid, pem, claims)
}

/// A JWT with header `typ` (none when `None`).
fn sign_typed(
    typ: Option<&str>,
    alg: jsonwebtoken::Algorithm,
    kid: &str,
    pem: &[u8],
    claims: &Value,
) -> String {
    use jsonwebtoken::{EncodingKey, Header};
    let key = match alg {
        jsonwebtoken::Algorithm::ES256 => EncodingKey::from_ec_pem(pem),
        _ => EncodingKey::from_rsa_pem(pem),
    }
    .expect("test key");
    let mut header = Header::new(alg);
    header.kid = Some(kid.to_owned());
    header.typ = typ.map(str::to_owned);
    jsonwebtoken::encode(&header, claims, &key).expect("sign")
}

/// An RS256 access token of `iss` for `sub`, with `extra` claims (`scope`,
/// `exp`, …) over the defaults.
fn access_token(iss: &str, sub: &str, extra: Value) -> String {
    sign(
        jsonwebtoken::Algorithm::RS256,
        "rsa-1",
        RSA_KEY,
        &oauth_claims(iss, sub, extra),
    )
}

fn oauth_claims(iss: &str, sub: &str, extra: Value) -> Value {
    let mut claims = json!({"iss": iss, "sub": sub, "aud": RESOURCE, "exp": now() + 600});
    if let (Some(claims), Some(extra)) = (claims.as_object_mut(), extra.as_object()) {
        claims.extend(extra.clone());
    }
    claims
}

/// `agentgate serve` in OAuth mode for `iss`, with `extra` lines in
/// `[auth.oauth]` (and any tables after it).
async fn oauth_server(iss: &str, extra: &str, q: &Emulator<QBusinessSim>) -> Server {
    let config = format!(
        "[auth]\nmode = \"oauth\"\nresource = \"{RESOURCE}\"\n\
         [auth.oauth]\nissuer = \"{iss}\"\njwks_uri = \"{iss}/jwks\"\n{extra}\n"
    );
    serve(&config, &[], q).await
}

/// A raw JSON-RPC request to `/mcp` with a bearer token.
async fn post_message(url: &str, token: &str, message: Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(url)
        .bearer_auth(token)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .body(message.to_string())
        .send()
        .await
        .expect("POST /mcp")
}

#[tokio::test]
async fn oauth_access_tokens_are_checked_against_the_issuers_jwks() {
    use base64::Engine as _;
    use jsonwebtoken::Algorithm::{ES256, RS256};
    let stop = CancellationToken::new();
    let _stop = stop.clone().drop_guard();
    let q = qbusiness().await;
    let (iss, fetches) = issuer(&stop).await;
    // No jwks_uri: it is discovered from the issuer's metadata.
    let config = format!(
        "[auth]\nmode = \"oauth\"\nresource = \"{RESOURCE}\"\n\
         [auth.oauth]\nissuer = \"{iss}\"\nscopes_supported = [\"mcp:tasks\"]\n"
    );
    let server = serve(&config, &[], &q).await;
    let mcp = server.mcp();
    let http = reqwest::Client::new();

    // The protected-resource metadata, at both well-known paths.
    for path in [
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
    ] {
        let document: Value = http
            .get(format!("{}{path}", server.base))
            .send()
            .await
            .expect("GET metadata")
            .json()
            .await
            .expect("JSON metadata");
        assert_eq!(document["resource"], RESOURCE, "{path}: {document}");
        assert_eq!(
            document["authorization_servers"],
            json!([iss]),
            "{document}"
        );
        assert_eq!(document["bearer_methods_supported"], json!(["header"]));
        assert_eq!(document["scopes_supported"], json!(["mcp:tasks"]));
    }
    let metadata_url = "https://mcp.example.com/.well-known/oauth-protected-resource/mcp";
    let none = post(&mcp, None).await;
    assert_eq!(none.status(), 401);
    assert_eq!(
        challenge(&none),
        format!(
            "Bearer realm=\"agentgate\", resource_metadata=\"{metadata_url}\", scope=\"mcp:tasks\""
        )
    );

    let claims = |sub: &str| json!({"iss": iss, "sub": sub, "aud": RESOURCE, "exp": now() + 600, "iat": now()});
    // Good tokens, RSA and EC: the client works, as its own principal.
    let alice = sign(RS256, "rsa-1", RSA_KEY, &claims("alice"));
    let bob = sign(ES256, "ec-1", EC_KEY, &claims("bob"));
    let as_alice = client_with(&mcp, &alice).await;
    let as_bob = client_with(&mcp, &bob).await;
    let task = start_task(&as_alice, QBUSINESS, json!({"query": "vacation days?"}))
        .await
        .task
        .task_id;
    as_alice
        .peer()
        .get_task(GetTaskParams::new(task.clone()))
        .await
        .expect("alice sees her task");
    let foreign = mcp_error(
        as_bob
            .peer()
            .get_task(GetTaskParams::new(task.clone()))
            .await,
    );
    let unknown = mcp_error(as_bob.peer().get_task(GetTaskParams::new(UNKNOWN)).await);
    assert_eq!(foreign, unknown, "another subject's task looks unknown");
    assert_eq!(fetches.load(Ordering::SeqCst), 1, "the JWKS is cached");

    let with = |f: &dyn Fn(&mut Value)| {
        let mut c = claims("mallory");
        f(&mut c);
        c
    };
    let b64 = |v: &Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
    let unsigned = format!(
        "{}.{}.",
        b64(&json!({"alg": "none", "typ": "JWT", "kid": "rsa-1"})),
        b64(&claims("mallory"))
    );
    let hs256 = jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &claims("mallory"),
        &jsonwebtoken::EncodingKey::from_secret(JWKS.as_bytes()).expect("HMAC key"),
    )
    .expect("sign HS256");
    let bad = [
        (
            "wrong aud",
            sign(
                RS256,
                "rsa-1",
                RSA_KEY,
                &with(&|c| c["aud"] = json!("https://other.example/mcp")),
            ),
        ),
        (
            "expired",
            sign(
                RS256,
                "rsa-1",
                RSA_KEY,
                &with(&|c| c["exp"] = json!(now() - 3600)),
            ),
        ),
        (
            "not yet valid",
            sign(
                RS256,
                "rsa-1",
                RSA_KEY,
                &with(&|c| c["nbf"] = json!(now() + 3600)),
            ),
        ),
        (
            "wrong iss",
            sign(
                RS256,
                "rsa-1",
                RSA_KEY,
                &with(&|c| c["iss"] = json!("https://evil.example")),
            ),
        ),
        (
            "no exp",
            sign(
                RS256,
                "rsa-1",
                RSA_KEY,
                &with(&|c| {
                    c.as_object_mut().map(|m| m.remove("exp"));
                }),
            ),
        ),
        (
            "bad signature",
            sign(RS256, "rsa-1", OTHER_RSA_KEY, &claims("mallory")),
        ),
        ("alg none", unsigned),
        ("HS256 with the JWKS as secret", hs256),
        ("not a JWT", "abc.def".to_owned()),
    ];
    for (what, token) in &bad {
        let response = post(&mcp, Some(&format!("Bearer {token}"))).await;
        assert_eq!(response.status(), 401, "{what}");
        assert!(
            challenge(&response).contains("error=\"invalid_token\""),
            "{what}: {}",
            challenge(&response)
        );
        assert!(challenge(&response).contains(metadata_url), "{what}");
    }
    // Unknown kids: refused, and a flood of them does not refetch the JWKS
    // more than once per refresh interval (30 s by default).
    for i in 0..5 {
        let token = sign(RS256, &format!("made-up-{i}"), RSA_KEY, &claims("mallory"));
        let response = post(&mcp, Some(&format!("Bearer {token}"))).await;
        assert_eq!(response.status(), 401, "unknown kid");
    }
    assert_eq!(
        fetches.load(Ordering::SeqCst),
        1,
        "unknown kids within the refresh interval must not refetch"
    );

    as_alice.cancel().await.expect("close");
    as_bob.cancel().await.expect("close");
    let stderr = server.stop().await;
    for (what, token) in bad
        .iter()
        .map(|(w, t)| (*w, t.as_str()))
        .chain([("alice", alice.as_str())])
    {
        // The signature part alone is enough to replay nothing, but no part
        // of a token belongs in the log.
        let signature = token.rsplit('.').next().unwrap_or_default();
        assert!(
            signature.len() < 8 || !stderr.contains(signature),
            "{what}: a token reached the log"
        );
    }
}

#[tokio::test]
async fn an_unknown_kid_refetches_the_jwks_so_rotated_keys_work() {
    use jsonwebtoken::Algorithm::{ES256, RS256};
    let stop = CancellationToken::new();
    let _stop = stop.clone().drop_guard();
    let q = qbusiness().await;
    // The issuer starts with the RSA key only; the EC key arrives later.
    let mut all: Value = serde_json::from_str(JWKS).expect("fixture JWKS");
    let mut first = all.clone();
    first["keys"]
        .as_array_mut()
        .expect("keys")
        .retain(|k| k["kid"] == "rsa-1");
    let jwks = Arc::new(Mutex::new(first.to_string()));
    let (iss, fetches) = issuer_serving(&stop, jwks.clone()).await;
    let config = format!(
        "[auth]\nmode = \"oauth\"\nresource = \"{RESOURCE}\"\n\
         [auth.oauth]\nissuer = \"{iss}\"\njwks_uri = \"{iss}/jwks\"\n\
         jwks_min_refresh_seconds = 0\n"
    );
    let server = serve(&config, &[], &q).await;
    let claims = json!({"iss": iss, "sub": "alice", "aud": RESOURCE, "exp": now() + 600});
    let rsa = sign(RS256, "rsa-1", RSA_KEY, &claims);
    let ec = sign(ES256, "ec-1", EC_KEY, &claims);
    let bearer = |t: &str| format!("Bearer {t}");
    assert_ne!(post(&server.mcp(), Some(&bearer(&rsa))).await.status(), 401);
    assert_eq!(post(&server.mcp(), Some(&bearer(&ec))).await.status(), 401);
    let before = fetches.load(Ordering::SeqCst);
    *jwks.lock().expect("lock") = std::mem::take(&mut all).to_string();
    assert_ne!(
        post(&server.mcp(), Some(&bearer(&ec))).await.status(),
        401,
        "the rotated-in key is fetched on its first use"
    );
    assert_eq!(fetches.load(Ordering::SeqCst), before + 1);
    server.stop().await;
}

/// A raw MCP request as a reverse proxy forwards it: from 127.0.0.1, with
/// the client named in `X-Forwarded-For` when `client` is set.
async fn post_via_proxy(url: &str, authorization: Option<&str>, client: Option<&str>) -> u16 {
    let mut request = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{}}"#);
    if let Some(value) = authorization {
        request = request.header("authorization", value);
    }
    if let Some(client) = client {
        request = request.header("x-forwarded-for", format!("203.0.113.66, {client}"));
    }
    request.send().await.expect("POST /mcp").status().as_u16()
}

/// Issue 30: the failure throttle holds back bad tokens only. Everyone
/// behind one proxy shares its address; new clients (no token yet) and a
/// stranger's bad tokens must not lock out a valid token, and with the
/// proxy trusted each forwarded client has its own count.
#[tokio::test]
async fn the_failure_throttle_holds_back_bad_tokens_never_valid_ones_or_missing_ones() {
    let q = qbusiness().await;
    let (token, entry) = new_token("dora").await;
    let config = format!(
        "[server]\ntrusted_proxies = [\"127.0.0.1\"]\n\n[auth]\nmode = \"tokens\"\n\n{entry}\n"
    );
    let server = serve(&config, &[], &q).await;
    let mcp = server.mcp();
    let valid = format!("Bearer {token}");

    // The proxy's own address (no forwarding header): 40 first requests
    // of new clients, all told to authenticate, none throttled.
    for i in 0..40 {
        assert_eq!(
            post_via_proxy(&mcp, None, None).await,
            401,
            "tokenless #{i}"
        );
    }
    // 60 bad tokens: past the burst of 30 they are throttled...
    let mut statuses = Vec::new();
    for _ in 0..60 {
        statuses.push(post_via_proxy(&mcp, Some("Bearer agt_wrong"), None).await);
    }
    assert!(
        statuses.iter().all(|s| *s == 401 || *s == 429),
        "{statuses:?}"
    );
    assert!(
        statuses.contains(&429),
        "bad tokens are throttled: {statuses:?}"
    );
    // ...but a valid token from the same address is served at once.
    let served = post_via_proxy(&mcp, Some(&valid), None).await;
    assert!(
        served != 401 && served != 429,
        "valid token answered {served}"
    );

    // Forwarded clients are told apart: one throttled, another not.
    let mut statuses = Vec::new();
    for _ in 0..60 {
        statuses.push(post_via_proxy(&mcp, Some("Bearer agt_wrong"), Some("198.51.100.1")).await);
    }
    assert!(statuses.contains(&429), "{statuses:?}");
    assert_eq!(
        post_via_proxy(&mcp, Some("Bearer agt_wrong"), Some("198.51.100.2")).await,
        401,
        "another client behind the proxy is not throttled"
    );
    // The left-most entry is the client's to forge: it changes nothing.
    assert_eq!(
        post_via_proxy(&mcp, Some("Bearer agt_wrong"), Some("198.51.100.1")).await,
        429
    );
    let served = post_via_proxy(&mcp, Some(&valid), Some("198.51.100.1")).await;
    assert!(
        served != 401 && served != 429,
        "valid token answered {served}"
    );
    server.stop().await;
}

/// Writes `head` and `body` on a new connection to `base` and returns the
/// answer's status line, failing the test if none comes within 5 s.
async fn raw_exchange(base: &str, head: &str, body: &[u8]) -> String {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let addr = base.strip_prefix("http://").expect("an http URL");
    let mut socket = tokio::net::TcpStream::connect(addr).await.expect("connect");
    socket.write_all(head.as_bytes()).await.expect("write head");
    socket.write_all(body).await.expect("write body");
    let mut answer = Vec::new();
    let mut buf = [0u8; 1024];
    let read = async {
        while !answer.windows(2).any(|w| w == b"\r\n") {
            match socket.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => answer.extend_from_slice(&buf[..n]),
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(5), read)
        .await
        .expect("an answer before the body is complete");
    let text = String::from_utf8_lossy(&answer);
    text.lines().next().unwrap_or_default().to_owned()
}

/// Issue 30: `/hooks/a2a` is open to anyone, so it checks the task's token
/// from the head before it reads a body, and reads a small one only.
#[tokio::test]
async fn the_a2a_webhook_checks_its_token_before_the_body_and_caps_the_body() {
    let up = emulators::a2a(agentgate_sim::a2a::A2aConfig::default())
        .start()
        .await;
    let dir = tempfile::tempdir().expect("tempdir");
    let secret = "push-secret-for-the-auth-test-0123456789";
    let gate = GateBuilder::agentgate(BIN, dir.path())
        .config(&format!(
            "[a2a]\nrefresh_seconds = 0\npush_url = \"http://127.0.0.1:1/hooks/a2a\"\n\
             push_secret_env = \"PUSH_SECRET\"\n{}",
            up.a2a_agent("emu", "")
        ))
        .env("PUSH_SECRET", secret)
        .start()
        .await;
    let base = gate
        .url
        .strip_suffix("/mcp")
        .expect("an /mcp URL")
        .to_owned();
    let head = |token: &str, length: usize| {
        format!(
            "POST /hooks/a2a/task-1 HTTP/1.1\r\nHost: 127.0.0.1\r\n\
             Authorization: Bearer {token}\r\nContent-Type: application/json\r\n\
             Content-Length: {length}\r\n\r\n"
        )
    };
    // A body one byte short of its length, with a wrong token: 401 at once,
    // not after the server has waited for the last byte.
    let status = raw_exchange(&base, &head("wrong", 100), &[b' '; 99]).await;
    assert!(status.starts_with("HTTP/1.1 401"), "{status}");
    // The right token, a body past the cap: 413 without reading it.
    let token = backend_a2a::push::token(&backend_a2a::config::Secret::new(secret), "task-1");
    let status = raw_exchange(&base, &head(&token, 300 * 1024), &[b' '; 1024]).await;
    assert!(status.starts_with("HTTP/1.1 413"), "{status}");
    gate.kill_and_wait().await;
}

#[tokio::test]
async fn a_non_loopback_listen_needs_auth_or_allow_unauthenticated() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = |extra: &[&str], env: Option<(&str, &str)>| {
        let mut gateway = GateBuilder::agentgate(BIN, dir.path())
            .no_listen()
            .args(["--listen", "0.0.0.0:0"])
            .args(extra.iter().copied());
        if let Some((name, value)) = env {
            gateway = gateway.env(name, value);
        }
        gateway
    };
    let refused = tokio::time::timeout(Duration::from_secs(30), run(&[], None).command().output())
        .await
        .expect("exits")
        .expect("output");
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("without authentication")
            && stderr.contains("[auth]")
            && stderr.contains("--allow-unauthenticated")
            && stderr.contains("agentgate auth new-token"),
        "{stderr}"
    );
    for (flag, env) in [
        (&["--allow-unauthenticated"][..], None),
        (&[][..], Some(("AGENTGATE_ALLOW_UNAUTHENTICATED", "true"))),
    ] {
        let server = run(flag, env).start().await;
        assert!(server.url.starts_with("http://0.0.0.0:"), "{}", server.url);
        server.kill_and_wait().await;
    }
}

/// `agentgate call` sends `AGENTGATE_TOKEN` as the bearer token; without it
/// a server with authentication on refuses the client, which says so.
#[tokio::test]
async fn the_command_line_client_authenticates_with_agentgate_token() {
    let q = qbusiness().await;
    let (token, entry) = new_token("carol").await;
    let server = serve(&format!("[auth]\nmode = \"tokens\"\n\n{entry}\n"), &[], &q).await;
    let state = tempfile::tempdir().expect("tempdir");
    let call = |token: Option<&str>| {
        let mut command = Command::new(BIN);
        command
            .args(["call", "--url", &server.mcp(), QBUSINESS])
            .args(["--arg", "query=How do I set up the VPN?"])
            .env("AGENTGATE_CLIENT_STATE", state.path())
            .env_remove("AGENTGATE_TOKEN")
            .kill_on_drop(true);
        if let Some(token) = token {
            command.env("AGENTGATE_TOKEN", token);
        }
        command.output()
    };
    let refused = tokio::time::timeout(Duration::from_secs(60), call(None))
        .await
        .expect("the client did not finish")
        .expect("run the client");
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(
        said.contains("requires authentication (401): set AGENTGATE_TOKEN"),
        "the client says it was not let in and what to do: {said}"
    );
    let answered = tokio::time::timeout(Duration::from_secs(120), call(Some(&token)))
        .await
        .expect("the client did not finish")
        .expect("run the client");
    assert_eq!(answered.status.code(), Some(0), "{answered:?}");
    assert!(
        String::from_utf8_lossy(&answered.stdout).starts_with("Qbiz response: "),
        "{answered:?}"
    );
    let log = server.stop().await;
    assert!(!log.contains(&token), "the token is not logged");
}

#[tokio::test]
async fn oauth_without_a_public_resource_is_refused_at_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let refused = GateBuilder::agentgate(BIN, dir.path())
        .config("[auth]\nmode = \"oauth\"\n[auth.oauth]\nissuer = \"https://auth.example.com\"\n")
        .command()
        .output();
    let refused = tokio::time::timeout(Duration::from_secs(30), refused)
        .await
        .expect("exits")
        .expect("output");
    assert!(!refused.status.success(), "{refused:?}");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("auth.resource") && stderr.contains("resource = \"https://"),
        "the error names the setting and shows one: {stderr}"
    );
}

/// RFC 9068: only tokens typed `at+jwt` are access tokens; an ID token of
/// the same issuer, for the same audience, typed `JWT`, is not, unless the
/// check is turned off for an issuer that does not type its tokens.
#[tokio::test]
async fn only_at_jwt_typed_tokens_are_access_tokens_unless_the_check_is_off() {
    use jsonwebtoken::Algorithm::RS256;
    let stop = CancellationToken::new();
    let _stop = stop.clone().drop_guard();
    let q = qbusiness().await;
    let (iss, _) = issuer(&stop).await;
    let claims = oauth_claims(&iss, "alice", json!({}));
    let typed = |typ: Option<&str>| sign_typed(typ, RS256, "rsa-1", RSA_KEY, &claims);
    let bearer = |t: String| format!("Bearer {t}");

    let strict = oauth_server(&iss, "", &q).await;
    for typ in [Some("JWT"), None, Some("jwt")] {
        let response = post(&strict.mcp(), Some(&bearer(typed(typ)))).await;
        assert_eq!(response.status(), 401, "typ {typ:?}");
        assert!(
            challenge(&response).contains("error=\"invalid_token\""),
            "typ {typ:?}: {}",
            challenge(&response)
        );
    }
    for typ in ["at+jwt", "AT+JWT", "application/at+jwt"] {
        let response = post(&strict.mcp(), Some(&bearer(typed(Some(typ))))).await;
        assert_ne!(response.status(), 401, "typ {typ}");
    }
    let log = strict.stop().await;
    assert!(log.contains("not at+jwt"), "the reason is logged:\n{log}");

    let lax = oauth_server(&iss, "require_at_jwt_typ = false", &q).await;
    for typ in [Some("JWT"), None] {
        let response = post(&lax.mcp(), Some(&bearer(typed(typ)))).await;
        assert_ne!(response.status(), 401, "typ {typ:?} with the check off");
    }
    lax.stop().await;
}

#[tokio::test]
async fn a_token_lacking_a_needed_scope_gets_the_insufficient_scope_challenge() {
    let stop = CancellationToken::new();
    let _stop = stop.clone().drop_guard();
    let q = qbusiness().await;
    let (iss, _) = issuer(&stop).await;
    let server = oauth_server(
        &iss,
        "required_scopes = [\"mcp\"]\n\
         [auth.oauth.method_scopes]\n\"tasks/cancel\" = [\"mcp:write\"]\n\
         [auth.oauth.tool_scopes]\nQBusinessQueryTool = [\"qbusiness\"]\n",
        &q,
    )
    .await;
    let mcp = server.mcp();
    let metadata_url = "https://mcp.example.com/.well-known/oauth-protected-resource/mcp";
    let expect_403 = |response: reqwest::Response, scope: &str, what: &str| {
        assert_eq!(response.status(), 403, "{what}");
        assert_eq!(
            challenge(&response),
            format!(
                "Bearer error=\"insufficient_scope\", scope=\"{scope}\", \
                 resource_metadata=\"{metadata_url}\", \
                 error_description=\"the access token lacks a scope this request needs\""
            ),
            "{what}"
        );
    };

    // Every request needs `mcp`: the 401 says so, and so does the 403.
    let none = post(&mcp, None).await;
    assert_eq!(none.status(), 401);
    assert_eq!(
        challenge(&none),
        format!("Bearer realm=\"agentgate\", resource_metadata=\"{metadata_url}\", scope=\"mcp\"")
    );
    let unscoped = access_token(&iss, "alice", json!({}));
    let other = access_token(&iss, "alice", json!({"scope": "openid profile"}));
    for token in [&unscoped, &other] {
        expect_403(
            post(&mcp, Some(&format!("Bearer {token}"))).await,
            "mcp",
            "no mcp scope",
        );
    }
    let mcp_only = access_token(&iss, "alice", json!({"scope": "openid mcp"}));
    let response = post(&mcp, Some(&format!("Bearer {mcp_only}"))).await;
    assert!(
        response.status() != 401 && response.status() != 403,
        "{response:?}"
    );

    // A tool's scope, and a method's, on top of the required one.
    let call = json!({
        "jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": QBUSINESS, "arguments": {"query": "vacation days?"}}
    });
    expect_403(
        post_message(&mcp, &mcp_only, call.clone()).await,
        "mcp qbusiness",
        "tools/call without the tool's scope",
    );
    let cancel = json!({
        "jsonrpc": "2.0", "id": 3, "method": "tasks/cancel", "params": {"taskId": UNKNOWN}
    });
    expect_403(
        post_message(&mcp, &mcp_only, cancel.clone()).await,
        "mcp mcp:write",
        "tasks/cancel without mcp:write",
    );
    // A batch is checked message by message.
    expect_403(
        post_message(&mcp, &mcp_only, json!([call])).await,
        "mcp qbusiness",
        "a batched tools/call",
    );

    // With the scopes (as `scope` or as an `scp` array) the call works.
    for token in [
        access_token(&iss, "alice", json!({"scope": "mcp qbusiness mcp:write"})),
        access_token(
            &iss,
            "bob",
            json!({"scp": ["mcp", "qbusiness", "mcp:write"]}),
        ),
    ] {
        let client = client_with(&mcp, &token).await;
        let task = start_task(&client, QBUSINESS, json!({"query": "vacation days?"}))
            .await
            .task
            .task_id;
        // The task may have finished already: a JSON-RPC answer either way,
        // not the transport's 403.
        match client.peer().cancel_task(CancelTaskParams::new(task)).await {
            Ok(_) | Err(ServiceError::McpError(_)) => {}
            Err(e) => panic!("tasks/cancel with mcp:write was refused: {e:?}"),
        }
        client.cancel().await.expect("close");
    }
    server.stop().await;
}

/// An event stream lasts no longer than its token: `subscriptions/listen`
/// opened with a token that expires in a few seconds ends by itself then.
#[tokio::test]
async fn a_stream_ends_when_the_token_that_opened_it_expires() {
    let stop = CancellationToken::new();
    let _stop = stop.clone().drop_guard();
    let q = qbusiness().await;
    let (iss, _) = issuer(&stop).await;
    // No leeway: the stream ends at `exp` itself.
    let server = oauth_server(&iss, "leeway_seconds = 0", &q).await;
    let expires = now() + 3;
    let token = access_token(&iss, "alice", json!({"exp": expires}));
    let listen = reqwest::Client::new()
        .post(server.mcp())
        .bearer_auth(&token)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "subscriptions/listen")
        .body(
            json!({
                "jsonrpc": "2.0", "id": 7, "method": "subscriptions/listen",
                "params": {
                    "notifications": {"taskIds": [UNKNOWN]},
                    "_meta": {
                        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                        "io.modelcontextprotocol/clientCapabilities":
                            {"extensions": {"io.modelcontextprotocol/tasks": {}}}
                    }
                }
            })
            .to_string(),
        )
        .send()
        .await
        .expect("POST subscriptions/listen");
    assert_eq!(listen.status(), 200);
    let mut events = SseReader::new(listen);
    let ack = events.next().await;
    assert_eq!(
        ack["method"], "notifications/subscriptions/acknowledged",
        "{ack}"
    );
    // Nothing more comes for an unknown task: only the token's expiry can
    // end this stream. 20 s bounds the wait, far past the 3 s token.
    let mut response = events.into_response();
    let ended = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            match response.chunk().await {
                Ok(Some(_)) => {}
                Ok(None) => return Ok(()),
                Err(e) => return Err(e),
            }
        }
    })
    .await;
    let ended = ended.expect("the stream outlived its token by 17 s");
    assert!(ended.is_ok(), "the stream ends cleanly: {ended:?}");
    assert!(
        now() >= expires,
        "the stream ended before the token expired ({} < {expires})",
        now()
    );
    server.stop().await;
}

const APPLICATION_ARN: &str = "arn:aws:sso::111122223333:application/ssoins-1111/apl-2222";
const ROLE_ARN: &str = "arn:aws:iam::111122223333:role/QBusinessIdentityAware";

/// Asks Q Business as `client` and waits for the task's end.
async fn ask(client: &Client, query: &str) -> serde_json::Map<String, Value> {
    let id = start_task(client, QBUSINESS, json!({"query": query}))
        .await
        .task
        .task_id;
    match poll_until(client, &id, is_terminal).await {
        rmcp::model::TaskPayload::Completed { result } => result,
        other => panic!("expected a result, got {other:?}"),
    }
}

#[tokio::test]
async fn q_business_answers_as_the_signed_in_user_through_an_identity_aware_session() {
    use agentgate_sim::qbusiness::IdentityCenterConfig;
    let stop = CancellationToken::new();
    let _stop = stop.clone().drop_guard();
    let (iss, _) = issuer(&stop).await;
    // Identity Center trusts our issuer for our audience and names users by
    // their `email` claim; STS lets the gateway assume one role with an
    // identity context.
    let q = emulators::qbusiness(QBusinessConfig {
        identity_center: Some(IdentityCenterConfig {
            application_arn: APPLICATION_ARN.into(),
            role_arn: ROLE_ARN.into(),
            issuer: iss.clone(),
            jwks_uri: format!("{iss}/jwks"),
            audience: RESOURCE.into(),
            user_claim: "email".into(),
        }),
        ..QBusinessConfig::default()
    })
    .start()
    .await;
    let mut server = oauth_server(
        &iss,
        &format!(
            "[qbusiness.identity_center]\napplication_arn = \"{APPLICATION_ARN}\"\n\
             role_arn = \"{ROLE_ARN}\"\nsession_seconds = 900\n"
        ),
        &q,
    )
    .await;
    let mcp = server.mcp();
    let alice_token = access_token(&iss, "alice", json!({"email": "alice@corp.example"}));
    let bob_token = access_token(&iss, "bob", json!({"email": "bob@corp.example"}));
    let as_alice = client_with(&mcp, &alice_token).await;
    let as_bob = client_with(&mcp, &bob_token).await;

    // Each answer is ChatSync signed by that user's own role session, with
    // no user id of any kind on the wire.
    let answer = ask(&as_alice, "How many vacation days do I get?").await;
    assert_ne!(answer["isError"], json!(true), "{answer:?}");
    assert!(
        first_text(&answer).starts_with("Qbiz response: "),
        "{answer:?}"
    );
    let answer = ask(&as_bob, "What is the expense policy?").await;
    assert_ne!(answer["isError"], json!(true), "{answer:?}");
    let stats = q.sim.stats();
    let seen: Vec<_> = stats
        .identities
        .iter()
        .map(|i| {
            (
                i.session_user.clone(),
                i.user_id.clone(),
                i.user_groups.len(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        vec![
            (Some("alice@corp.example".to_owned()), None, 0),
            (Some("bob@corp.example".to_owned()), None, 0),
        ]
    );
    // One exchange per principal, however many requests each made.
    assert_eq!((stats.token_exchanges, stats.roles_assumed), (2, 2));

    // An identity the caller types is refused before anything is sent.
    let chats = q.sim.stats().chat_sync_requests;
    let typed = start_task(
        &as_bob,
        QBUSINESS,
        json!({"query": "Salaries?", "user_id": "cfo@corp.example", "user_groups": ["Finance-Admins"]}),
    )
    .await
    .task
    .task_id;
    let rmcp::model::TaskPayload::Completed { result } =
        poll_until(&as_bob, &typed, is_terminal).await
    else {
        panic!("expected a tool error")
    };
    assert_eq!(result["isError"], json!(true), "{result:?}");
    assert!(
        first_text(&result).contains("`user_id` is not accepted"),
        "{result:?}"
    );
    assert_eq!(q.sim.stats().chat_sync_requests, chats);

    // Another ask of Alice's reuses her session.
    ask(&as_alice, "And sick leave?").await;
    let stats = q.sim.stats();
    assert_eq!(stats.token_exchanges, 2);
    assert_eq!(
        stats.identities.last().and_then(|i| i.session_user.clone()),
        Some("alice@corp.example".to_owned())
    );

    // A sign-in Identity Center refuses (no `email` to name a user) is the
    // tool's error, naming the application; Q Business is never called.
    let mallory = client_with(&mcp, &access_token(&iss, "mallory", json!({}))).await;
    let chats = q.sim.stats().chat_sync_requests;
    let refused = ask(&mallory, "What is the CFO's salary?").await;
    assert_eq!(refused["isError"], json!(true), "{refused:?}");
    let text = first_text(&refused);
    assert!(
        text.contains("IAM Identity Center did not exchange your sign-in")
            && text.contains(APPLICATION_ARN)
            && text.contains("InvalidGrantException")
            && !text.contains("ErrorMetadata"),
        "{text}"
    );
    assert_eq!(q.sim.stats().chat_sync_requests, chats);
    assert_eq!(q.sim.stats().token_exchanges_refused, 1);

    // No access token and no session secret reached the log (at debug
    // level) or any file of the store.
    let sessions = q.sim.issued_sessions();
    assert_eq!(sessions.len(), 2, "{sessions:?}");
    let mut secrets = vec![alice_token.clone(), bob_token.clone()];
    for s in &sessions {
        secrets.push(s.secret_access_key.clone());
        secrets.push(s.session_token.clone());
    }
    let dir = server._dir.path().to_owned();
    let log = server.gate_stop().await;
    let mut places = vec![("the log".to_owned(), log.into_bytes())];
    for entry in std::fs::read_dir(&dir).expect("the store's directory") {
        let path = entry.expect("entry").path();
        if path.is_file() {
            places.push((
                path.display().to_string(),
                std::fs::read(&path).expect("read"),
            ));
        }
    }
    assert!(
        places.iter().any(|(place, _)| place.ends_with("tasks.db")),
        "the store is among the files searched"
    );
    for (place, bytes) in &places {
        for secret in &secrets {
            assert!(
                !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
                "a secret is in {place}"
            );
        }
    }
}

#[tokio::test]
async fn identity_aware_sessions_need_oauth_and_exclude_user_ids() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = |config: String| {
        let path = dir.path().join("agentgate.toml");
        async move {
            std::fs::write(&path, config).expect("write config");
            let out = Command::new(BIN)
                .arg("--config")
                .arg(&path)
                .args(["serve", "--listen", "127.0.0.1:0"])
                .env("RUST_BACKTRACE", "0")
                .output()
                .await
                .expect("run serve");
            assert!(!out.status.success(), "{out:?}");
            String::from_utf8_lossy(&out.stderr).into_owned()
        }
    };
    let center = format!(
        "[qbusiness.identity_center]\napplication_arn = \"{APPLICATION_ARN}\"\n\
         role_arn = \"{ROLE_ARN}\"\n"
    );
    let err = run(format!("[auth]\nmode = \"tokens\"\n{center}")).await;
    assert!(
        err.contains("[qbusiness.identity_center] needs [auth] mode = \"oauth\""),
        "{err}"
    );
    let err = run(format!(
        "[qbusiness]\ntrust_caller_identity = true\n{center}"
    ))
    .await;
    assert!(
        err.contains("cannot be combined with qbusiness.users or qbusiness.trust_caller_identity"),
        "{err}"
    );
    let err = run(format!(
        "[auth]\nmode = \"oauth\"\n{center}session_seconds = 60\n"
    ))
    .await;
    assert!(
        err.contains("session_seconds must be 900 to 43200"),
        "{err}"
    );
}
