//! HTTP routes and the front door.
//!
//! | method and path | operation |
//! |---|---|
//! | `POST /graphql`, `POST /api/graphql` | GraphQL |
//! | `GET /repos/{owner}/{repo}/issues/{number}` | an issue (or a PR as an issue) |
//! | `GET /repos/{owner}/{repo}/issues/{number}/timeline` | timeline events |
//! | `GET`, `POST /repos/{owner}/{repo}/issues/{number}/comments` | list, create comments |
//! | `GET /repos/{owner}/{repo}/pulls/{number}` | a pull request |
//! | `POST`, `GET /agents/repos/{owner}/{repo}/tasks` | create, list agent tasks |
//! | `GET /agents/repos/{owner}/{repo}/tasks/{task_id}`, `GET /agents/tasks/{task_id}` | an agent task |
//! | `GET /user`, `GET /rate_limit` | the token's user, the budgets |
//! | anything else | 404 `{"message":"Not Found",…}` |
//!
//! The REST routes are also served under `/api/v3` (the GHES layout).
//!
//! The front door (a middleware) runs for every request, in this order: latency, body
//! (at most [`MAX_BODY`] bytes, else 413), the token (else 401 `Bad credentials`), an
//! injected fault (see `faults`), the primary rate limit (switch or spent budget), then
//! one point is spent and the request runs; a successful answer may then be lost (502,
//! the effect applied; `Faults::set_lost_rate`). Every response carries the `x-ratelimit-*`
//! headers of its resource (`graphql` for the GraphQL endpoints, else `core`).

use axum::Json;
use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::json;

use super::GithubSim;
use super::faults::GithubFault;
use super::graphql;
use super::ids::node_id;
use super::rest;
use super::state::{Bucket, epoch_now};
use super::tasks;
use super::wire::{GRAPHQL_DOCS, REST_DOCS, RestError};

/// Largest request body accepted (1 MiB); larger ones get 413.
pub const MAX_BODY: usize = 1024 * 1024;

const GRAPHQL_SECONDARY_DOCS: &str = "https://docs.github.com/graphql/overview/rate-limits-and-node-limits-for-the-graphql-api#secondary-rate-limits";
const REST_SECONDARY_DOCS: &str = "https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api#about-secondary-rate-limits";
const REST_PRIMARY_DOCS: &str =
    "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api";

/// Where the request came in: the API base URL (with `/api/v3` under GHES layout) and
/// the path and query as sent, for `Link` headers.
#[derive(Clone, Debug)]
pub(crate) struct RequestInfo {
    pub origin: String,
    pub api_base: String,
    pub path: String,
}

fn rest_routes() -> Router<GithubSim> {
    Router::new()
        .route(
            "/repos/{owner}/{repo}/issues/{number}",
            get(rest::get_issue),
        )
        .route(
            "/repos/{owner}/{repo}/issues/{number}/timeline",
            get(rest::timeline),
        )
        .route(
            "/repos/{owner}/{repo}/issues/{number}/comments",
            get(rest::list_comments).post(rest::create_comment),
        )
        .route("/repos/{owner}/{repo}/pulls/{number}", get(rest::get_pull))
        .route(
            "/agents/repos/{owner}/{repo}/tasks",
            get(tasks::list).post(tasks::create),
        )
        .route(
            "/agents/repos/{owner}/{repo}/tasks/{task_id}",
            get(tasks::get_in_repo),
        )
        .route("/agents/tasks/{task_id}", get(tasks::get))
        .route("/user", get(viewer))
        .route("/rate_limit", get(rate_limit))
}

/// All routes of the emulator.
pub(crate) fn router(sim: GithubSim) -> Router {
    Router::new()
        .route("/graphql", post(graphql::handler))
        .route("/api/graphql", post(graphql::handler))
        .merge(rest_routes())
        .nest("/api/v3", rest_routes())
        .fallback(not_found)
        .method_not_allowed_fallback(not_found)
        .layer(middleware::from_fn_with_state(sim.clone(), front_door))
        .with_state(sim)
}

async fn not_found() -> RestError {
    RestError::not_found()
}

/// Whether `Authorization` carries the token (`bearer` or `token`, any case).
fn authorized(headers: &HeaderMap, token: &str) -> bool {
    let Some(value) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let Some((scheme, given)) = value.trim().split_once(' ') else {
        return false;
    };
    (scheme.eq_ignore_ascii_case("bearer") || scheme.eq_ignore_ascii_case("token"))
        && given.trim() == token
}

fn set_header(response: &mut Response, name: &'static str, value: String) {
    if let Ok(v) = HeaderValue::from_str(&value) {
        response.headers_mut().insert(name, v);
    }
}

fn rate_headers(response: &mut Response, bucket: Bucket, resource: &str) {
    set_header(response, "x-ratelimit-limit", bucket.limit.to_string());
    set_header(
        response,
        "x-ratelimit-remaining",
        bucket.remaining().to_string(),
    );
    set_header(response, "x-ratelimit-used", bucket.used.to_string());
    set_header(response, "x-ratelimit-reset", bucket.reset.to_string());
    set_header(response, "x-ratelimit-resource", resource.to_owned());
}

/// The primary-limit response of a resource.
fn rate_limited(graphql: bool) -> Response {
    if graphql {
        Json(json!({
            "errors": [{
                "type": "RATE_LIMITED",
                "code": "graphql_rate_limit",
                "message": "API rate limit exceeded for user ID 1.",
            }]
        }))
        .into_response()
    } else {
        RestError::new(
            StatusCode::FORBIDDEN,
            "API rate limit exceeded for user ID 1. If you reach out to GitHub Support for \
             help, please include the request ID.",
            REST_PRIMARY_DOCS,
        )
        .into_response()
    }
}

fn fault_response(fault: GithubFault, graphql: bool, docs: &str) -> Response {
    match fault {
        GithubFault::Ok => RestError::server_error().into_response(),
        GithubFault::ServerError => RestError::server_error().into_response(),
        GithubFault::BadCredentials => RestError::bad_credentials(docs).into_response(),
        GithubFault::SecondaryRateLimit => if graphql {
            RestError::secondary_limit(StatusCode::FORBIDDEN, GRAPHQL_SECONDARY_DOCS)
        } else {
            RestError::secondary_limit(StatusCode::TOO_MANY_REQUESTS, REST_SECONDARY_DOCS)
        }
        .into_response(),
        GithubFault::RateLimited => rate_limited(graphql),
    }
}

async fn front_door(State(sim): State<GithubSim>, request: Request, next: Next) -> Response {
    let delay = sim.faults().delay();
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    let path = request.uri().path().to_owned();
    let graphql = path == "/graphql" || path == "/api/graphql";
    let docs = if graphql { GRAPHQL_DOCS } else { REST_DOCS };
    let resource = if graphql { "graphql" } else { "core" };

    let bucket_now = |sim: &GithubSim| {
        let mut st = sim.state();
        let bucket = if graphql {
            &mut st.graphql_bucket
        } else {
            &mut st.core_bucket
        };
        bucket.refresh();
        *bucket
    };

    let (mut parts, body) = request.into_parts();
    let (mut response, zero_until) = 'outcome: {
        let bytes = match axum::body::to_bytes(body, MAX_BODY).await {
            Ok(b) => b,
            Err(_) => break 'outcome (RestError::too_large(MAX_BODY).into_response(), None),
        };
        let config = sim.config();
        if !std::iter::once(&config.token)
            .chain(&config.more_tokens)
            .any(|token| authorized(&parts.headers, token))
        {
            break 'outcome (RestError::bad_credentials(docs).into_response(), None);
        }
        if let Some(fault) = sim.faults().next_fault() {
            sim.state().stats.faults_injected += 1;
            let zero = (fault == GithubFault::RateLimited).then(|| epoch_now() + 60);
            break 'outcome (fault_response(fault, graphql, docs), zero);
        }
        if let Some(reset) = sim.faults().primary_limited_until() {
            sim.state().stats.faults_injected += 1;
            break 'outcome (rate_limited(graphql), Some(reset));
        }
        {
            let mut st = sim.state();
            let bucket = if graphql {
                &mut st.graphql_bucket
            } else {
                &mut st.core_bucket
            };
            bucket.refresh();
            if bucket.remaining() == 0 {
                let reset = bucket.reset;
                drop(st);
                break 'outcome (rate_limited(graphql), Some(reset));
            }
            bucket.used += 1;
        }
        let host = parts
            .headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .or_else(|| parts.uri.authority().map(|a| a.as_str()))
            .unwrap_or("127.0.0.1")
            .to_owned();
        let prefix = if path.starts_with("/api/v3/") {
            "/api/v3"
        } else {
            ""
        };
        parts.extensions.insert(RequestInfo {
            origin: format!("http://{host}"),
            api_base: format!("http://{host}{prefix}"),
            path: path.clone(),
        });
        let write = if graphql {
            is_mutation(&bytes)
        } else {
            parts.method != axum::http::Method::GET
        };
        let response = next
            .run(Request::from_parts(parts, Body::from(bytes)))
            .await;
        if response.status().is_success() && sim.faults().lose_answer(write) {
            // The request was handled (a mutation's effect stays); only the answer is lost.
            sim.state().stats.answers_lost += 1;
            break 'outcome (RestError::server_error().into_response(), None);
        }
        (response, None)
    };

    if path.contains("/agents/") && response.status().as_u16() >= 400 {
        response = without_status_field(response).await;
    }
    let mut bucket = bucket_now(&sim);
    if let Some(reset) = zero_until {
        bucket.used = bucket.limit;
        bucket.reset = reset;
    }
    rate_headers(&mut response, bucket, resource);
    set_header(
        &mut response,
        "x-github-request-id",
        node_id("REQ", rand::random::<u32>().into()),
    );
    response
}

/// The agent tasks API documents its error bodies as `message` and
/// `documentation_url` (plus `errors`), without the `status` the classic
/// endpoints add: the front door's own errors (auth, faults, limits) follow.
async fn without_status_field(response: Response) -> Response {
    let (parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_BODY).await else {
        return Response::from_parts(parts, Body::empty());
    };
    let body = match serde_json::from_slice::<serde_json::Value>(&bytes) {
        Ok(mut value) => {
            if let Some(object) = value.as_object_mut() {
                object.remove("status");
            }
            Body::from(value.to_string())
        }
        Err(_) => Body::from(bytes),
    };
    let mut response = Response::from_parts(parts, body);
    response.headers_mut().remove(header::CONTENT_LENGTH);
    response
}

/// Whether a GraphQL request body is a mutation (for losing write answers;
/// a body that does not parse is handled, and refused, by the endpoint).
fn is_mutation(body: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.get("query")?.as_str().map(str::to_owned))
        .is_some_and(|q| q.trim_start().starts_with("mutation"))
}

async fn viewer(
    State(sim): State<GithubSim>,
    axum::Extension(info): axum::Extension<RequestInfo>,
) -> Json<serde_json::Value> {
    let st = sim.state();
    let bases = rest::bases(&sim, &info);
    Json(super::wire::user(&st, &st.viewer, &bases))
}

async fn rate_limit(State(sim): State<GithubSim>) -> Json<serde_json::Value> {
    let st = sim.state();
    let shape = |b: &Bucket| json!({ "limit": b.limit, "used": b.used, "remaining": b.remaining(), "reset": b.reset });
    Json(json!({
        "resources": { "core": shape(&st.core_bucket), "graphql": shape(&st.graphql_bucket) },
        "rate": shape(&st.core_bucket),
    }))
}
