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
    pub(super) fn new(status: StatusCode, message: &str, docs: &str) -> Self {
        Self {
            status,
            // `status` is documented (optional) for the classic endpoints; the
            // front door drops it on the agent tasks endpoints, which do not
            // document it.
            body: json!({
                "message": message,
                "documentation_url": docs,
                "status": status.as_u16().to_string(),
            }),
            retry_after: false,
        }
    }

    pub(super) fn not_found() -> Self {
        Self::new(StatusCode::NOT_FOUND, "Not Found", REST_DOCS)
    }

    pub(super) fn bad_credentials(docs: &str) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "Bad credentials", docs)
    }

    pub(super) fn problems_parsing_json() -> Self {
        Self::new(StatusCode::BAD_REQUEST, "Problems parsing JSON", REST_DOCS)
    }

    pub(super) fn too_large(limit: usize) -> Self {
        Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            &format!("Payload too large: the body must be at most {limit} bytes"),
            REST_DOCS,
        )
    }

    pub(super) fn server_error() -> Self {
        Self {
            status: StatusCode::BAD_GATEWAY,
            body: json!({ "message": "Server Error" }),
            retry_after: false,
        }
    }

    pub(super) fn secondary_limit(status: StatusCode, docs: &str) -> Self {
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

    pub(super) fn validation_failed(resource: &str, field: &str, docs: &str) -> Self {
        Self {
            status: StatusCode::UNPROCESSABLE_ENTITY,
            body: json!({
                "message": "Validation Failed",
                "errors": [{ "resource": resource, "code": "missing_field", "field": field }],
                "documentation_url": docs,
            }),
            retry_after: false,
        }
    }

    /// A 422 in the agent tasks API's documented shape: its errors carry a
    /// `code` and, for `custom`, a `message`.
    pub(super) fn custom_invalid(message: &str, docs: &str) -> Self {
        Self {
            status: StatusCode::UNPROCESSABLE_ENTITY,
            body: json!({
                "message": "Validation Failed",
                "errors": [{ "code": "custom", "message": message }],
                "documentation_url": docs,
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

/// A REST user object (`simple-user`; Copilot's bot as REST shows it), with
/// every field GitHub's description requires.
pub(crate) fn user(st: &State, login: &str, bases: &Bases) -> Value {
    let (shown, id, node_id, avatar, html, kind) = if login == COPILOT_LOGIN {
        (
            COPILOT_REST_LOGIN.to_owned(),
            COPILOT_DATABASE_ID,
            COPILOT_BOT_ID.to_owned(),
            "https://avatars.githubusercontent.com/in/1143301?v=4".to_owned(),
            "https://github.com/apps/copilot-swe-agent".to_owned(),
            "Bot",
        )
    } else {
        let (id, node_id) = st
            .users
            .get(login)
            .map_or((0, String::new()), |a| (a.db_id, a.node_id.clone()));
        (
            login.to_owned(),
            id,
            node_id,
            format!("https://avatars.githubusercontent.com/u/{id}?v=4"),
            format!("{}/{login}", bases.html),
            "User",
        )
    };
    let url = format!("{}/users/{shown}", bases.api);
    json!({
        "login": shown,
        "id": id,
        "node_id": node_id,
        "avatar_url": avatar,
        "gravatar_id": "",
        "url": url,
        "html_url": html,
        "followers_url": format!("{url}/followers"),
        "following_url": format!("{url}/following{{/other_user}}"),
        "gists_url": format!("{url}/gists{{/gist_id}}"),
        "starred_url": format!("{url}/starred{{/owner}}{{/repo}}"),
        "subscriptions_url": format!("{url}/subscriptions"),
        "organizations_url": format!("{url}/orgs"),
        "repos_url": format!("{url}/repos"),
        "events_url": format!("{url}/events{{/privacy}}"),
        "received_events_url": format!("{url}/received_events"),
        "type": kind,
        "user_view_type": "public",
        "site_admin": false,
    })
}

/// A repository object (`repository`), as the `head` and `base` of a pull
/// request carry it.
pub(crate) fn repository(st: &State, repo: &Repo, bases: &Bases) -> Value {
    let full = repo.full_name();
    let api = format!("{}/repos/{full}", bases.api);
    let html = format!("{}/{full}", bases.html);
    let host = bases.html.split("://").nth(1).unwrap_or("github.com");
    let open = repo
        .items
        .values()
        .filter(|i| i.state == ItemState::Open)
        .count();
    let created = repo.items.values().map(|i| i.created_at).min().map(iso);
    let mut v = json!({
        "id": repo.db_id,
        "node_id": repo.node_id,
        "name": repo.name,
        "full_name": full,
        "owner": user(st, &repo.owner, bases),
        "private": false,
        "html_url": html,
        "description": null,
        "fork": false,
        "url": api,
        "homepage": null,
        "language": null,
        "mirror_url": null,
        "license": null,
        "default_branch": repo.default_branch,
        "archived": false,
        "disabled": false,
        "visibility": "public",
        "forks": 0,
        "forks_count": 0,
        "open_issues": open,
        "open_issues_count": open,
        "stargazers_count": 0,
        "watchers": 0,
        "watchers_count": 0,
        "size": 0,
        "has_issues": true,
        "has_projects": false,
        "has_wiki": false,
        "has_pages": false,
        "has_downloads": false,
        "pushed_at": created,
        "created_at": created,
        "updated_at": created,
        "clone_url": format!("{html}.git"),
        "git_url": format!("git://{host}/{full}.git"),
        "ssh_url": format!("git@{host}:{full}.git"),
        "svn_url": html,
    });
    for (field, tail) in [
        ("archive_url", "/{archive_format}{/ref}"),
        ("assignees_url", "/assignees{/user}"),
        ("blobs_url", "/git/blobs{/sha}"),
        ("branches_url", "/branches{/branch}"),
        ("collaborators_url", "/collaborators{/collaborator}"),
        ("comments_url", "/comments{/number}"),
        ("commits_url", "/commits{/sha}"),
        ("compare_url", "/compare/{base}...{head}"),
        ("contents_url", "/contents/{+path}"),
        ("contributors_url", "/contributors"),
        ("deployments_url", "/deployments"),
        ("downloads_url", "/downloads"),
        ("events_url", "/events"),
        ("forks_url", "/forks"),
        ("git_commits_url", "/git/commits{/sha}"),
        ("git_refs_url", "/git/refs{/sha}"),
        ("git_tags_url", "/git/tags{/sha}"),
        ("hooks_url", "/hooks"),
        ("issue_comment_url", "/issues/comments{/number}"),
        ("issue_events_url", "/issues/events{/number}"),
        ("issues_url", "/issues{/number}"),
        ("keys_url", "/keys{/key_id}"),
        ("labels_url", "/labels{/name}"),
        ("languages_url", "/languages"),
        ("merges_url", "/merges"),
        ("milestones_url", "/milestones{/number}"),
        (
            "notifications_url",
            "/notifications{?since,all,participating}",
        ),
        ("pulls_url", "/pulls{/number}"),
        ("releases_url", "/releases{/id}"),
        ("stargazers_url", "/stargazers"),
        ("statuses_url", "/statuses/{sha}"),
        ("subscribers_url", "/subscribers"),
        ("subscription_url", "/subscription"),
        ("tags_url", "/tags"),
        ("teams_url", "/teams"),
        ("trees_url", "/git/trees{/sha}"),
    ] {
        v[field] = json!(format!("{api}{tail}"));
    }
    v
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

/// An issue object (`issue`; pull requests carry `pull_request` links), as in
/// cross-reference sources.
pub(crate) fn issue(st: &State, repo: &Repo, item: &Item, bases: &Bases) -> Value {
    let api = format!("{}/repos/{}", bases.api, repo.full_name());
    let url = format!("{api}/issues/{}", item.number);
    let assignees: Vec<Value> = item.assignees.iter().map(|a| user(st, a, bases)).collect();
    let mut v = json!({
        "id": item.db_id,
        "node_id": item.node_id,
        "url": url,
        "repository_url": api,
        "labels_url": format!("{url}/labels{{/name}}"),
        "comments_url": format!("{url}/comments"),
        "events_url": format!("{url}/events"),
        "timeline_url": format!("{url}/timeline"),
        "html_url": html_url(repo, item, &bases.html),
        "number": item.number,
        "state": rest_state(item.state),
        "title": item.title,
        "body": item.body,
        "user": user(st, &item.author, bases),
        "labels": [],
        "assignee": assignees.first().cloned().unwrap_or(Value::Null),
        "assignees": assignees,
        "milestone": null,
        "locked": false,
        "active_lock_reason": null,
        "comments": comment_count(item),
        "author_association": association(st, &item.author),
        "created_at": iso(item.created_at),
        "updated_at": iso(item.updated_at),
        "closed_at": item.closed_at.map(iso),
    });
    if let Some(pr) = &item.pr {
        v["draft"] = json!(pr.draft);
        v["pull_request"] = json!({
            "url": format!("{api}/pulls/{}", item.number),
            "html_url": html_url(repo, item, &bases.html),
            "diff_url": format!("{}.diff", html_url(repo, item, &bases.html)),
            "patch_url": format!("{}.patch", html_url(repo, item, &bases.html)),
            "merged_at": pr.merged_at.map(iso),
        });
    }
    v
}

fn comment_count(item: &Item) -> usize {
    item.timeline
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Comment { .. }))
        .count()
}

/// `author_association`: the viewer owns the emulated repositories.
fn association(st: &State, login: &str) -> &'static str {
    if login == st.viewer { "OWNER" } else { "NONE" }
}

/// A pull request object (`pull-request`, `GET /repos/{owner}/{repo}/pulls/{pull_number}`).
/// Diff statistics are not simulated: they read zero.
pub(crate) fn pull(st: &State, repo: &Repo, item: &Item, bases: &Bases) -> Value {
    let api = format!("{}/repos/{}", bases.api, repo.full_name());
    let url = format!("{api}/pulls/{}", item.number);
    let html = html_url(repo, item, &bases.html);
    let issue_url = format!("{api}/issues/{}", item.number);
    let (draft, head, base, merged_at) = item.pr.as_ref().map_or_else(
        || (false, String::new(), String::new(), None),
        |p| (p.draft, p.head_ref.clone(), p.base_ref.clone(), p.merged_at),
    );
    let sha = format!("{:040x}", item.db_id);
    let branch = |r: &str| {
        json!({
            "label": format!("{}:{r}", repo.owner),
            "ref": r,
            "sha": sha,
            "user": user(st, &repo.owner, bases),
            "repo": repository(st, repo, bases),
        })
    };
    let merged = item.state == ItemState::Merged;
    let assignees: Vec<Value> = item.assignees.iter().map(|a| user(st, a, bases)).collect();
    let link = |href: String| json!({ "href": href });
    let links = json!({
        "self": link(url.clone()),
        "html": link(html.clone()),
        "issue": link(issue_url.clone()),
        "comments": link(format!("{issue_url}/comments")),
        "review_comments": link(format!("{url}/comments")),
        "review_comment": link(format!("{api}/pulls/comments{{/number}}")),
        "commits": link(format!("{url}/commits")),
        "statuses": link(format!("{api}/statuses/{sha}")),
    });
    json!({
        "id": item.db_id,
        "node_id": item.node_id,
        "url": url,
        "html_url": html,
        "diff_url": format!("{html}.diff"),
        "patch_url": format!("{html}.patch"),
        "issue_url": issue_url,
        "commits_url": format!("{url}/commits"),
        "review_comments_url": format!("{url}/comments"),
        "review_comment_url": format!("{api}/pulls/comments{{/number}}"),
        "comments_url": format!("{issue_url}/comments"),
        "statuses_url": format!("{api}/statuses/{sha}"),
        "number": item.number,
        "state": rest_state(item.state),
        "locked": false,
        "title": item.title,
        "user": user(st, &item.author, bases),
        "body": item.body,
        "labels": [],
        "milestone": null,
        "active_lock_reason": null,
        "created_at": iso(item.created_at),
        "updated_at": iso(item.updated_at),
        "closed_at": item.closed_at.map(iso),
        "merged_at": merged_at.map(iso),
        "merge_commit_sha": merged.then(|| sha.clone()),
        "assignee": assignees.first().cloned().unwrap_or(Value::Null),
        "assignees": assignees,
        "requested_reviewers": [],
        "requested_teams": [],
        "head": branch(&head),
        "base": branch(&base),
        "_links": links,
        "author_association": association(st, &item.author),
        "auto_merge": null,
        "draft": draft,
        "merged": merged,
        "mergeable": null,
        "mergeable_state": "unknown",
        "merged_by": null,
        "comments": comment_count(item),
        "review_comments": 0,
        "maintainer_can_modify": false,
        "commits": 1,
        "additions": 0,
        "deletions": 0,
        "changed_files": 0,
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
        "author_association": association(st, &event.actor),
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
            "commit_url": null,
            "created_at": iso(event.created_at),
            "performed_via_github_app": null,
        }),
        _ => json!({
            "id": event.db_id,
            "node_id": event.node_id,
            "url": format!("{}/repos/{}/issues/events/{}", bases.api, repo.full_name(), event.db_id),
            "event": name,
            "actor": actor,
            "commit_id": null,
            "commit_url": null,
            "created_at": iso(event.created_at),
            "performed_via_github_app": null,
        }),
    }
}
