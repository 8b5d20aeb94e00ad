//! REST shapes: users (Copilot's REST actor), issues, pull requests, comments, timeline
//! events, and GitHub's REST error bodies.

use axum::Json;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::ids::iso;
use super::state::{Event, EventKind, Item, ItemState, Repo, State};
use super::{COPILOT_BOT_ID, COPILOT_DATABASE_ID, COPILOT_LOGIN, COPILOT_REST_LOGIN};

/// The REST documentation URL in error bodies.
pub(crate) const REST_DOCS: &str = "https://docs.github.com/rest";
/// The GraphQL documentation URL in error bodies.
pub(crate) const GRAPHQL_DOCS: &str = "https://docs.github.com/graphql";

/// A REST (or front-door) error response.
#[derive(Debug)]
pub(crate) struct RestError {
    pub status: StatusCode,
    pub body: Value,
    pub retry_after: bool,
}

impl RestError {
    pub fn new(status: StatusCode, message: &str, docs: &str) -> Self {
        Self {
            status,
            body: json!({
                "message": message,
                "documentation_url": docs,
                "status": status.as_u16().to_string(),
            }),
            retry_after: false,
        }
    }

    pub fn not_found() -> Self {
        Self::new(StatusCode::NOT_FOUND, "Not Found", REST_DOCS)
    }

    pub fn bad_credentials(docs: &str) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "Bad credentials", docs)
    }

    pub fn problems_parsing_json() -> Self {
        Self::new(StatusCode::BAD_REQUEST, "Problems parsing JSON", REST_DOCS)
    }

    pub fn too_large(limit: usize) -> Self {
        Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            &format!("Payload too large: the body must be at most {limit} bytes"),
            REST_DOCS,
        )
    }

    pub fn server_error() -> Self {
        Self {
            status: StatusCode::BAD_GATEWAY,
            body: json!({ "message": "Server Error" }),
            retry_after: false,
        }
    }

    pub fn secondary_limit(status: StatusCode, docs: &str) -> Self {
        Self {
            status,
            body: json!({
                "message": "You have exceeded a secondary rate limit. Please wait a few minutes \
                            before you try again. If you reach out to GitHub Support for help, \
                            please include the request ID.",
                "documentation_url": docs,
                "status": status.as_u16().to_string(),
            }),
            retry_after: true,
        }
    }

    pub fn validation_failed(resource: &str, field: &str, docs: &str) -> Self {
        Self {
            status: StatusCode::UNPROCESSABLE_ENTITY,
            body: json!({
                "message": "Validation Failed",
                "errors": [{ "resource": resource, "code": "missing_field", "field": field }],
                "documentation_url": docs,
                "status": "422",
            }),
            retry_after: false,
        }
    }
}

impl IntoResponse for RestError {
    fn into_response(self) -> Response {
        let mut response = (self.status, Json(self.body)).into_response();
        if self.retry_after {
            response
                .headers_mut()
                .insert("retry-after", HeaderValue::from_static("1"));
        }
        response
    }
}

/// Where links point: the API base (from the request) and the HTML base (config).
#[derive(Clone, Debug)]
pub(crate) struct Bases {
    pub api: String,
    pub html: String,
}

/// A REST user object (Copilot's bot as REST shows it).
pub(crate) fn user(st: &State, login: &str, bases: &Bases) -> Value {
    if login == COPILOT_LOGIN {
        return json!({
            "login": COPILOT_REST_LOGIN,
            "id": COPILOT_DATABASE_ID,
            "node_id": COPILOT_BOT_ID,
            "avatar_url": "https://avatars.githubusercontent.com/in/1143301?v=4",
            "url": format!("{}/users/Copilot", bases.api),
            "html_url": "https://github.com/apps/copilot-swe-agent",
            "type": "Bot",
            "site_admin": false,
        });
    }
    let (id, node_id) = st
        .users
        .get(login)
        .map_or((0, String::new()), |a| (a.db_id, a.node_id.clone()));
    json!({
        "login": login,
        "id": id,
        "node_id": node_id,
        "avatar_url": format!("https://avatars.githubusercontent.com/u/{id}?v=4"),
        "url": format!("{}/users/{login}", bases.api),
        "html_url": format!("{}/{login}", bases.html),
        "type": "User",
        "site_admin": false,
    })
}

/// The HTML URL of an issue or pull request.
pub(crate) fn html_url(repo: &Repo, item: &Item, html: &str) -> String {
    let kind = if item.pr.is_some() { "pull" } else { "issues" };
    format!("{html}/{}/{kind}/{}", repo.full_name(), item.number)
}

fn rest_state(state: ItemState) -> &'static str {
    match state {
        ItemState::Open => "open",
        ItemState::Closed | ItemState::Merged => "closed",
    }
}

/// An issue object (pull requests carry `pull_request` links), as in issue lists and
/// cross-reference sources.
pub(crate) fn issue(st: &State, repo: &Repo, item: &Item, bases: &Bases) -> Value {
    let api = format!("{}/repos/{}", bases.api, repo.full_name());
    let mut v = json!({
        "id": item.db_id,
        "node_id": item.node_id,
        "url": format!("{api}/issues/{}", item.number),
        "html_url": html_url(repo, item, &bases.html),
        "number": item.number,
        "state": rest_state(item.state),
        "title": item.title,
        "body": item.body,
        "user": user(st, &item.author, bases),
        "assignees": item.assignees.iter().map(|a| user(st, a, bases)).collect::<Vec<_>>(),
        "comments": item.timeline.iter().filter(|e| matches!(e.kind, EventKind::Comment { .. })).count(),
        "created_at": iso(item.created_at),
        "updated_at": iso(item.updated_at),
        "closed_at": item.closed_at.map(iso),
    });
    if let Some(pr) = &item.pr {
        v["draft"] = json!(pr.draft);
        v["pull_request"] = json!({
            "url": format!("{api}/pulls/{}", item.number),
            "html_url": html_url(repo, item, &bases.html),
            "merged_at": pr.merged_at.map(iso),
        });
    }
    v
}

/// A pull request object (`GET /repos/{owner}/{repo}/pulls/{number}`).
pub(crate) fn pull(st: &State, repo: &Repo, item: &Item, bases: &Bases) -> Value {
    let api = format!("{}/repos/{}", bases.api, repo.full_name());
    let (draft, head, base, merged_at) = item.pr.as_ref().map_or_else(
        || (false, String::new(), String::new(), None),
        |p| (p.draft, p.head_ref.clone(), p.base_ref.clone(), p.merged_at),
    );
    let branch = |r: &str| {
        json!({
            "label": format!("{}:{r}", repo.owner),
            "ref": r,
            "sha": format!("{:040x}", item.db_id),
            "repo": { "id": repo.db_id, "node_id": repo.node_id, "name": repo.name, "full_name": repo.full_name() },
        })
    };
    json!({
        "id": item.db_id,
        "node_id": item.node_id,
        "url": format!("{api}/pulls/{}", item.number),
        "html_url": html_url(repo, item, &bases.html),
        "issue_url": format!("{api}/issues/{}", item.number),
        "number": item.number,
        "state": rest_state(item.state),
        "title": item.title,
        "body": item.body,
        "draft": draft,
        "merged": item.state == ItemState::Merged,
        "merged_at": merged_at.map(iso),
        "user": user(st, &item.author, bases),
        "assignees": item.assignees.iter().map(|a| user(st, a, bases)).collect::<Vec<_>>(),
        "head": branch(&head),
        "base": branch(&base),
        "created_at": iso(item.created_at),
        "updated_at": iso(item.updated_at),
        "closed_at": item.closed_at.map(iso),
    })
}

/// An issue comment (REST comments endpoints and `commented` timeline events).
pub(crate) fn comment(st: &State, repo: &Repo, item: &Item, event: &Event, bases: &Bases) -> Value {
    let body = match &event.kind {
        EventKind::Comment { body, .. } => body.as_str(),
        _ => "",
    };
    let updated = match &event.kind {
        EventKind::Comment { updated_at, .. } => *updated_at,
        _ => event.created_at,
    };
    json!({
        "id": event.db_id,
        "node_id": event.node_id,
        "url": format!("{}/repos/{}/issues/comments/{}", bases.api, repo.full_name(), event.db_id),
        "html_url": format!("{}#issuecomment-{}", html_url(repo, item, &bases.html), event.db_id),
        "issue_url": format!("{}/repos/{}/issues/{}", bases.api, repo.full_name(), item.number),
        "body": body,
        "user": user(st, &event.actor, bases),
        "author_association": if event.actor == st.viewer { "OWNER" } else { "NONE" },
        "created_at": iso(event.created_at),
        "updated_at": iso(updated),
    })
}

/// A timeline event as `GET /repos/{owner}/{repo}/issues/{number}/timeline` shows it.
pub(crate) fn timeline_event(
    st: &State,
    repo: &Repo,
    item: &Item,
    event: &Event,
    bases: &Bases,
) -> Value {
    let actor = user(st, &event.actor, bases);
    let name = event.kind.rest_name();
    match &event.kind {
        EventKind::Comment { .. } => {
            let mut v = comment(st, repo, item, event, bases);
            v["event"] = json!(name);
            v["actor"] = actor;
            v
        }
        EventKind::CrossReferenced { source, .. } => {
            let source = repo
                .items
                .get(source)
                .map(|s| issue(st, repo, s, bases))
                .unwrap_or(Value::Null);
            json!({
                "event": name,
                "actor": actor,
                "created_at": iso(event.created_at),
                "updated_at": iso(event.created_at),
                "source": { "type": "issue", "issue": source },
            })
        }
        EventKind::Assigned { assignee } | EventKind::Unassigned { assignee } => json!({
            "id": event.db_id,
            "node_id": event.node_id,
            "url": format!("{}/repos/{}/issues/events/{}", bases.api, repo.full_name(), event.db_id),
            "event": name,
            "actor": actor,
            "assignee": user(st, assignee, bases),
            "commit_id": null,
            "created_at": iso(event.created_at),
        }),
        _ => json!({
            "id": event.db_id,
            "node_id": event.node_id,
            "url": format!("{}/repos/{}/issues/events/{}", bases.api, repo.full_name(), event.db_id),
            "event": name,
            "actor": actor,
            "commit_id": null,
            "created_at": iso(event.created_at),
        }),
    }
}
