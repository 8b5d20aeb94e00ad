//! Snapshots of a repository, and the actors (users, bots) in it.

use super::*;

#[derive(Debug)]
pub(super) struct Snap {
    pub(super) repo: Repo,
    pub(super) users: Arc<BTreeMap<String, ActorData>>,
    pub(super) html: String,
}

/// A repository as seen by one `repository` field.
#[derive(Clone, Debug)]
pub(crate) struct Repository(pub(super) Arc<Snap>);

pub(super) fn snapshot(sim: &GithubSim, key: &str) -> Option<Repository> {
    let st = sim.state();
    let repo = st.repos.get(key)?.clone();
    Some(Repository(Arc::new(Snap {
        repo,
        users: Arc::clone(&st.users),
        html: sim.config().html_base_url.trim_end_matches('/').to_owned(),
    })))
}

#[derive(Clone, Debug)]
pub(super) struct ActorView {
    pub(super) login: String,
    pub(super) node_id: String,
    pub(super) url: String,
    pub(super) name: Option<String>,
}

/// GitHub's `Bot`.
#[derive(Clone, Debug)]
pub(crate) struct Bot(pub(super) ActorView);
/// GitHub's `User`.
#[derive(Clone, Debug)]
pub(crate) struct User(pub(super) ActorView);

#[Object]
impl Bot {
    pub(super) async fn id(&self) -> ID {
        ID(self.0.node_id.clone())
    }
    pub(super) async fn login(&self) -> String {
        self.0.login.clone()
    }
    pub(super) async fn url(&self) -> Uri {
        Uri(self.0.url.clone())
    }
    pub(super) async fn avatar_url(&self) -> Uri {
        Uri("https://avatars.githubusercontent.com/in/1143301?v=4".to_owned())
    }
}

#[Object]
impl User {
    pub(super) async fn id(&self) -> ID {
        ID(self.0.node_id.clone())
    }
    pub(super) async fn login(&self) -> String {
        self.0.login.clone()
    }
    pub(super) async fn url(&self) -> Uri {
        Uri(self.0.url.clone())
    }
    pub(super) async fn name(&self) -> Option<String> {
        self.0.name.clone()
    }
    pub(super) async fn avatar_url(&self) -> Uri {
        Uri(format!(
            "https://avatars.githubusercontent.com/u/{}?v=4",
            self.0.login.len()
        ))
    }
}

/// GitHub's `Node` interface, for the node types `node(id:)` serves.
#[derive(Clone, Debug, Interface)]
#[graphql(name = "Node", field(name = "id", ty = "ID"))]
pub(crate) enum Node {
    Issue(Issue),
    PullRequest(PullRequest),
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
    pub(super) fn snap(&self) -> &Snap {
        &self.0
    }

    pub(super) fn actor(&self, login: &str) -> Option<Actor> {
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

    pub(super) fn item_url(&self, item: &Item) -> String {
        let kind = if item.pr.is_some() { "pull" } else { "issues" };
        format!(
            "{}/{}/{kind}/{}",
            self.0.html,
            self.0.repo.full_name(),
            item.number
        )
    }

    pub(super) fn find_issue(&self, number: u64) -> Option<Issue> {
        let item = self.0.repo.items.get(&number)?;
        item.pr.is_none().then(|| Issue {
            repo: self.clone(),
            item: item.clone(),
        })
    }

    pub(super) fn find_pull_request(&self, number: u64) -> Option<PullRequest> {
        let item = self.0.repo.items.get(&number)?;
        item.pr.is_some().then(|| PullRequest {
            repo: self.clone(),
            item: item.clone(),
        })
    }

    pub(super) fn subject(&self, number: u64) -> Option<ReferencedSubject> {
        self.find_pull_request(number)
            .map(ReferencedSubject::PullRequest)
            .or_else(|| self.find_issue(number).map(ReferencedSubject::Issue))
    }
}
