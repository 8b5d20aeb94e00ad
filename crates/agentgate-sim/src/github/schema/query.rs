//! `Repository` and the query root.

use super::*;

#[Object]
impl Repository {
    pub(super) async fn id(&self) -> ID {
        ID(self.snap().repo.node_id.clone())
    }
    pub(super) async fn database_id(&self) -> Option<i64> {
        i64::try_from(self.snap().repo.db_id).ok()
    }
    pub(super) async fn name(&self) -> String {
        self.snap().repo.name.clone()
    }
    pub(super) async fn name_with_owner(&self) -> String {
        self.snap().repo.full_name()
    }
    pub(super) async fn url(&self) -> Uri {
        Uri(format!(
            "{}/{}",
            self.snap().html,
            self.snap().repo.full_name()
        ))
    }
    pub(super) async fn suggested_actors(
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
    pub(super) async fn issue(&self, number: i32) -> async_graphql::Result<Option<Issue>> {
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
    pub(super) async fn pull_request(
        &self,
        number: i32,
    ) -> async_graphql::Result<Option<PullRequest>> {
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
    pub(super) cost: i32,
    pub(super) limit: i32,
    pub(super) remaining: i32,
    pub(super) used: i32,
    pub(super) reset_at: DateTime,
    pub(super) node_count: i32,
}

/// `Query`.
#[derive(Debug)]
pub(crate) struct QueryRoot;

#[Object(name = "Query")]
impl QueryRoot {
    pub(super) async fn repository(
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

    pub(super) async fn rate_limit(
        &self,
        ctx: &Context<'_>,
    ) -> async_graphql::Result<Option<RateLimit>> {
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

    /// `node(id:)`: the issue or pull request with that global id (the
    /// other node types are not served). An id that resolves to nothing is
    /// a `NOT_FOUND` error with a null `node`, as GitHub answers it.
    pub(super) async fn node(
        &self,
        ctx: &Context<'_>,
        id: ID,
    ) -> async_graphql::Result<Option<Node>> {
        let sim = sim(ctx)?;
        let found = {
            let st = sim.state();
            st.repos.iter().find_map(|(key, repo)| {
                repo.items
                    .values()
                    .find(|item| item.node_id == id.as_str())
                    .map(|item| (key.clone(), item.number))
            })
        };
        found
            .and_then(|(key, number)| {
                let repo = snapshot(sim, &key)?;
                repo.find_pull_request(number)
                    .map(Node::PullRequest)
                    .or_else(|| repo.find_issue(number).map(Node::Issue))
            })
            .map(Some)
            .ok_or_else(|| {
                typed(
                    "NOT_FOUND",
                    format!(
                        "Could not resolve to a node with the global id of '{}'",
                        id.as_str()
                    ),
                )
            })
    }

    pub(super) async fn viewer(&self, ctx: &Context<'_>) -> async_graphql::Result<User> {
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
