//! The GraphQL documents we send and the shapes we read back, REST included.
//!
//! The first three documents are byte for byte what github-mcp-server sends
//! (shurcooL/githubv4's formatting), except that the issue query also reads
//! the issue's number, title, url, state and the assignees' logins.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Copilot's login in GraphQL.
pub const COPILOT_LOGIN: &str = "copilot-swe-agent";
/// Copilot's login in REST events and comments.
pub const COPILOT_REST_LOGIN: &str = "Copilot";

/// Suggested actors, first page (`$endCursor` may be null).
pub const SUGGESTED_ACTORS_FIRST: &str = "query($endCursor:String$name:String!$owner:String!){repository(owner: $owner, name: $name){suggestedActors(first: 100, after: $endCursor, capabilities: CAN_BE_ASSIGNED){nodes{... on Bot{id,login,__typename}},pageInfo{hasNextPage,endCursor}}}}";
/// Suggested actors, later pages.
pub const SUGGESTED_ACTORS_NEXT: &str = "query($endCursor:String!$name:String!$owner:String!){repository(owner: $owner, name: $name){suggestedActors(first: 100, after: $endCursor, capabilities: CAN_BE_ASSIGNED){nodes{... on Bot{id,login,__typename}},pageInfo{hasNextPage,endCursor}}}}";
/// The issue and every assignee. `assignedActors` (GitHub's `Assignee` union),
/// not `assignees`: the public schema types `assignees` as users only, and
/// GitHub returns bots (Copilot among them) in `assignedActors` alone.
pub const ISSUE: &str = "query($name:String!$number:Int!$owner:String!){repository(owner: $owner, name: $name){id,issue(number: $number){id,number,title,url,state,assignedActors(first: 100){nodes{__typename,...on Bot{id,login},...on Mannequin{id,login},...on Organization{id,login},...on User{id,login}}}}}}";
pub const UPDATE_ISSUE: &str =
    "mutation($input:UpdateIssueInput!){updateIssue(input: $input){issue{id,number,url}}}";
pub const REMOVE_ASSIGNEES: &str = "mutation($input:RemoveAssigneesFromAssignableInput!){removeAssigneesFromAssignable(input: $input){clientMutationId}}";

/// The selection for an issue we wait on: Copilot's cross-referenced PRs
/// and comments since the assignment.
pub const WATCH_ISSUE: &str = "issue(number:$i){state,timelineItems(last:50,since:$s,itemTypes:[CROSS_REFERENCED_EVENT,ISSUE_COMMENT]){nodes{__typename,...on CrossReferencedEvent{createdAt,source{__typename,...on PullRequest{number,url,title,state,isDraft,createdAt,author{login}}}},...on IssueComment{createdAt,url,body,author{login}}}}}";
/// The pull request an agent task produced, by the global id its `pull`
/// artifact gives (the Agent tasks API names it by ids only).
pub const PULL_BY_ID: &str = "query($id:ID!){node(id: $id){__typename,...on PullRequest{number,url,title,state,isDraft,headRefName,baseRefName}}}";
/// The selection for a pull request we follow.
pub const WATCH_PULL: &str = "pullRequest(number:$i){number,url,title,state,isDraft,merged,updatedAt,headRefName,baseRefName,timelineItems(last:50,since:$s,itemTypes:[ISSUE_COMMENT,READY_FOR_REVIEW_EVENT,CLOSED_EVENT,MERGED_EVENT]){nodes{__typename,...on IssueComment{createdAt,url,body,author{login}},...on ReadyForReviewEvent{createdAt},...on ClosedEvent{createdAt},...on MergedEvent{createdAt}}}}";

#[derive(Debug, Deserialize)]
pub(crate) struct RawGraphql {
    #[serde(default)]
    pub data: Option<Value>,
    #[serde(default)]
    pub errors: Vec<GraphqlError>,
}

/// One entry of GraphQL `errors`, with GitHub's `type`.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
pub struct GraphqlError {
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
    #[serde(default)]
    pub message: String,
    #[serde(default)]
    pub path: Vec<Value>,
    /// Schema validation errors carry `extensions.code` instead of `type`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extensions: Option<Value>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct RestError {
    #[serde(default)]
    pub message: String,
}

#[derive(Debug, Deserialize)]
pub struct SuggestedActorsData {
    pub repository: Option<SuggestedActorsRepo>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SuggestedActorsRepo {
    pub suggested_actors: Connection<ActorNode>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Connection<T> {
    #[serde(default = "Vec::new")]
    pub nodes: Vec<Option<T>>,
    pub page_info: Option<PageInfo>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PageInfo {
    pub has_next_page: bool,
    pub end_cursor: Option<String>,
}

/// A node of `suggestedActors` (only Bots carry fields: `... on Bot`).
#[derive(Debug, Deserialize)]
pub struct ActorNode {
    pub id: Option<String>,
    pub login: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct IssueData {
    pub repository: Option<IssueRepo>,
}

#[derive(Debug, Deserialize)]
pub struct IssueRepo {
    pub id: String,
    pub issue: Option<IssueNode>,
}

#[derive(Debug, Deserialize)]
pub struct IssueNode {
    pub id: String,
    pub number: i64,
    pub title: String,
    pub url: String,
    pub state: String,
    #[serde(rename = "assignedActors")]
    pub assigned_actors: Connection<Assignee>,
}

/// One of an issue's assignees (`Bot`, `Mannequin`, `Organization`, `User`).
/// A kind the query does not spread on arrives without an id.
#[derive(Debug, Deserialize, Clone)]
pub struct Assignee {
    #[serde(rename = "__typename", default)]
    pub typename: Option<String>,
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub login: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UpdateIssueData {
    pub update_issue: Option<UpdateIssuePayload>,
}

#[derive(Debug, Deserialize)]
pub struct UpdateIssuePayload {
    pub issue: Option<UpdatedIssue>,
}

#[derive(Debug, Deserialize)]
pub struct UpdatedIssue {
    pub id: String,
    pub number: i64,
    pub url: String,
}

/// An author (`author{login}`); null for deleted accounts.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq, Hash)]
pub struct Author {
    pub login: String,
}

/// An item of a watched issue's or pull request's timeline.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq, Hash)]
#[serde(tag = "__typename")]
pub enum TimelineItem {
    #[serde(rename_all = "camelCase")]
    CrossReferencedEvent {
        created_at: String,
        source: Option<CrossReferenceSource>,
    },
    #[serde(rename_all = "camelCase")]
    IssueComment {
        created_at: String,
        url: String,
        body: String,
        author: Option<Author>,
    },
    #[serde(rename_all = "camelCase")]
    ReadyForReviewEvent { created_at: String },
    #[serde(rename_all = "camelCase")]
    ClosedEvent { created_at: String },
    #[serde(rename_all = "camelCase")]
    MergedEvent { created_at: String },
    #[serde(other)]
    Other,
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq, Hash)]
#[serde(tag = "__typename")]
pub enum CrossReferenceSource {
    #[serde(rename_all = "camelCase")]
    PullRequest {
        number: i64,
        url: String,
        title: String,
        state: String,
        is_draft: bool,
        created_at: String,
        author: Option<Author>,
    },
    #[serde(other)]
    Other,
}

/// `nodes` of a connection; null entries (items the token cannot see) are
/// dropped rather than failing the whole list.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq, Hash)]
pub struct Nodes<T> {
    #[serde(deserialize_with = "skip_nulls")]
    #[serde(bound(deserialize = "T: Deserialize<'de>"))]
    pub nodes: Vec<T>,
}

fn skip_nulls<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    let items: Option<Vec<Option<T>>> = Option::deserialize(d)?;
    Ok(items.unwrap_or_default().into_iter().flatten().collect())
}

/// A watched issue.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "camelCase")]
pub struct WatchedIssue {
    pub state: String,
    pub timeline_items: Nodes<TimelineItem>,
}

/// A watched pull request.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "camelCase")]
pub struct WatchedPull {
    pub number: i64,
    pub url: String,
    pub title: String,
    pub state: String,
    pub is_draft: bool,
    pub merged: bool,
    pub updated_at: String,
    #[serde(default)]
    pub head_ref_name: Option<String>,
    #[serde(default)]
    pub base_ref_name: Option<String>,
    pub timeline_items: Nodes<TimelineItem>,
}

/// A REST issue-timeline event; only the fields we read.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct TimelineEvent {
    #[serde(default)]
    pub event: String,
    #[serde(default)]
    pub created_at: Option<String>,
    #[serde(default)]
    pub actor: Option<RestUser>,
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
pub struct RestUser {
    pub login: String,
}

/// A REST issue comment.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct Comment {
    pub id: i64,
    #[serde(default)]
    pub html_url: String,
    #[serde(default)]
    pub body: String,
    pub created_at: String,
    #[serde(default)]
    pub user: Option<RestUser>,
}

/// A REST pull request; only the fields we report.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct RestPull {
    pub number: i64,
    pub html_url: String,
    pub title: String,
    pub state: String,
    #[serde(default)]
    pub draft: bool,
    #[serde(default)]
    pub merged: bool,
    #[serde(default)]
    pub user: Option<RestUser>,
    pub updated_at: String,
}

/// An agent task (Agent tasks REST API); the whole object is kept as JSON
/// for the result, these are the fields we act on.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
pub struct AgentTask {
    pub id: Value,
    pub state: String,
    #[serde(default)]
    pub html_url: Option<String>,
    #[serde(default)]
    pub updated_at: Option<String>,
    #[serde(default)]
    pub created_at: Option<String>,
    #[serde(default)]
    pub sessions: Vec<Value>,
    #[serde(default)]
    pub artifacts: Vec<Value>,
}

impl AgentTask {
    /// The task id as text, whatever JSON type GitHub used.
    pub fn id_text(&self) -> String {
        match &self.id {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
pub struct AgentTaskList {
    #[serde(default)]
    pub tasks: Vec<Value>,
}

/// Parses GitHub's ISO-8601 timestamps.
pub fn parse_time(text: &str) -> Option<chrono::DateTime<chrono::Utc>> {
    chrono::DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|t| t.with_timezone(&chrono::Utc))
}

/// Formats a time the way GitHub writes them.
pub fn format_time(time: chrono::DateTime<chrono::Utc>) -> String {
    time.format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Whether `login` is Copilot, in either API's spelling.
pub fn is_copilot(login: &str) -> bool {
    login == COPILOT_LOGIN || login == COPILOT_REST_LOGIN || login == "copilot-swe-agent[bot]"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn null_timeline_nodes_are_skipped() {
        let issue: WatchedIssue = serde_json::from_value(serde_json::json!({
            "state": "OPEN",
            "timelineItems": {"nodes": [null, {"__typename": "ReadyForReviewEvent", "createdAt": "2026-12-01T10:00:00Z"}, {"__typename": "SomethingNew"}]}
        }))
        .expect("decodes");
        assert_eq!(issue.timeline_items.nodes.len(), 2);
        assert_eq!(issue.timeline_items.nodes[1], TimelineItem::Other);
    }
}
