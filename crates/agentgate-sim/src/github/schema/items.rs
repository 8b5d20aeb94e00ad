//! `Issue` and `PullRequest`.

use super::*;

/// `Issue`.
#[derive(Clone, Debug)]
pub(crate) struct Issue {
    pub(super) repo: Repository,
    pub(super) item: Item,
}

#[Object]
impl Issue {
    pub(super) async fn id(&self) -> ID {
        ID(self.item.node_id.clone())
    }
    pub(super) async fn database_id(&self) -> Option<i64> {
        i64::try_from(self.item.db_id).ok()
    }
    pub(super) async fn number(&self) -> i64 {
        i64::try_from(self.item.number).unwrap_or(i64::MAX)
    }
    pub(super) async fn title(&self) -> String {
        self.item.title.clone()
    }
    pub(super) async fn body(&self) -> String {
        self.item.body.clone()
    }
    pub(super) async fn url(&self) -> Uri {
        Uri(self.repo.item_url(&self.item))
    }
    pub(super) async fn state(&self) -> IssueState {
        if self.item.state == ItemState::Open {
            IssueState::Open
        } else {
            IssueState::Closed
        }
    }
    pub(super) async fn closed(&self) -> bool {
        self.item.state != ItemState::Open
    }
    pub(super) async fn created_at(&self) -> DateTime {
        DateTime(self.item.created_at)
    }
    pub(super) async fn updated_at(&self) -> DateTime {
        DateTime(self.item.updated_at)
    }
    pub(super) async fn closed_at(&self) -> Option<DateTime> {
        self.item.closed_at.map(DateTime)
    }
    pub(super) async fn author(&self) -> Option<Actor> {
        self.repo.actor(&self.item.author)
    }
    pub(super) async fn repository(&self) -> Repository {
        self.repo.clone()
    }
    pub(super) async fn assignees(
        &self,
        first: Option<i32>,
        #[graphql(name = "after")] _after: Option<String>,
    ) -> async_graphql::Result<UserConnection> {
        assignees(&self.repo, &self.item, first)
    }
    pub(super) async fn assigned_actors(
        &self,
        first: Option<i32>,
        #[graphql(name = "after")] _after: Option<String>,
    ) -> async_graphql::Result<AssigneeConnection> {
        assigned_actors(&self.repo, &self.item, first)
    }
    pub(super) async fn timeline_items(
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
    pub(super) repo: Repository,
    pub(super) item: Item,
}

#[Object]
impl PullRequest {
    pub(super) async fn id(&self) -> ID {
        ID(self.item.node_id.clone())
    }
    pub(super) async fn database_id(&self) -> Option<i64> {
        i64::try_from(self.item.db_id).ok()
    }
    pub(super) async fn number(&self) -> i64 {
        i64::try_from(self.item.number).unwrap_or(i64::MAX)
    }
    pub(super) async fn title(&self) -> String {
        self.item.title.clone()
    }
    pub(super) async fn body(&self) -> String {
        self.item.body.clone()
    }
    pub(super) async fn url(&self) -> Uri {
        Uri(self.repo.item_url(&self.item))
    }
    pub(super) async fn state(&self) -> PullRequestState {
        match self.item.state {
            ItemState::Open => PullRequestState::Open,
            ItemState::Closed => PullRequestState::Closed,
            ItemState::Merged => PullRequestState::Merged,
        }
    }
    pub(super) async fn is_draft(&self) -> bool {
        self.item.pr.as_ref().is_some_and(|p| p.draft)
    }
    pub(super) async fn merged(&self) -> bool {
        self.item.state == ItemState::Merged
    }
    pub(super) async fn merged_at(&self) -> Option<DateTime> {
        self.item
            .pr
            .as_ref()
            .and_then(|p| p.merged_at)
            .map(DateTime)
    }
    pub(super) async fn closed(&self) -> bool {
        self.item.state != ItemState::Open
    }
    pub(super) async fn closed_at(&self) -> Option<DateTime> {
        self.item.closed_at.map(DateTime)
    }
    pub(super) async fn created_at(&self) -> DateTime {
        DateTime(self.item.created_at)
    }
    pub(super) async fn updated_at(&self) -> DateTime {
        DateTime(self.item.updated_at)
    }
    pub(super) async fn author(&self) -> Option<Actor> {
        self.repo.actor(&self.item.author)
    }
    pub(super) async fn head_ref_name(&self) -> String {
        self.item
            .pr
            .as_ref()
            .map(|p| p.head_ref.clone())
            .unwrap_or_default()
    }
    pub(super) async fn base_ref_name(&self) -> String {
        self.item
            .pr
            .as_ref()
            .map(|p| p.base_ref.clone())
            .unwrap_or_default()
    }
    pub(super) async fn repository(&self) -> Repository {
        self.repo.clone()
    }
    pub(super) async fn assignees(
        &self,
        first: Option<i32>,
        #[graphql(name = "after")] _after: Option<String>,
    ) -> async_graphql::Result<UserConnection> {
        assignees(&self.repo, &self.item, first)
    }
    pub(super) async fn assigned_actors(
        &self,
        first: Option<i32>,
        #[graphql(name = "after")] _after: Option<String>,
    ) -> async_graphql::Result<AssigneeConnection> {
        assigned_actors(&self.repo, &self.item, first)
    }
    pub(super) async fn timeline_items(
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
