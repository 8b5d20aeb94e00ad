//! The GraphQL schema subset, with GitHub's type, field and enum names (async-graphql).
//!
//! Queries resolve over a snapshot of one repository taken when `repository` resolves,
//! so each alias sees a consistent view. Errors carry GitHub's `type` in
//! `extensions.type`; the `graphql` module moves it to the top level.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_graphql::{
    Context, EmptySubscription, Enum, Error, ErrorExtensions, ID, InputObject, InputValueError,
    InputValueResult, Interface, Object, Scalar, ScalarType, Schema, SimpleObject, Union,
    Value as GqlValue,
};
use chrono::Utc;

use super::agent::{self, AgentInput, Failure, UpdateIssue};
use super::ids::{cursor, iso, parse_cursor, parse_iso};
use super::state::{Actor as ActorData, Event, EventKind, Item, ItemState, Repo, repo_key};
use super::{COPILOT_LOGIN, GithubSim};

/// The executable schema.
pub(crate) type GithubSchema = Schema<QueryRoot, MutationRoot, EmptySubscription>;

/// Builds the schema.
pub(crate) fn build() -> GithubSchema {
    Schema::build(QueryRoot, MutationRoot, EmptySubscription).finish()
}

/// The `GraphQL-Features` header's flags, as request data.
#[derive(Clone, Debug, Default)]
pub(crate) struct Features(pub Vec<String>);

/// GitHub's GraphQL state name.
pub(crate) fn state_name(state: ItemState) -> &'static str {
    match state {
        ItemState::Open => "OPEN",
        ItemState::Closed => "CLOSED",
        ItemState::Merged => "MERGED",
    }
}

/// An error with GitHub's `type`.
fn typed(kind: &'static str, message: impl Into<String>) -> Error {
    Error::new(message.into()).extend_with(|_, e| e.set("type", kind))
}

impl From<Failure> for Error {
    fn from(f: Failure) -> Self {
        match f {
            Failure::NotFound(m) => typed("NOT_FOUND", m),
            Failure::Forbidden(m) => typed("FORBIDDEN", m),
            Failure::Invalid(m) => Error::new(m),
        }
    }
}

fn sim<'a>(ctx: &Context<'a>) -> async_graphql::Result<&'a GithubSim> {
    ctx.data::<GithubSim>()
}

/// `DateTime`: ISO-8601 UTC, second precision.
#[derive(Clone, Copy, Debug)]
pub(crate) struct DateTime(pub chrono::DateTime<Utc>);

#[Scalar(name = "DateTime")]
impl ScalarType for DateTime {
    fn parse(value: GqlValue) -> InputValueResult<Self> {
        match &value {
            GqlValue::String(s) => parse_iso(s)
                .map(DateTime)
                .ok_or_else(|| InputValueError::custom(format!("\"{s}\" is not an ISO-8601 time"))),
            _ => Err(InputValueError::expected_type(value)),
        }
    }

    fn to_value(&self) -> GqlValue {
        GqlValue::String(iso(self.0))
    }
}

/// `URI`: GitHub's scalar for every `url` and `avatarUrl`.
#[derive(Clone, Debug)]
pub(crate) struct Uri(pub String);

#[Scalar(name = "URI")]
impl ScalarType for Uri {
    fn parse(value: GqlValue) -> InputValueResult<Self> {
        match value {
            GqlValue::String(s) => Ok(Uri(s)),
            other => Err(InputValueError::expected_type(other)),
        }
    }

    fn to_value(&self) -> GqlValue {
        GqlValue::String(self.0.clone())
    }
}

// ---------------------------------------------------------------- snapshots and actors

#[derive(Debug)]
struct Snap {
    repo: Repo,
    users: Arc<BTreeMap<String, ActorData>>,
    html: String,
}

/// A repository as seen by one `repository` field.
#[derive(Clone, Debug)]
pub(crate) struct Repository(Arc<Snap>);

fn snapshot(sim: &GithubSim, key: &str) -> Option<Repository> {
    let st = sim.state();
    let repo = st.repos.get(key)?.clone();
    Some(Repository(Arc::new(Snap {
        repo,
        users: Arc::clone(&st.users),
        html: sim.config().html_base_url.trim_end_matches('/').to_owned(),
    })))
}

#[derive(Clone, Debug)]
struct ActorView {
    login: String,
    node_id: String,
    url: String,
    name: Option<String>,
}

/// GitHub's `Bot`.
#[derive(Clone, Debug)]
pub(crate) struct Bot(ActorView);
/// GitHub's `User`.
#[derive(Clone, Debug)]
pub(crate) struct User(ActorView);

#[Object]
impl Bot {
    async fn id(&self) -> ID {
        ID(self.0.node_id.clone())
    }
    async fn login(&self) -> String {
        self.0.login.clone()
    }
    async fn url(&self) -> Uri {
        Uri(self.0.url.clone())
    }
    async fn avatar_url(&self) -> Uri {
        Uri("https://avatars.githubusercontent.com/in/1143301?v=4".to_owned())
    }
}

#[Object]
impl User {
    async fn id(&self) -> ID {
        ID(self.0.node_id.clone())
    }
    async fn login(&self) -> String {
        self.0.login.clone()
    }
    async fn url(&self) -> Uri {
        Uri(self.0.url.clone())
    }
    async fn name(&self) -> Option<String> {
        self.0.name.clone()
    }
    async fn avatar_url(&self) -> Uri {
        Uri(format!(
            "https://avatars.githubusercontent.com/u/{}?v=4",
            self.0.login.len()
        ))
    }
}

/// GitHub's `Actor` interface (no `id`: GitHub's has none; select it on `Bot` or
/// `User`).
#[allow(clippy::duplicated_attributes)] // the derive's `field(..., ty = "Uri")` list
#[derive(Clone, Debug, Interface)]
#[graphql(
    name = "Actor",
    field(name = "login", ty = "String"),
    field(name = "url", ty = "Uri"),
    field(name = "avatar_url", ty = "Uri")
)]
pub(crate) enum Actor {
    Bot(Bot),
    User(User),
}

impl Repository {
    fn snap(&self) -> &Snap {
        &self.0
    }

    fn actor(&self, login: &str) -> Option<Actor> {
        let a = self.0.users.get(login)?;
        let view = ActorView {
            login: a.login.clone(),
            node_id: a.node_id.clone(),
            url: if a.login == COPILOT_LOGIN {
                "https://github.com/apps/copilot-swe-agent".into()
            } else {
                format!("{}/{}", self.0.html, a.login)
            },
            name: a.name.clone(),
        };
        Some(if a.bot {
            Actor::Bot(Bot(view))
        } else {
            Actor::User(User(view))
        })
    }

    fn item_url(&self, item: &Item) -> String {
        let kind = if item.pr.is_some() { "pull" } else { "issues" };
        format!(
            "{}/{}/{kind}/{}",
            self.0.html,
            self.0.repo.full_name(),
            item.number
        )
    }

    fn find_issue(&self, number: u64) -> Option<Issue> {
        let item = self.0.repo.items.get(&number)?;
        item.pr.is_none().then(|| Issue {
            repo: self.clone(),
            item: item.clone(),
        })
    }

    fn find_pull_request(&self, number: u64) -> Option<PullRequest> {
        let item = self.0.repo.items.get(&number)?;
        item.pr.is_some().then(|| PullRequest {
            repo: self.clone(),
            item: item.clone(),
        })
    }

    fn subject(&self, number: u64) -> Option<ReferencedSubject> {
        self.find_pull_request(number)
            .map(ReferencedSubject::PullRequest)
            .or_else(|| self.find_issue(number).map(ReferencedSubject::Issue))
    }
}

// ---------------------------------------------------------------- connections

/// GitHub's `PageInfo`.
#[derive(Clone, Debug, SimpleObject)]
pub(crate) struct PageInfo {
    has_next_page: bool,
    has_previous_page: bool,
    start_cursor: Option<String>,
    end_cursor: Option<String>,
}

/// `suggestedActors` results.
#[derive(Clone, Debug, SimpleObject)]
pub(crate) struct ActorConnection {
    nodes: Option<Vec<Option<Actor>>>,
    page_info: PageInfo,
    total_count: i32,
}

/// `assignees` results: users only, as GitHub's public schema types them
/// (`UserConnection` of `User`). Bots (Copilot among them) are in
/// `assignedActors`.
#[derive(Clone, Debug, SimpleObject)]
pub(crate) struct UserConnection {
    nodes: Option<Vec<Option<User>>>,
    page_info: PageInfo,
    total_count: i32,
}

/// GitHub's `Assignee` union: what `assignedActors` returns.
#[derive(Clone, Debug, Union)]
pub(crate) enum Assignee {
    Bot(Bot),
    Mannequin(Mannequin),
    Organization(Organization),
    User(User),
}

/// GitHub's `Mannequin` (an imported user). The emulator's seeds have none;
/// the type is here because `Assignee` holds it, so documents that spread on
/// it are valid as on GitHub.
#[derive(Clone, Debug, SimpleObject)]
pub(crate) struct Mannequin {
    id: ID,
    login: String,
}

/// GitHub's `Organization`, as an `Assignee` (never assigned in the seeds).
#[derive(Clone, Debug, SimpleObject)]
pub(crate) struct Organization {
    id: ID,
    login: String,
}

/// `assignedActors` results: every assignee, users and bots.
#[derive(Clone, Debug, SimpleObject)]
pub(crate) struct AssigneeConnection {
    nodes: Option<Vec<Option<Assignee>>>,
    page_info: PageInfo,
    total_count: i32,
}

fn count_i32(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// The window `[start, end)` of `total` items per `after`, `first`, `last`.
fn window(
    total: usize,
    first: Option<i32>,
    last: Option<i32>,
    after: Option<&str>,
    connection: &str,
) -> async_graphql::Result<(usize, usize)> {
    let check = |n: Option<i32>, arg: &str| -> async_graphql::Result<Option<usize>> {
        match n {
            None => Ok(None),
            Some(n) if n < 0 => Err(Error::new(format!(
                "`{arg}` on the `{connection}` connection cannot be less than zero."
            ))),
            Some(n) if n > 100 => Err(Error::new(format!(
                "Requesting {n} records on the `{connection}` connection exceeds the `{arg}` \
                 limit of 100 records."
            ))),
            Some(n) => Ok(Some(usize::try_from(n).unwrap_or(0))),
        }
    };
    let first = check(first, "first")?;
    let last = check(last, "last")?;
    let mut start = match after {
        None => 0,
        Some(c) => parse_cursor(c)
            .map(|i| i + 1)
            .ok_or_else(|| Error::new(format!("`{c}` does not appear to be a valid cursor.")))?,
    };
    start = start.min(total);
    let mut end = total;
    if let Some(f) = first {
        end = end.min(start + f);
    }
    if let Some(l) = last {
        start = start.max(end.saturating_sub(l));
    }
    if first.is_none() && last.is_none() {
        end = end.min(start + 100);
    }
    Ok((start, end))
}

fn page_info(start: usize, end: usize, total: usize) -> PageInfo {
    PageInfo {
        has_next_page: end < total,
        has_previous_page: start > 0,
        start_cursor: (end > start).then(|| cursor(start)),
        end_cursor: (end > start).then(|| cursor(end - 1)),
    }
}

// ---------------------------------------------------------------- enums

/// `RepositorySuggestedActorFilter`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Enum)]
pub(crate) enum RepositorySuggestedActorFilter {
    CanBeAssigned,
    CanBeAuthor,
}

/// `IssueState`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Enum)]
pub(crate) enum IssueState {
    Open,
    Closed,
}

/// `PullRequestState`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Enum)]
pub(crate) enum PullRequestState {
    Open,
    Closed,
    Merged,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    CrossReferenced,
    IssueComment,
    Assigned,
    Unassigned,
    ReadyForReview,
    ConvertToDraft,
    Closed,
    Merged,
}

fn kind_of(event: &EventKind) -> Option<Kind> {
    Some(match event {
        EventKind::CrossReferenced { .. } => Kind::CrossReferenced,
        EventKind::Comment { .. } => Kind::IssueComment,
        EventKind::Assigned { .. } => Kind::Assigned,
        EventKind::Unassigned { .. } => Kind::Unassigned,
        EventKind::ReadyForReview => Kind::ReadyForReview,
        EventKind::ConvertToDraft => Kind::ConvertToDraft,
        EventKind::Closed => Kind::Closed,
        EventKind::Merged => Kind::Merged,
        EventKind::CopilotWorkStarted
        | EventKind::CopilotWorkFinished
        | EventKind::CopilotWorkFinishedFailure => return None,
    })
}

// ---------------------------------------------------------------- timeline items

/// One timeline event with its context.
#[derive(Clone, Debug)]
pub(crate) struct EventView {
    repo: Repository,
    item_number: u64,
    item_url: String,
    event: Event,
}

impl EventView {
    fn id(&self) -> ID {
        ID(self.event.node_id.clone())
    }
    fn created_at(&self) -> DateTime {
        DateTime(self.event.created_at)
    }
    fn actor(&self) -> Option<Actor> {
        self.repo.actor(&self.event.actor)
    }
}

/// `CrossReferencedEvent`.
#[derive(Clone, Debug)]
pub(crate) struct CrossReferencedEvent(EventView);

#[Object]
impl CrossReferencedEvent {
    async fn id(&self) -> ID {
        self.0.id()
    }
    async fn created_at(&self) -> DateTime {
        self.0.created_at()
    }
    async fn referenced_at(&self) -> DateTime {
        self.0.created_at()
    }
    async fn actor(&self) -> Option<Actor> {
        self.0.actor()
    }
    async fn will_close_target(&self) -> bool {
        matches!(
            self.0.event.kind,
            EventKind::CrossReferenced {
                will_close: true,
                ..
            }
        )
    }
    async fn is_cross_repository(&self) -> bool {
        false
    }
    async fn source(&self) -> async_graphql::Result<ReferencedSubject> {
        match self.0.event.kind {
            EventKind::CrossReferenced { source, .. } => self.0.repo.subject(source),
            _ => None,
        }
        .ok_or_else(|| "the referencing issue or pull request is gone".into())
    }
    async fn target(&self) -> async_graphql::Result<ReferencedSubject> {
        self.0
            .repo
            .subject(self.0.item_number)
            .ok_or_else(|| "the referenced issue or pull request is gone".into())
    }
}

/// `IssueComment`.
#[derive(Clone, Debug)]
pub(crate) struct IssueComment(EventView);

#[Object]
impl IssueComment {
    async fn id(&self) -> ID {
        self.0.id()
    }
    async fn database_id(&self) -> Option<i64> {
        i64::try_from(self.0.event.db_id).ok()
    }
    async fn created_at(&self) -> DateTime {
        self.0.created_at()
    }
    async fn updated_at(&self) -> DateTime {
        match self.0.event.kind {
            EventKind::Comment { updated_at, .. } => DateTime(updated_at),
            _ => self.0.created_at(),
        }
    }
    async fn body(&self) -> String {
        match &self.0.event.kind {
            EventKind::Comment { body, .. } => body.clone(),
            _ => String::new(),
        }
    }
    async fn url(&self) -> Uri {
        Uri(format!(
            "{}#issuecomment-{}",
            self.0.item_url, self.0.event.db_id
        ))
    }
    async fn author(&self) -> Option<Actor> {
        self.0.actor()
    }
}

/// `AssignedEvent`.
#[derive(Clone, Debug)]
pub(crate) struct AssignedEvent(EventView);
/// `UnassignedEvent`.
#[derive(Clone, Debug)]
pub(crate) struct UnassignedEvent(EventView);

/// An actor as GitHub's `Assignee` union holds it.
fn as_assignee(actor: Actor) -> Assignee {
    match actor {
        Actor::Bot(bot) => Assignee::Bot(bot),
        Actor::User(user) => Assignee::User(user),
    }
}

fn assignee_of(view: &EventView) -> Option<Assignee> {
    match &view.event.kind {
        EventKind::Assigned { assignee } | EventKind::Unassigned { assignee } => {
            view.repo.actor(assignee).map(as_assignee)
        }
        _ => None,
    }
}

#[Object]
impl AssignedEvent {
    async fn id(&self) -> ID {
        self.0.id()
    }
    async fn created_at(&self) -> DateTime {
        self.0.created_at()
    }
    async fn actor(&self) -> Option<Actor> {
        self.0.actor()
    }
    async fn assignee(&self) -> Option<Assignee> {
        assignee_of(&self.0)
    }
}

#[Object]
impl UnassignedEvent {
    async fn id(&self) -> ID {
        self.0.id()
    }
    async fn created_at(&self) -> DateTime {
        self.0.created_at()
    }
    async fn actor(&self) -> Option<Actor> {
        self.0.actor()
    }
    async fn assignee(&self) -> Option<Assignee> {
        assignee_of(&self.0)
    }
}

macro_rules! simple_event {
    ($name:ident) => {
        /// A timeline event with an id, a time and an actor.
        #[derive(Clone, Debug)]
        pub(crate) struct $name(EventView);

        #[Object]
        impl $name {
            async fn id(&self) -> ID {
                self.0.id()
            }
            async fn created_at(&self) -> DateTime {
                self.0.created_at()
            }
            async fn actor(&self) -> Option<Actor> {
                self.0.actor()
            }
        }
    };
}

simple_event!(ReadyForReviewEvent);
simple_event!(ConvertToDraftEvent);
simple_event!(ClosedEvent);
simple_event!(MergedEvent);

/// A timeline's item union and its `itemTypes` enum, for the events GitHub's
/// schema lists in that union (an issue has no draft or merge events).
macro_rules! timeline_types {
    ($union:ident, $enum:ident, [$($kind:ident => $event:ident),* $(,)?]) => {
        /// Timeline item types (GitHub's enum values).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Enum)]
        pub(crate) enum $enum {
            $($event,)*
        }

        impl From<$enum> for Kind {
            fn from(t: $enum) -> Self {
                match t {
                    $($enum::$event => Kind::$kind,)*
                }
            }
        }

        /// Timeline items.
        #[derive(Clone, Debug, Union)]
        pub(crate) enum $union {
            $($event($event),)*
        }

        impl $union {
            fn from_view(kind: Kind, v: EventView) -> Option<Self> {
                match kind {
                    $(Kind::$kind => Some(Self::$event($event(v))),)*
                    #[allow(unreachable_patterns)]
                    _ => None,
                }
            }
        }
    };
}

timeline_types!(IssueTimelineItems, IssueTimelineItemsItemType, [
    CrossReferenced => CrossReferencedEvent,
    IssueComment => IssueComment,
    Assigned => AssignedEvent,
    Unassigned => UnassignedEvent,
    Closed => ClosedEvent,
]);
timeline_types!(PullRequestTimelineItems, PullRequestTimelineItemsItemType, [
    CrossReferenced => CrossReferencedEvent,
    IssueComment => IssueComment,
    Assigned => AssignedEvent,
    Unassigned => UnassignedEvent,
    ReadyForReview => ReadyForReviewEvent,
    ConvertToDraft => ConvertToDraftEvent,
    Closed => ClosedEvent,
    Merged => MergedEvent,
]);

/// `IssueTimelineItemsConnection`.
#[derive(Clone, Debug, SimpleObject)]
pub(crate) struct IssueTimelineItemsConnection {
    nodes: Option<Vec<Option<IssueTimelineItems>>>,
    page_info: PageInfo,
    total_count: i32,
    filtered_count: i32,
}

/// `PullRequestTimelineItemsConnection`.
#[derive(Clone, Debug, SimpleObject)]
pub(crate) struct PullRequestTimelineItemsConnection {
    nodes: Option<Vec<Option<PullRequestTimelineItems>>>,
    page_info: PageInfo,
    total_count: i32,
    filtered_count: i32,
}

/// The arguments of `timelineItems`.
struct TimelineArgs {
    first: Option<i32>,
    last: Option<i32>,
    after: Option<String>,
    since: Option<DateTime>,
    kinds: Option<Vec<Kind>>,
}

/// The selected events, with the page info, the total and the filtered counts.
type TimelinePage = (Vec<(Kind, EventView)>, PageInfo, i32, i32);

/// Selects the events of a timeline.
fn timeline(
    repo: &Repository,
    item: &Item,
    args: &TimelineArgs,
) -> async_graphql::Result<TimelinePage> {
    let item_url = repo.item_url(item);
    let total = item
        .timeline
        .iter()
        .filter(|e| kind_of(&e.kind).is_some())
        .count();
    let filtered: Vec<(Kind, &Event)> = item
        .timeline
        .iter()
        .filter_map(|e| kind_of(&e.kind).map(|k| (k, e)))
        .filter(|(k, _)| args.kinds.as_ref().is_none_or(|ks| ks.contains(k)))
        .filter(|(_, e)| args.since.is_none_or(|s| e.created_at >= s.0))
        .collect();
    let (start, end) = window(
        filtered.len(),
        args.first,
        args.last,
        args.after.as_deref(),
        "timelineItems",
    )?;
    let info = page_info(start, end, filtered.len());
    let nodes = filtered
        .get(start..end)
        .unwrap_or_default()
        .iter()
        .map(|(k, e)| {
            (
                *k,
                EventView {
                    repo: repo.clone(),
                    item_number: item.number,
                    item_url: item_url.clone(),
                    event: (*e).clone(),
                },
            )
        })
        .collect();
    Ok((nodes, info, count_i32(total), count_i32(filtered.len())))
}

/// `assignees`: the users among the assignees (GitHub leaves bots out).
fn assignees(
    repo: &Repository,
    item: &Item,
    first: Option<i32>,
) -> async_graphql::Result<UserConnection> {
    let users: Vec<User> = item
        .assignees
        .iter()
        .filter_map(|login| match repo.actor(login) {
            Some(Actor::User(user)) => Some(user),
            _ => None,
        })
        .collect();
    let (start, end) = window(users.len(), first, None, None, "assignees")?;
    Ok(UserConnection {
        nodes: Some(
            users
                .get(start..end)
                .unwrap_or_default()
                .iter()
                .cloned()
                .map(Some)
                .collect(),
        ),
        page_info: page_info(start, end, users.len()),
        total_count: count_i32(users.len()),
    })
}

/// `assignedActors`: every assignee, users and bots.
fn assigned_actors(
    repo: &Repository,
    item: &Item,
    first: Option<i32>,
) -> async_graphql::Result<AssigneeConnection> {
    let (start, end) = window(item.assignees.len(), first, None, None, "assignedActors")?;
    Ok(AssigneeConnection {
        nodes: Some(
            item.assignees
                .get(start..end)
                .unwrap_or_default()
                .iter()
                .map(|login| repo.actor(login).map(as_assignee))
                .collect(),
        ),
        page_info: page_info(start, end, item.assignees.len()),
        total_count: count_i32(item.assignees.len()),
    })
}

// ---------------------------------------------------------------- issue and pull request

/// `Issue`.
#[derive(Clone, Debug)]
pub(crate) struct Issue {
    repo: Repository,
    item: Item,
}

#[Object]
impl Issue {
    async fn id(&self) -> ID {
        ID(self.item.node_id.clone())
    }
    async fn database_id(&self) -> Option<i64> {
        i64::try_from(self.item.db_id).ok()
    }
    async fn number(&self) -> i64 {
        i64::try_from(self.item.number).unwrap_or(i64::MAX)
    }
    async fn title(&self) -> String {
        self.item.title.clone()
    }
    async fn body(&self) -> String {
        self.item.body.clone()
    }
    async fn url(&self) -> Uri {
        Uri(self.repo.item_url(&self.item))
    }
    async fn state(&self) -> IssueState {
        if self.item.state == ItemState::Open {
            IssueState::Open
        } else {
            IssueState::Closed
        }
    }
    async fn closed(&self) -> bool {
        self.item.state != ItemState::Open
    }
    async fn created_at(&self) -> DateTime {
        DateTime(self.item.created_at)
    }
    async fn updated_at(&self) -> DateTime {
        DateTime(self.item.updated_at)
    }
    async fn closed_at(&self) -> Option<DateTime> {
        self.item.closed_at.map(DateTime)
    }
    async fn author(&self) -> Option<Actor> {
        self.repo.actor(&self.item.author)
    }
    async fn repository(&self) -> Repository {
        self.repo.clone()
    }
    async fn assignees(
        &self,
        first: Option<i32>,
        #[graphql(name = "after")] _after: Option<String>,
    ) -> async_graphql::Result<UserConnection> {
        assignees(&self.repo, &self.item, first)
    }
    async fn assigned_actors(
        &self,
        first: Option<i32>,
        #[graphql(name = "after")] _after: Option<String>,
    ) -> async_graphql::Result<AssigneeConnection> {
        assigned_actors(&self.repo, &self.item, first)
    }
    async fn timeline_items(
        &self,
        first: Option<i32>,
        last: Option<i32>,
        after: Option<String>,
        since: Option<DateTime>,
        item_types: Option<Vec<IssueTimelineItemsItemType>>,
    ) -> async_graphql::Result<IssueTimelineItemsConnection> {
        let args = TimelineArgs {
            first,
            last,
            after,
            since,
            kinds: item_types.map(|ts| ts.into_iter().map(Kind::from).collect()),
        };
        let (nodes, page_info, total, filtered) = timeline(&self.repo, &self.item, &args)?;
        Ok(IssueTimelineItemsConnection {
            nodes: Some(
                nodes
                    .into_iter()
                    .map(|(k, v)| IssueTimelineItems::from_view(k, v))
                    .collect(),
            ),
            page_info,
            total_count: total,
            filtered_count: filtered,
        })
    }
}

/// `PullRequest`.
#[derive(Clone, Debug)]
pub(crate) struct PullRequest {
    repo: Repository,
    item: Item,
}

#[Object]
impl PullRequest {
    async fn id(&self) -> ID {
        ID(self.item.node_id.clone())
    }
    async fn database_id(&self) -> Option<i64> {
        i64::try_from(self.item.db_id).ok()
    }
    async fn number(&self) -> i64 {
        i64::try_from(self.item.number).unwrap_or(i64::MAX)
    }
    async fn title(&self) -> String {
        self.item.title.clone()
    }
    async fn body(&self) -> String {
        self.item.body.clone()
    }
    async fn url(&self) -> Uri {
        Uri(self.repo.item_url(&self.item))
    }
    async fn state(&self) -> PullRequestState {
        match self.item.state {
            ItemState::Open => PullRequestState::Open,
            ItemState::Closed => PullRequestState::Closed,
            ItemState::Merged => PullRequestState::Merged,
        }
    }
    async fn is_draft(&self) -> bool {
        self.item.pr.as_ref().is_some_and(|p| p.draft)
    }
    async fn merged(&self) -> bool {
        self.item.state == ItemState::Merged
    }
    async fn merged_at(&self) -> Option<DateTime> {
        self.item
            .pr
            .as_ref()
            .and_then(|p| p.merged_at)
            .map(DateTime)
    }
    async fn closed(&self) -> bool {
        self.item.state != ItemState::Open
    }
    async fn closed_at(&self) -> Option<DateTime> {
        self.item.closed_at.map(DateTime)
    }
    async fn created_at(&self) -> DateTime {
        DateTime(self.item.created_at)
    }
    async fn updated_at(&self) -> DateTime {
        DateTime(self.item.updated_at)
    }
    async fn author(&self) -> Option<Actor> {
        self.repo.actor(&self.item.author)
    }
    async fn head_ref_name(&self) -> String {
        self.item
            .pr
            .as_ref()
            .map(|p| p.head_ref.clone())
            .unwrap_or_default()
    }
    async fn base_ref_name(&self) -> String {
        self.item
            .pr
            .as_ref()
            .map(|p| p.base_ref.clone())
            .unwrap_or_default()
    }
    async fn repository(&self) -> Repository {
        self.repo.clone()
    }
    async fn assignees(
        &self,
        first: Option<i32>,
        #[graphql(name = "after")] _after: Option<String>,
    ) -> async_graphql::Result<UserConnection> {
        assignees(&self.repo, &self.item, first)
    }
    async fn assigned_actors(
        &self,
        first: Option<i32>,
        #[graphql(name = "after")] _after: Option<String>,
    ) -> async_graphql::Result<AssigneeConnection> {
        assigned_actors(&self.repo, &self.item, first)
    }
    async fn timeline_items(
        &self,
        first: Option<i32>,
        last: Option<i32>,
        after: Option<String>,
        since: Option<DateTime>,
        item_types: Option<Vec<PullRequestTimelineItemsItemType>>,
    ) -> async_graphql::Result<PullRequestTimelineItemsConnection> {
        let args = TimelineArgs {
            first,
            last,
            after,
            since,
            kinds: item_types.map(|ts| ts.into_iter().map(Kind::from).collect()),
        };
        let (nodes, page_info, total, filtered) = timeline(&self.repo, &self.item, &args)?;
        Ok(PullRequestTimelineItemsConnection {
            nodes: Some(
                nodes
                    .into_iter()
                    .map(|(k, v)| PullRequestTimelineItems::from_view(k, v))
                    .collect(),
            ),
            page_info,
            total_count: total,
            filtered_count: filtered,
        })
    }
}

/// `ReferencedSubject`.
#[derive(Clone, Debug, Union)]
pub(crate) enum ReferencedSubject {
    Issue(Issue),
    PullRequest(PullRequest),
}

/// GitHub's `Assignable` interface.
#[allow(clippy::duplicated_attributes)] // the two fields take the same arguments
#[derive(Clone, Debug, Interface)]
#[graphql(
    name = "Assignable",
    field(
        name = "assignees",
        ty = "UserConnection",
        arg(name = "first", ty = "Option<i32>"),
        arg(name = "after", ty = "Option<String>")
    ),
    field(
        name = "assigned_actors",
        ty = "AssigneeConnection",
        arg(name = "first", ty = "Option<i32>"),
        arg(name = "after", ty = "Option<String>")
    )
)]
pub(crate) enum Assignable {
    Issue(Issue),
    PullRequest(PullRequest),
}

// ---------------------------------------------------------------- repository and query

#[Object]
impl Repository {
    async fn id(&self) -> ID {
        ID(self.snap().repo.node_id.clone())
    }
    async fn database_id(&self) -> Option<i64> {
        i64::try_from(self.snap().repo.db_id).ok()
    }
    async fn name(&self) -> String {
        self.snap().repo.name.clone()
    }
    async fn name_with_owner(&self) -> String {
        self.snap().repo.full_name()
    }
    async fn url(&self) -> Uri {
        Uri(format!(
            "{}/{}",
            self.snap().html,
            self.snap().repo.full_name()
        ))
    }
    async fn suggested_actors(
        &self,
        capabilities: Vec<RepositorySuggestedActorFilter>,
        first: Option<i32>,
        after: Option<String>,
        query: Option<String>,
        login_names: Option<String>,
    ) -> async_graphql::Result<ActorConnection> {
        let _ = capabilities;
        let wanted: Option<Vec<String>> = login_names.map(|l| {
            l.split(',')
                .map(|s| s.trim().to_ascii_lowercase())
                .filter(|s| !s.is_empty())
                .collect()
        });
        let needle = query.map(|q| q.to_ascii_lowercase());
        let all: Vec<String> = self
            .snap()
            .repo
            .suggested()
            .into_iter()
            .filter(|l| {
                wanted
                    .as_ref()
                    .is_none_or(|w| w.contains(&l.to_ascii_lowercase()))
            })
            .filter(|l| {
                needle
                    .as_ref()
                    .is_none_or(|n| l.to_ascii_lowercase().contains(n.as_str()))
            })
            .collect();
        let (start, end) = window(
            all.len(),
            Some(first.unwrap_or(100)),
            None,
            after.as_deref(),
            "suggestedActors",
        )?;
        Ok(ActorConnection {
            nodes: Some(
                all.get(start..end)
                    .unwrap_or_default()
                    .iter()
                    .map(|l| self.actor(l))
                    .collect(),
            ),
            page_info: page_info(start, end, all.len()),
            total_count: count_i32(all.len()),
        })
    }
    async fn issue(&self, number: i32) -> async_graphql::Result<Option<Issue>> {
        u64::try_from(number)
            .ok()
            .and_then(|n| self.find_issue(n))
            .map(Some)
            .ok_or_else(|| {
                typed(
                    "NOT_FOUND",
                    format!("Could not resolve to an Issue with the number of {number}."),
                )
            })
    }
    async fn pull_request(&self, number: i32) -> async_graphql::Result<Option<PullRequest>> {
        u64::try_from(number)
            .ok()
            .and_then(|n| self.find_pull_request(n))
            .map(Some)
            .ok_or_else(|| {
                typed(
                    "NOT_FOUND",
                    format!("Could not resolve to a PullRequest with the number of {number}."),
                )
            })
    }
}

/// `RateLimit`.
#[derive(Clone, Debug, SimpleObject)]
pub(crate) struct RateLimit {
    cost: i32,
    limit: i32,
    remaining: i32,
    used: i32,
    reset_at: DateTime,
    node_count: i32,
}

/// `Query`.
#[derive(Debug)]
pub(crate) struct QueryRoot;

#[Object(name = "Query")]
impl QueryRoot {
    async fn repository(
        &self,
        ctx: &Context<'_>,
        owner: String,
        name: String,
    ) -> async_graphql::Result<Option<Repository>> {
        snapshot(sim(ctx)?, &repo_key(&owner, &name))
            .map(Some)
            .ok_or_else(|| {
                typed(
                    "NOT_FOUND",
                    format!("Could not resolve to a Repository with the name '{owner}/{name}'."),
                )
            })
    }

    async fn rate_limit(&self, ctx: &Context<'_>) -> async_graphql::Result<Option<RateLimit>> {
        let st = sim(ctx)?.state();
        let b = st.graphql_bucket;
        let n = |v: u64| i32::try_from(v).unwrap_or(i32::MAX);
        Ok(Some(RateLimit {
            cost: 1,
            limit: n(b.limit),
            remaining: n(b.remaining()),
            used: n(b.used),
            reset_at: DateTime(
                chrono::DateTime::<Utc>::from_timestamp(i64::try_from(b.reset).unwrap_or(0), 0)
                    .unwrap_or_default(),
            ),
            node_count: 0,
        }))
    }

    async fn viewer(&self, ctx: &Context<'_>) -> async_graphql::Result<User> {
        let st = sim(ctx)?.state();
        let a = st
            .users
            .get(&st.viewer)
            .ok_or_else(|| Error::new("no viewer"))?;
        Ok(User(ActorView {
            login: a.login.clone(),
            node_id: a.node_id.clone(),
            url: format!(
                "{}/{}",
                sim(ctx)?.config().html_base_url.trim_end_matches('/'),
                a.login
            ),
            name: a.name.clone(),
        }))
    }
}

// ---------------------------------------------------------------- mutations

/// `AgentAssignmentInput`.
#[derive(Clone, Debug, InputObject)]
pub(crate) struct AgentAssignmentInput {
    target_repository_id: Option<ID>,
    base_ref: Option<String>,
    custom_instructions: Option<String>,
    custom_agent: Option<String>,
    model: Option<String>,
}

/// `UpdateIssueInput`.
#[derive(Clone, Debug, InputObject)]
pub(crate) struct UpdateIssueInput {
    id: ID,
    title: Option<String>,
    body: Option<String>,
    state: Option<IssueState>,
    assignee_ids: Option<Vec<ID>>,
    label_ids: Option<Vec<ID>>,
    milestone_id: Option<ID>,
    project_ids: Option<Vec<ID>>,
    client_mutation_id: Option<String>,
    agent_assignment: Option<AgentAssignmentInput>,
}

/// `UpdateIssuePayload`.
#[derive(Clone, Debug, SimpleObject)]
pub(crate) struct UpdateIssuePayload {
    issue: Option<Issue>,
    client_mutation_id: Option<String>,
}

/// `RemoveAssigneesFromAssignableInput`.
#[derive(Clone, Debug, InputObject)]
pub(crate) struct RemoveAssigneesFromAssignableInput {
    assignable_id: ID,
    assignee_ids: Vec<ID>,
    client_mutation_id: Option<String>,
}

/// `RemoveAssigneesFromAssignablePayload`.
#[derive(Clone, Debug, SimpleObject)]
pub(crate) struct RemoveAssigneesFromAssignablePayload {
    assignable: Option<Assignable>,
    client_mutation_id: Option<String>,
}

/// `Mutation`.
#[derive(Debug)]
pub(crate) struct MutationRoot;

fn assignable(sim: &GithubSim, key: &str, number: u64) -> Option<Assignable> {
    let repo = snapshot(sim, key)?;
    repo.find_pull_request(number)
        .map(Assignable::PullRequest)
        .or_else(|| repo.find_issue(number).map(Assignable::Issue))
}

#[Object(name = "Mutation")]
impl MutationRoot {
    async fn update_issue(
        &self,
        ctx: &Context<'_>,
        input: UpdateIssueInput,
    ) -> async_graphql::Result<Option<UpdateIssuePayload>> {
        let sim = sim(ctx)?;
        let features = ctx
            .data::<Features>()
            .map(|f| f.0.clone())
            .unwrap_or_default();
        let _ = (&input.label_ids, &input.milestone_id, &input.project_ids);
        let update = UpdateIssue {
            id: input.id.0,
            title: input.title,
            body: input.body,
            state: input.state.map(|s| match s {
                IssueState::Open => ItemState::Open,
                IssueState::Closed => ItemState::Closed,
            }),
            assignee_ids: input
                .assignee_ids
                .map(|ids| ids.into_iter().map(|i| i.0).collect()),
            agent: input.agent_assignment.map(|a| AgentInput {
                target_repository_id: a.target_repository_id.map(|i| i.0),
                base_ref: a.base_ref,
                custom_instructions: a.custom_instructions,
                custom_agent: a.custom_agent,
                model: a.model,
            }),
        };
        let (key, number) = agent::update_issue(sim, &features, update)?;
        Ok(Some(UpdateIssuePayload {
            issue: snapshot(sim, &key).and_then(|r| r.find_issue(number)),
            client_mutation_id: input.client_mutation_id,
        }))
    }

    async fn remove_assignees_from_assignable(
        &self,
        ctx: &Context<'_>,
        input: RemoveAssigneesFromAssignableInput,
    ) -> async_graphql::Result<Option<RemoveAssigneesFromAssignablePayload>> {
        let sim = sim(ctx)?;
        let ids: Vec<String> = input.assignee_ids.into_iter().map(|i| i.0).collect();
        let (key, number) = agent::remove_assignees(sim, &input.assignable_id.0, &ids)?;
        Ok(Some(RemoveAssigneesFromAssignablePayload {
            assignable: assignable(sim, &key, number),
            client_mutation_id: input.client_mutation_id,
        }))
    }
}
