//! REST handlers for issues, pull requests, timelines and comments, and the pagination
//! helpers (`per_page` ≤ 100, `page`, `Link` header) shared with `tasks`.

use axum::Extension;
use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::GithubSim;
use super::agent;
use super::ids::parse_iso;
use super::routes::RequestInfo;
use super::state::{EventKind, repo_key};
use super::wire::{self, Bases, RestError};

const COMMENT_DOCS: &str = "https://docs.github.com/rest/issues/comments#create-an-issue-comment";

pub(crate) fn bases(sim: &GithubSim, info: &RequestInfo) -> Bases {
    Bases {
        api: info.api_base.clone(),
        html: sim.config().html_base_url.trim_end_matches('/').to_owned(),
    }
}

pub(crate) fn count(sim: &GithubSim, label: &str) {
    *sim.state()
        .stats
        .rest_requests
        .entry(label.to_owned())
        .or_default() += 1;
}

/// Keeps a REST write's parsed body for [`Stats::rest_bodies`](super::Stats).
pub(crate) fn record_body(sim: &GithubSim, label: &str, body: &Value) {
    sim.state()
        .stats
        .rest_bodies
        .push((label.to_owned(), body.clone()));
}

/// The query parameters, in order.
pub(crate) fn params(raw: Option<&str>) -> Vec<(String, String)> {
    form_urlencoded::parse(raw.unwrap_or_default().as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

pub(crate) fn param<'a>(params: &'a [(String, String)], name: &str) -> Option<&'a str> {
    params
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// One page of `all` per `per_page` (default 30, at most 100) and `page` (from 1), and
/// the `Link` header value when there is more than one page.
pub(crate) fn paginate<T>(
    all: Vec<T>,
    params: &[(String, String)],
    info: &RequestInfo,
) -> (Vec<T>, Option<String>) {
    let per_page = param(params, "per_page")
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|n| *n > 0)
        .unwrap_or(30)
        .min(100);
    let page = param(params, "page")
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|n| *n > 0)
        .unwrap_or(1);
    let total = all.len();
    let last = total.div_ceil(per_page).max(1);
    let items: Vec<T> = all
        .into_iter()
        .skip((page - 1).saturating_mul(per_page))
        .take(per_page)
        .collect();
    if last <= 1 {
        return (items, None);
    }
    let url = |n: usize| {
        let mut query = form_urlencoded::Serializer::new(String::new());
        for (k, v) in params
            .iter()
            .filter(|(k, _)| k != "page" && k != "per_page")
        {
            query.append_pair(k, v);
        }
        query.append_pair("page", &n.to_string());
        query.append_pair("per_page", &per_page.to_string());
        format!("<{}{}?{}>", info.origin, info.path, query.finish())
    };
    let mut links = Vec::new();
    if page > 1 {
        links.push(format!("{}; rel=\"prev\"", url((page - 1).min(last))));
    }
    if page < last {
        links.push(format!("{}; rel=\"next\"", url(page + 1)));
        links.push(format!("{}; rel=\"last\"", url(last)));
    }
    if page > 1 {
        links.push(format!("{}; rel=\"first\"", url(1)));
    }
    (items, (!links.is_empty()).then(|| links.join(", ")))
}

/// A JSON response with an optional `Link` header.
pub(crate) fn with_link(status: StatusCode, body: Value, link: Option<String>) -> Response {
    let mut response = (status, Json(body)).into_response();
    if let Some(link) = link.and_then(|l| HeaderValue::from_str(&l).ok()) {
        response.headers_mut().insert(header::LINK, link);
    }
    response
}

type ItemPath = Result<Path<(String, String, String)>, PathRejection>;

fn item_path(path: ItemPath) -> Result<(String, u64), RestError> {
    let Path((owner, repo, number)) = path.map_err(|_| RestError::not_found())?;
    let number = number.parse().map_err(|_| RestError::not_found())?;
    Ok((repo_key(&owner, &repo), number))
}

pub(crate) async fn get_issue(
    State(sim): State<GithubSim>,
    Extension(info): Extension<RequestInfo>,
    path: ItemPath,
) -> Result<Json<Value>, RestError> {
    count(&sim, "GET /repos/{owner}/{repo}/issues/{issue_number}");
    let (key, number) = item_path(path)?;
    let bases = bases(&sim, &info);
    let st = sim.state();
    let repo = st.repos.get(&key).ok_or_else(RestError::not_found)?;
    let item = repo.items.get(&number).ok_or_else(RestError::not_found)?;
    Ok(Json(wire::issue(&st, repo, item, &bases)))
}

pub(crate) async fn get_pull(
    State(sim): State<GithubSim>,
    Extension(info): Extension<RequestInfo>,
    path: ItemPath,
) -> Result<Json<Value>, RestError> {
    count(&sim, "GET /repos/{owner}/{repo}/pulls/{pull_number}");
    let (key, number) = item_path(path)?;
    let bases = bases(&sim, &info);
    let st = sim.state();
    let repo = st.repos.get(&key).ok_or_else(RestError::not_found)?;
    let item = repo
        .items
        .get(&number)
        .filter(|i| i.pr.is_some())
        .ok_or_else(RestError::not_found)?;
    Ok(Json(wire::pull(&st, repo, item, &bases)))
}

pub(crate) async fn timeline(
    State(sim): State<GithubSim>,
    Extension(info): Extension<RequestInfo>,
    path: ItemPath,
    RawQuery(raw): RawQuery,
) -> Result<Response, RestError> {
    count(
        &sim,
        "GET /repos/{owner}/{repo}/issues/{issue_number}/timeline",
    );
    let (key, number) = item_path(path)?;
    let params = params(raw.as_deref());
    let bases = bases(&sim, &info);
    let st = sim.state();
    let repo = st.repos.get(&key).ok_or_else(RestError::not_found)?;
    let item = repo.items.get(&number).ok_or_else(RestError::not_found)?;
    let all: Vec<Value> = item
        .timeline
        .iter()
        .map(|e| wire::timeline_event(&st, repo, item, e, &bases))
        .collect();
    let (page, link) = paginate(all, &params, &info);
    Ok(with_link(StatusCode::OK, Value::Array(page), link))
}

pub(crate) async fn list_comments(
    State(sim): State<GithubSim>,
    Extension(info): Extension<RequestInfo>,
    path: ItemPath,
    RawQuery(raw): RawQuery,
) -> Result<Response, RestError> {
    count(
        &sim,
        "GET /repos/{owner}/{repo}/issues/{issue_number}/comments",
    );
    let (key, number) = item_path(path)?;
    let params = params(raw.as_deref());
    let since = param(&params, "since").and_then(parse_iso);
    let bases = bases(&sim, &info);
    let st = sim.state();
    let repo = st.repos.get(&key).ok_or_else(RestError::not_found)?;
    let item = repo.items.get(&number).ok_or_else(RestError::not_found)?;
    let all: Vec<Value> = item
        .timeline
        .iter()
        .filter(|e| match &e.kind {
            EventKind::Comment { updated_at, .. } => since.is_none_or(|s| *updated_at >= s),
            _ => false,
        })
        .map(|e| wire::comment(&st, repo, item, e, &bases))
        .collect();
    let (page, link) = paginate(all, &params, &info);
    Ok(with_link(StatusCode::OK, Value::Array(page), link))
}

pub(crate) async fn create_comment(
    State(sim): State<GithubSim>,
    Extension(info): Extension<RequestInfo>,
    path: ItemPath,
    body: Bytes,
) -> Result<Response, RestError> {
    const LABEL: &str = "POST /repos/{owner}/{repo}/issues/{issue_number}/comments";
    count(&sim, LABEL);
    let (key, number) = item_path(path)?;
    if sim.state().item(&key, number).is_none() {
        return Err(RestError::not_found());
    }
    let parsed: Value =
        serde_json::from_slice(&body).map_err(|_| RestError::problems_parsing_json())?;
    record_body(&sim, LABEL, &parsed);
    let text = parsed
        .get("body")
        .and_then(Value::as_str)
        .filter(|b| !b.trim().is_empty())
        .ok_or_else(|| RestError::validation_failed("IssueComment", "body", COMMENT_DOCS))?
        .to_owned();
    let bases = bases(&sim, &info);
    let mut st = sim.state();
    let viewer = st.viewer.clone();
    let now = st.now();
    let id = st
        .push_event(
            &key,
            number,
            &viewer,
            EventKind::Comment {
                body: text.clone(),
                updated_at: now,
            },
        )
        .ok_or_else(RestError::not_found)?;
    st.stats.count_comment(&key, number);
    agent::after_comment(&sim, &mut st, &key, number, &text);
    let repo = st.repos.get(&key).ok_or_else(RestError::not_found)?;
    let item = repo.items.get(&number).ok_or_else(RestError::not_found)?;
    let event = item
        .timeline
        .iter()
        .find(|e| e.db_id == id)
        .ok_or_else(RestError::not_found)?;
    let json = wire::comment(&st, repo, item, event, &bases);
    Ok((StatusCode::CREATED, Json(json)).into_response())
}
