//! The GitHub emulator over real HTTP: the production client's five operations verbatim,
//! pagination, auth, header gating, NOT_FOUND shapes, the simulated Copilot scenarios,
//! `@copilot` review cycles, agent tasks, REST comments and timelines, faults, counters.

use std::time::Duration;

use agentgate_sim::github::{
    COPILOT_BOT_ID, DEFAULT_GITHUB_TOKEN, GithubConfig, GithubSim, Scenario,
};
use agentgate_testkit::{Emulator, emulators, eventually};
use serde_json::{Value, json};

const OP_SUGGESTED: &str = "query($endCursor:String$name:String!$owner:String!){repository(owner: $owner, name: $name){suggestedActors(first: 100, after: $endCursor, capabilities: CAN_BE_ASSIGNED){nodes{... on Bot{id,login,__typename}},pageInfo{hasNextPage,endCursor}}}}";
const OP_SUGGESTED_NEXT: &str = "query($endCursor:String!$name:String!$owner:String!){repository(owner: $owner, name: $name){suggestedActors(first: 100, after: $endCursor, capabilities: CAN_BE_ASSIGNED){nodes{... on Bot{id,login,__typename}},pageInfo{hasNextPage,endCursor}}}}";
const OP_ISSUE: &str = "query($name:String!$number:Int!$owner:String!){repository(owner: $owner, name: $name){id,issue(number: $number){id,number,title,url,state,assignedActors(first: 100){nodes{__typename,...on Bot{id,login},...on Mannequin{id,login},...on Organization{id,login},...on User{id,login}}}}}}";
/// Users and actors side by side, as GitHub's public schema types them.
const OP_BOTH: &str = "query($name:String!$number:Int!$owner:String!){repository(owner: $owner, name: $name){issue(number: $number){assignees(first: 100){totalCount,nodes{__typename,id,login}},assignedActors(first: 100){totalCount,nodes{__typename,...on Bot{login},...on User{login}}}}}}";
const OP_ASSIGN: &str =
    "mutation($input:UpdateIssueInput!){updateIssue(input: $input){issue{id,number,url}}}";
const OP_UNASSIGN: &str = "mutation($input:RemoveAssigneesFromAssignableInput!){removeAssigneesFromAssignable(input: $input){clientMutationId}}";
const OP_WATCH: &str = "query($o0:String!,$n0:String!,$i0:Int!,$s0:DateTime,$o1:String!,$n1:String!,$i1:Int!,$s1:DateTime){rateLimit{cost,remaining,resetAt}
t0:repository(owner:$o0,name:$n0){issue(number:$i0){state,timelineItems(last:50,since:$s0,itemTypes:[CROSS_REFERENCED_EVENT,ISSUE_COMMENT]){nodes{__typename,...on CrossReferencedEvent{createdAt,source{__typename,...on PullRequest{number,url,title,state,isDraft,createdAt,author{login}}}},...on IssueComment{createdAt,url,body,author{login}}}}}}
t1:repository(owner:$o1,name:$n1){pullRequest(number:$i1){number,url,title,state,isDraft,merged,updatedAt,headRefName,baseRefName,timelineItems(last:50,since:$s1,itemTypes:[ISSUE_COMMENT,READY_FOR_REVIEW_EVENT,CLOSED_EVENT,MERGED_EVENT]){nodes{__typename,...on IssueComment{createdAt,url,body,author{login}},...on ReadyForReviewEvent{createdAt},...on ClosedEvent{createdAt},...on MergedEvent{createdAt}}}}}}";
const FEATURES: &str = "issues_copilot_assignment_api_support, coding_agent_model_selection";
const WIDGETS: &str = "acme/widgets";

/// The emulator (from the shared harness) and a client for raw requests.
struct Gh {
    _emulator: Emulator<GithubSim>,
    sim: GithubSim,
    url: String,
    http: reqwest::Client,
}

async fn start() -> Gh {
    start_with(GithubConfig {
        time_scale: 0.01,
        ..GithubConfig::default()
    })
    .await
}

async fn start_with(config: GithubConfig) -> Gh {
    let emulator = emulators::github(config).start().await;
    Gh {
        sim: emulator.sim.clone(),
        url: emulator.url.clone(),
        _emulator: emulator,
        http: reqwest::Client::new(),
    }
}

impl Gh {
    async fn graphql_raw(
        &self,
        query: &str,
        variables: Value,
        features: Option<&str>,
    ) -> reqwest::Response {
        let mut req = self
            .http
            .post(format!("{}/graphql", self.url))
            .header("Authorization", format!("bearer {DEFAULT_GITHUB_TOKEN}"))
            .json(&json!({ "query": query, "variables": variables }));
        if let Some(f) = features {
            req = req.header("GraphQL-Features", f);
        }
        req.send().await.expect("send")
    }

    async fn graphql_with(&self, query: &str, variables: Value, features: Option<&str>) -> Value {
        let resp = self.graphql_raw(query, variables, features).await;
        assert_eq!(resp.status(), 200);
        resp.json().await.expect("json")
    }

    async fn graphql(&self, query: &str, variables: Value) -> Value {
        self.graphql_with(query, variables, None).await
    }

    async fn get(&self, path: &str) -> reqwest::Response {
        self.http
            .get(format!("{}{path}", self.url))
            .header("Authorization", format!("token {DEFAULT_GITHUB_TOKEN}"))
            .header("Accept", "application/vnd.github+json")
            .header("X-GitHub-Api-Version", "2022-11-28")
            .send()
            .await
            .expect("send")
    }

    async fn get_json(&self, path: &str) -> Value {
        let resp = self.get(path).await;
        assert_eq!(resp.status(), 200, "GET {path}");
        resp.json().await.expect("json")
    }

    async fn post(&self, path: &str, body: Value) -> reqwest::Response {
        self.http
            .post(format!("{}{path}", self.url))
            .header("Authorization", format!("Bearer {DEFAULT_GITHUB_TOKEN}"))
            .header("Accept", "application/vnd.github+json")
            .header("X-GitHub-Api-Version", "2026-03-10")
            .json(&body)
            .send()
            .await
            .expect("send")
    }

    fn id(&self, repo: &str, number: u64) -> String {
        self.sim.node_id(repo, number).expect("node id")
    }

    /// Assigns Copilot to an issue like the production client does (operation 3).
    async fn assign(&self, repo: &str, number: u64, extra: Value) -> Value {
        let mut ids: Vec<String> = self
            .sim
            .issue_assignees(repo, number)
            .iter()
            .filter_map(|l| self.sim.user_node_id(l))
            .collect();
        ids.push(COPILOT_BOT_ID.into());
        let mut agent = json!({
            "targetRepositoryId": self.sim.repo_node_id(repo).expect("repo"),
            "customInstructions": "Keep it small.",
            "customAgent": "",
        });
        if let (Some(a), Some(e)) = (agent.as_object_mut(), extra.as_object()) {
            a.extend(e.clone());
        }
        self.graphql_with(
            OP_ASSIGN,
            json!({ "input": { "id": self.id(repo, number), "assigneeIds": ids, "agentAssignment": agent } }),
            Some(FEATURES),
        )
        .await
    }
}

/// Waits (at most 10 s) until `f` returns `Some`.
async fn until<T>(what: &str, f: impl FnMut() -> Option<T>) -> T {
    eventually(what, Duration::from_secs(10), f).await
}

fn events(sim: &GithubSim, repo: &str, number: u64) -> Vec<String> {
    sim.timeline(repo, number)
        .into_iter()
        .map(|e| e.event)
        .collect()
}

fn bot_logins(body: &Value) -> Vec<String> {
    body["data"]["repository"]["suggestedActors"]["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .filter_map(|n| n["login"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn suggested_actors_find_copilot_on_the_first_page() {
    let gh = start().await;
    let body = gh
        .graphql(
            OP_SUGGESTED,
            json!({ "owner": "acme", "name": "widgets", "endCursor": null }),
        )
        .await;
    assert!(body.get("errors").is_none(), "{body}");
    let nodes = body["data"]["repository"]["suggestedActors"]["nodes"]
        .as_array()
        .expect("nodes");
    let bot = nodes
        .iter()
        .find(|n| n["__typename"] == "Bot")
        .expect("bot");
    assert_eq!(bot["id"], COPILOT_BOT_ID);
    assert_eq!(bot["login"], "copilot-swe-agent");
    // Humans match no fragment: empty objects.
    assert!(nodes.iter().any(|n| n == &json!({})), "{body}");
    assert_eq!(
        body["data"]["repository"]["suggestedActors"]["pageInfo"]["hasNextPage"],
        false
    );
}

#[tokio::test]
async fn suggested_actors_page_two_on_a_crowded_repository() {
    let gh = start().await;
    let first = gh
        .graphql(
            OP_SUGGESTED,
            json!({ "owner": "acme", "name": "crowded", "endCursor": null }),
        )
        .await;
    let page = &first["data"]["repository"]["suggestedActors"];
    assert_eq!(page["nodes"].as_array().map(Vec::len), Some(100));
    assert!(bot_logins(&first).is_empty(), "{first}");
    assert_eq!(page["pageInfo"]["hasNextPage"], true);
    let cursor = page["pageInfo"]["endCursor"].as_str().expect("cursor");
    let second = gh
        .graphql(
            OP_SUGGESTED_NEXT,
            json!({ "owner": "acme", "name": "crowded", "endCursor": cursor }),
        )
        .await;
    assert_eq!(bot_logins(&second), vec!["copilot-swe-agent"], "{second}");
    assert_eq!(
        second["data"]["repository"]["suggestedActors"]["pageInfo"]["hasNextPage"],
        false
    );
    // Copilot is not suggested where it is not enabled.
    let legacy = gh
        .graphql(OP_SUGGESTED, json!({ "owner": "acme", "name": "legacy" }))
        .await;
    assert!(bot_logins(&legacy).is_empty());
}

/// `node(id:)` resolves an issue (or pull request) by its global id; an id
/// that names nothing is GitHub's `NOT_FOUND` with a null node.
#[tokio::test]
async fn node_resolves_an_item_by_its_global_id() {
    let gh = start().await;
    let query = "query($id:ID!){node(id: $id){__typename,id,...on Issue{number,title}\
                 ,...on PullRequest{number,title,isDraft}}}";
    let id = gh.id(WIDGETS, 2);
    let body = gh.graphql(query, json!({ "id": id })).await;
    assert!(body.get("errors").is_none(), "{body}");
    let node = &body["data"]["node"];
    assert_eq!(node["__typename"], "Issue", "{body}");
    assert_eq!(node["id"], json!(id));
    assert_eq!(node["number"], 2);
    assert_eq!(node["title"], "Fix the flaky retry test");
    let body = gh.graphql(query, json!({ "id": "I_nothing" })).await;
    assert_eq!(body["data"]["node"], Value::Null, "{body}");
    assert_eq!(body["errors"][0]["type"], "NOT_FOUND", "{body}");
}

#[tokio::test]
async fn issue_query_returns_the_assignees() {
    let gh = start().await;
    let body = gh
        .graphql(
            OP_ISSUE,
            json!({ "owner": "acme", "name": "widgets", "number": 2 }),
        )
        .await;
    assert!(body.get("errors").is_none(), "{body}");
    let repo = &body["data"]["repository"];
    assert_eq!(repo["id"], gh.sim.repo_node_id(WIDGETS).expect("repo id"));
    let issue = &repo["issue"];
    assert_eq!(issue["number"], 2);
    assert_eq!(issue["title"], "Fix the flaky retry test");
    assert_eq!(issue["state"], "OPEN");
    assert_eq!(issue["url"], "https://github.com/acme/widgets/issues/2");
    let logins: Vec<&str> = issue["assignedActors"]["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .filter_map(|n| n["login"].as_str())
        .collect();
    assert_eq!(logins, vec!["octocat", "hubot"]);
    assert_eq!(issue["assignedActors"]["nodes"][0]["__typename"], "User");
    assert!(
        issue["assignedActors"]["nodes"][0]["id"]
            .as_str()
            .is_some_and(|id| id.starts_with("U_kgDO"))
    );
}

fn logins_and_types(connection: &Value) -> Vec<(String, String)> {
    connection["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .map(|n| {
            (
                n["login"].as_str().unwrap_or_default().to_owned(),
                n["__typename"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// GitHub's public schema: `assignees` is a `UserConnection` (users only);
/// bots, Copilot among them, are returned by `assignedActors` alone.
#[tokio::test]
async fn copilot_is_in_assigned_actors_and_never_in_assignees() {
    let gh = start().await;
    let body = gh.assign(WIDGETS, 2, json!({})).await;
    assert!(body.get("errors").is_none(), "{body}");
    let body = gh
        .graphql(
            OP_BOTH,
            json!({ "owner": "acme", "name": "widgets", "number": 2 }),
        )
        .await;
    assert!(body.get("errors").is_none(), "{body}");
    let issue = &body["data"]["repository"]["issue"];
    let user = |login: &str| (login.to_owned(), "User".to_owned());
    assert_eq!(
        logins_and_types(&issue["assignees"]),
        vec![user("octocat"), user("hubot")]
    );
    assert_eq!(issue["assignees"]["totalCount"], 2);
    assert_eq!(
        logins_and_types(&issue["assignedActors"]),
        vec![
            user("octocat"),
            user("hubot"),
            ("copilot-swe-agent".to_owned(), "Bot".to_owned())
        ]
    );
    assert_eq!(issue["assignedActors"]["totalCount"], 3);
}

/// What the public schema refuses, the emulator refuses: a `Bot` is not a
/// possible type of `assignees`' nodes.
#[tokio::test]
async fn a_bot_fragment_on_assignees_is_refused_as_by_the_public_schema() {
    let gh = start().await;
    let body = gh
        .graphql(
            "query($name:String!$number:Int!$owner:String!){repository(owner: $owner, name: $name){issue(number: $number){assignees(first: 10){nodes{... on Bot{id}}}}}}",
            json!({ "owner": "acme", "name": "widgets", "number": 2 }),
        )
        .await;
    assert!(body["data"].is_null(), "{body}");
    let message = body["errors"][0]["message"].as_str().unwrap_or_default();
    assert!(message.contains("Bot"), "{body}");
}

#[tokio::test]
async fn normal_scenario_runs_from_assignment_to_a_finished_pr() {
    let gh = start().await;
    let body = gh
        .assign(
            WIDGETS,
            1,
            json!({ "baseRef": "main", "model": "claude-sonnet-4.5" }),
        )
        .await;
    assert!(body.get("errors").is_none(), "{body}");
    assert_eq!(body["data"]["updateIssue"]["issue"]["number"], 1);
    assert_eq!(
        body["data"]["updateIssue"]["issue"]["url"],
        "https://github.com/acme/widgets/issues/1"
    );
    let stats = gh.sim.stats();
    assert_eq!(stats.assignments, 1);
    assert_eq!(stats.assignments_for(WIDGETS, 1), 1);
    let recorded = &stats.agent_assignments[0];
    assert_eq!(recorded.base_ref.as_deref(), Some("main"));
    assert_eq!(recorded.model.as_deref(), Some("claude-sonnet-4.5"));
    assert_eq!(
        recorded.custom_instructions.as_deref(),
        Some("Keep it small.")
    );
    assert_eq!(recorded.custom_agent.as_deref(), Some(""));
    assert!(recorded.started_run);
    assert!(recorded.assignee_ids.contains(&COPILOT_BOT_ID.to_owned()));
    assert!(
        gh.sim
            .issue_assignees(WIDGETS, 1)
            .contains(&"copilot-swe-agent".into())
    );

    // PR #6 (next in the shared number space) opens, then finishes.
    let pr = until("the PR", || gh.sim.pull_request(WIDGETS, 6)).await;
    assert_eq!(pr.author, "copilot-swe-agent");
    assert_eq!(pr.head_ref, "copilot/fix-1");
    assert_eq!(pr.base_ref, "main");
    assert!(pr.body.starts_with("Fixes #1"), "{}", pr.body);
    assert!(pr.body.contains("Keep it small."));
    let assigned_at = gh.sim.timeline(WIDGETS, 1)[0].created_at;
    assert!(pr.created_at >= assigned_at);
    until("work finished", || {
        events(&gh.sim, WIDGETS, 6)
            .contains(&"copilot_work_finished".to_owned())
            .then_some(())
    })
    .await;
    let pr = gh.sim.pull_request(WIDGETS, 6).expect("pr");
    assert!(!pr.is_draft);
    assert_eq!(pr.title, "Add a --version flag");

    // Timestamps never go backwards.
    for n in [1, 6] {
        let times: Vec<_> = gh
            .sim
            .timeline(WIDGETS, n)
            .iter()
            .map(|e| e.created_at)
            .collect();
        assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
    }

    // The batched watch query sees both sides.
    let watch = gh
        .graphql(
            OP_WATCH,
            json!({ "o0": "acme", "n0": "widgets", "i0": 1, "s0": null,
                    "o1": "acme", "n1": "widgets", "i1": 6, "s1": "2000-01-01T00:00:00Z" }),
        )
        .await;
    assert!(watch.get("errors").is_none(), "{watch}");
    assert_eq!(watch["data"]["rateLimit"]["cost"], 1);
    let issue = &watch["data"]["t0"]["issue"];
    assert_eq!(issue["state"], "OPEN");
    let xref = &issue["timelineItems"]["nodes"][0];
    assert_eq!(xref["__typename"], "CrossReferencedEvent");
    assert_eq!(xref["source"]["__typename"], "PullRequest");
    assert_eq!(xref["source"]["number"], 6);
    assert_eq!(xref["source"]["author"]["login"], "copilot-swe-agent");
    assert_eq!(
        xref["source"]["url"],
        "https://github.com/acme/widgets/pull/6"
    );
    let pr = &watch["data"]["t1"]["pullRequest"];
    assert_eq!(pr["isDraft"], false);
    assert_eq!(pr["merged"], false);
    assert_eq!(pr["state"], "OPEN");
    assert_eq!(pr["headRefName"], "copilot/fix-1");
    assert_eq!(pr["baseRefName"], "main");
    let kinds: Vec<&str> = pr["timelineItems"]["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .filter_map(|n| n["__typename"].as_str())
        .collect();
    assert_eq!(kinds, vec!["ReadyForReviewEvent"]);
    assert_eq!(gh.sim.stats().max_graphql_targets, 2);

    // REST timeline of the PR: Copilot's work events with the REST actor.
    let timeline = gh.get_json("/repos/acme/widgets/issues/6/timeline").await;
    let names: Vec<&str> = timeline
        .as_array()
        .expect("array")
        .iter()
        .filter_map(|e| e["event"].as_str())
        .collect();
    assert_eq!(
        names,
        vec![
            "copilot_work_started",
            "ready_for_review",
            "copilot_work_finished"
        ]
    );
    assert_eq!(timeline[0]["actor"]["login"], "Copilot");
    assert_eq!(timeline[0]["actor"]["id"], 198_982_749);
    assert_eq!(timeline[0]["actor"]["type"], "Bot");
    // REST timeline of the issue: assigned, cross-referenced.
    let timeline = gh.get_json("/repos/acme/widgets/issues/1/timeline").await;
    assert_eq!(timeline[0]["event"], "assigned");
    assert_eq!(timeline[0]["assignee"]["login"], "Copilot");
    assert_eq!(timeline[1]["event"], "cross-referenced");
    assert_eq!(timeline[1]["source"]["type"], "issue");
    assert_eq!(timeline[1]["source"]["issue"]["number"], 6);
    assert_eq!(timeline[1]["source"]["issue"]["user"]["login"], "Copilot");
    assert!(timeline[1]["source"]["issue"]["pull_request"]["html_url"].is_string());

    // REST PR object.
    let pull = gh.get_json("/repos/acme/widgets/pulls/6").await;
    assert_eq!(pull["state"], "open");
    assert_eq!(pull["draft"], false);
    assert_eq!(pull["merged"], false);
    assert_eq!(pull["head"]["ref"], "copilot/fix-1");
    assert_eq!(pull["base"]["ref"], "main");
    assert_eq!(pull["user"]["login"], "Copilot");
    assert_eq!(gh.get("/repos/acme/widgets/pulls/1").await.status(), 404);

    // Keeping Copilot assigned is a repeat assignment, not a new run.
    let again = gh.assign(WIDGETS, 1, json!({})).await;
    assert!(again.get("errors").is_none(), "{again}");
    let stats = gh.sim.stats();
    assert_eq!(stats.assignments_for(WIDGETS, 1), 1);
    assert_eq!(stats.repeat_assignments, 1);
    assert_eq!(stats.graphql_mutations, 2);

    // Merging shows up in the watch query.
    assert!(gh.sim.merge_pull_request(WIDGETS, 6));
    let watch = gh
        .graphql(
            OP_WATCH,
            json!({ "o0": "acme", "n0": "widgets", "i0": 1,
                    "o1": "acme", "n1": "widgets", "i1": 6 }),
        )
        .await;
    let pr = &watch["data"]["t1"]["pullRequest"];
    assert_eq!(pr["state"], "MERGED");
    assert_eq!(pr["merged"], true);
}

#[tokio::test]
async fn assignment_needs_the_features_header_and_changes_nothing_without_it() {
    let gh = start().await;
    let input = json!({ "input": {
        "id": gh.id(WIDGETS, 1),
        "assigneeIds": [COPILOT_BOT_ID],
        "agentAssignment": { "targetRepositoryId": gh.sim.repo_node_id(WIDGETS), "customInstructions": "x" }
    }});
    let body = gh.graphql(OP_ASSIGN, input.clone()).await;
    assert_eq!(body["data"]["updateIssue"], Value::Null);
    let err = &body["errors"][0];
    assert_eq!(err["type"], "FORBIDDEN");
    assert_eq!(
        err["message"],
        "Bot does not have access to the repository."
    );
    assert_eq!(err["path"], json!(["updateIssue"]));
    assert!(gh.sim.issue_assignees(WIDGETS, 1).is_empty());
    assert_eq!(gh.sim.stats().assignments, 0);

    // The model needs its own flag.
    let mut with_model = input.clone();
    with_model["input"]["agentAssignment"]["model"] = json!("gpt-5");
    let body = gh
        .graphql_with(
            OP_ASSIGN,
            with_model,
            Some("issues_copilot_assignment_api_support"),
        )
        .await;
    assert_eq!(
        body["errors"][0]["message"],
        "Variable $input of type UpdateIssueInput! was provided invalid value for \
         agentAssignment.model (Field is not defined on AgentAssignmentInput)"
    );
    assert!(gh.sim.issue_assignees(WIDGETS, 1).is_empty());
    assert_eq!(gh.sim.stats().assignments, 0);

    // Without the model, the assignment flag alone is enough.
    let body = gh
        .graphql_with(
            OP_ASSIGN,
            input,
            Some("issues_copilot_assignment_api_support"),
        )
        .await;
    assert!(body.get("errors").is_none(), "{body}");
    assert_eq!(gh.sim.stats().assignments, 1);
}

#[tokio::test]
async fn copilot_cannot_be_assigned_where_it_is_not_enabled() {
    let gh = start().await;
    let body = gh.assign("acme/legacy", 1, json!({})).await;
    assert_eq!(body["errors"][0]["type"], "FORBIDDEN");
    assert_eq!(
        body["errors"][0]["message"],
        "Could not assign agent: Copilot cloud agent is not enabled for this repository."
    );
    assert!(gh.sim.issue_assignees("acme/legacy", 1).is_empty());
    let resp = gh
        .post("/agents/repos/acme/legacy/tasks", json!({ "prompt": "hi" }))
        .await;
    assert_eq!(resp.status(), 403);
    let body: Value = resp.json().await.expect("json");
    assert_eq!(
        body["message"],
        "Copilot cloud agent is not enabled for this repository."
    );
}

#[tokio::test]
async fn remove_assignees_and_unassignment_stops_the_run() {
    let gh = start().await;
    let octocat = gh.sim.user_node_id("octocat").expect("octocat");
    let body = gh
        .graphql(
            OP_UNASSIGN,
            json!({ "input": { "assignableId": gh.id(WIDGETS, 2), "assigneeIds": [octocat], "clientMutationId": "c1" } }),
        )
        .await;
    assert!(body.get("errors").is_none(), "{body}");
    assert_eq!(
        body["data"]["removeAssigneesFromAssignable"]["clientMutationId"],
        "c1"
    );
    assert_eq!(gh.sim.issue_assignees(WIDGETS, 2), vec!["hubot"]);

    // Assign Copilot (keeping hubot), then remove it before the PR would open.
    gh.sim
        .set_timings(Duration::from_secs(30), Duration::from_secs(20));
    let body = gh.assign(WIDGETS, 2, json!({})).await;
    assert!(body.get("errors").is_none(), "{body}");
    assert_eq!(
        gh.sim.issue_assignees(WIDGETS, 2),
        vec!["hubot", "copilot-swe-agent"]
    );
    let body = gh
        .graphql(
            OP_UNASSIGN,
            json!({ "input": { "assignableId": gh.id(WIDGETS, 2), "assigneeIds": [COPILOT_BOT_ID] } }),
        )
        .await;
    assert!(body.get("errors").is_none(), "{body}");
    assert_eq!(
        events(&gh.sim, WIDGETS, 2).last().map(String::as_str),
        Some("unassigned")
    );
    // The run wakes after pr_delay, sees Copilot gone and ends: once it is
    // over (the test's only run), no PR may have appeared.
    until("the agent run to end", || {
        (gh.sim.stats().issue_runs_over >= 1).then_some(())
    })
    .await;
    assert!(gh.sim.pull_requests(WIDGETS).is_empty());
}

#[tokio::test]
async fn not_found_errors_have_githubs_shape() {
    let gh = start().await;
    let body = gh
        .graphql(
            OP_ISSUE,
            json!({ "owner": "acme", "name": "nope", "number": 1 }),
        )
        .await;
    assert_eq!(body["data"]["repository"], Value::Null);
    let err = &body["errors"][0];
    assert_eq!(err["type"], "NOT_FOUND");
    assert_eq!(err["path"], json!(["repository"]));
    assert_eq!(
        err["message"],
        "Could not resolve to a Repository with the name 'acme/nope'."
    );
    assert!(err["locations"][0]["line"].is_number());

    let body = gh
        .graphql(
            OP_ISSUE,
            json!({ "owner": "acme", "name": "widgets", "number": 42 }),
        )
        .await;
    assert_eq!(body["errors"][0]["type"], "NOT_FOUND");
    assert_eq!(body["errors"][0]["path"], json!(["repository", "issue"]));
    assert_eq!(
        body["errors"][0]["message"],
        "Could not resolve to an Issue with the number of 42."
    );
    assert!(body["data"]["repository"]["id"].is_string());

    // One missing target in a batch: the others still answer.
    let body = gh
        .graphql(
            OP_WATCH,
            json!({ "o0": "acme", "n0": "widgets", "i0": 1, "o1": "acme", "n1": "widgets", "i1": 42 }),
        )
        .await;
    assert_eq!(body["data"]["t0"]["issue"]["state"], "OPEN");
    assert_eq!(body["data"]["t1"]["pullRequest"], Value::Null);
    assert_eq!(body["errors"][0]["path"], json!(["t1", "pullRequest"]));
    assert_eq!(
        body["errors"][0]["message"],
        "Could not resolve to a PullRequest with the number of 42."
    );
    let body = gh
        .graphql(
            OP_WATCH,
            json!({ "o0": "acme", "n0": "widgets", "i0": 1, "o1": "acme", "n1": "gone", "i1": 1 }),
        )
        .await;
    assert_eq!(body["errors"][0]["path"], json!(["t1"]));
    assert_eq!(body["errors"][0]["type"], "NOT_FOUND");

    // Schema errors are GraphQL errors, not failures.
    let body = gh
        .graphql(
            "{ repository(owner:\"acme\", name:\"widgets\") { nope } }",
            json!({}),
        )
        .await;
    assert!(
        body["errors"][0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("nope")),
        "{body}"
    );
    let body = gh.graphql("{ this is not graphql", json!({})).await;
    assert!(body["errors"].is_array());
    // REST 404.
    let resp = gh.get("/repos/acme/widgets/issues/99/comments").await;
    assert_eq!(resp.status(), 404);
    let body: Value = resp.json().await.expect("json");
    assert_eq!(
        body,
        json!({"message":"Not Found","documentation_url":"https://docs.github.com/rest","status":"404"})
    );
}

#[tokio::test]
async fn bad_tokens_get_401_with_rate_limit_headers() {
    let gh = start().await;
    let resp = gh
        .http
        .post(format!("{}/graphql", gh.url))
        .header("Authorization", "bearer wrong")
        .json(&json!({ "query": "{ rateLimit { cost } }" }))
        .send()
        .await
        .expect("send");
    assert_eq!(resp.status(), 401);
    assert_eq!(resp.headers()["x-ratelimit-resource"], "graphql");
    let body: Value = resp.json().await.expect("json");
    assert_eq!(
        body,
        json!({"message":"Bad credentials","documentation_url":"https://docs.github.com/graphql","status":"401"})
    );
    let resp = gh
        .http
        .get(format!("{}/repos/acme/widgets/pulls/1", gh.url))
        .send()
        .await
        .expect("send");
    assert_eq!(resp.status(), 401);
    let body: Value = resp.json().await.expect("json");
    assert_eq!(body["documentation_url"], "https://docs.github.com/rest");

    // Scheme is case-insensitive; the GHES path works too.
    let resp = gh
        .http
        .post(format!("{}/api/graphql", gh.url))
        .header("Authorization", format!("TOKEN {DEFAULT_GITHUB_TOKEN}"))
        .json(&json!({ "query": "{ rateLimit { cost limit remaining used resetAt } }" }))
        .send()
        .await
        .expect("send");
    assert_eq!(resp.status(), 200);
    let h = resp.headers();
    assert_eq!(h["x-ratelimit-limit"], "5000");
    assert_eq!(h["x-ratelimit-remaining"], "4999");
    assert_eq!(h["x-ratelimit-used"], "1");
    assert!(h.contains_key("x-ratelimit-reset"));
    let body: Value = resp.json().await.expect("json");
    assert_eq!(body["data"]["rateLimit"]["remaining"], 4999);
    assert!(
        body["data"]["rateLimit"]["resetAt"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z') && t.len() == 20)
    );
}

#[tokio::test]
async fn fails_to_start_comments_on_the_issue() {
    let gh = start().await;
    let body = gh.assign(WIDGETS, 3, json!({})).await;
    assert!(body.get("errors").is_none(), "{body}");
    let comment = until("the error comment", || {
        gh.sim
            .timeline(WIDGETS, 3)
            .into_iter()
            .find(|e| e.event == "commented")
    })
    .await;
    assert_eq!(comment.actor, "copilot-swe-agent");
    assert!(comment.detail.starts_with(
        "The agent encountered an error and was unable to start working on this issue: \
         The token used to assign the agent doesn't have the necessary permissions."
    ));
    assert!(gh.sim.pull_requests(WIDGETS).is_empty());
    let comments = gh.get_json("/repos/acme/widgets/issues/3/comments").await;
    assert_eq!(comments[0]["user"]["login"], "Copilot");
}

#[tokio::test]
async fn finishes_with_failure_leaves_a_draft_and_an_error_comment() {
    let gh = start().await;
    gh.assign(WIDGETS, 4, json!({})).await;
    let pr = until("the PR", || gh.sim.pull_requests(WIDGETS).pop()).await;
    until("the failure", || {
        events(&gh.sim, WIDGETS, pr.number)
            .contains(&"copilot_work_finished_failure".to_owned())
            .then_some(())
    })
    .await;
    let pr = gh.sim.pull_request(WIDGETS, pr.number).expect("pr");
    assert!(pr.is_draft);
    assert!(pr.title.starts_with("[WIP] "));
    let comment = gh
        .sim
        .timeline(WIDGETS, pr.number)
        .into_iter()
        .find(|e| e.event == "commented")
        .expect("comment");
    assert!(
        comment
            .detail
            .starts_with("Copilot stopped work on this pull request due to an error.")
    );
    assert!(!events(&gh.sim, WIDGETS, pr.number).contains(&"copilot_work_finished".to_owned()));
}

#[tokio::test]
async fn copilot_mentions_start_a_review_cycle() {
    let gh = start().await;
    gh.assign(WIDGETS, 1, json!({})).await;
    until("work finished", || {
        events(&gh.sim, WIDGETS, 6)
            .contains(&"copilot_work_finished".to_owned())
            .then_some(())
    })
    .await;

    // Validation first: empty body.
    let resp = gh
        .post(
            "/repos/acme/widgets/issues/6/comments",
            json!({ "body": "" }),
        )
        .await;
    assert_eq!(resp.status(), 422);
    let body: Value = resp.json().await.expect("json");
    assert_eq!(
        body,
        json!({"message":"Validation Failed","errors":[{"resource":"IssueComment","code":"missing_field","field":"body"}],"documentation_url":"https://docs.github.com/rest/issues/comments#create-an-issue-comment"})
    );
    let resp = gh
        .http
        .post(format!("{}/repos/acme/widgets/issues/6/comments", gh.url))
        .header("Authorization", format!("bearer {DEFAULT_GITHUB_TOKEN}"))
        .body("{not json")
        .send()
        .await
        .expect("send");
    assert_eq!(resp.status(), 400);
    let body: Value = resp.json().await.expect("json");
    assert_eq!(body["message"], "Problems parsing JSON");
    assert_eq!(gh.sim.stats().comments_on(WIDGETS, 6), 0);

    let resp = gh
        .post(
            "/repos/acme/widgets/issues/6/comments",
            json!({ "body": "@copilot please also update the README" }),
        )
        .await;
    assert_eq!(resp.status(), 201);
    let comment: Value = resp.json().await.expect("json");
    assert_eq!(comment["user"]["login"], "agentgate-user");
    assert_eq!(comment["body"], "@copilot please also update the README");
    assert!(comment["id"].is_number() && comment["node_id"].is_string());
    assert!(
        comment["html_url"]
            .as_str()
            .is_some_and(|u| u.starts_with("https://github.com/acme/widgets/pull/6#issuecomment-"))
    );
    assert_eq!(gh.sim.stats().comments_on(WIDGETS, 6), 1);
    until("the second cycle", || {
        (events(&gh.sim, WIDGETS, 6)
            .iter()
            .filter(|e| *e == "copilot_work_finished")
            .count()
            == 2)
            .then_some(())
    })
    .await;
    let names = events(&gh.sim, WIDGETS, 6);
    let tail: Vec<&str> = names[names.len() - 4..]
        .iter()
        .map(String::as_str)
        .collect();
    assert_eq!(
        tail,
        vec![
            "commented",
            "copilot_work_started",
            "copilot_work_finished",
            "commented"
        ]
    );

    // Comments: since and pagination with a Link header.
    let all = gh.get_json("/repos/acme/widgets/issues/6/comments").await;
    assert_eq!(all.as_array().map(Vec::len), Some(2));
    let resp = gh
        .get("/repos/acme/widgets/issues/6/comments?per_page=1&since=2000-01-01T00:00:00Z")
        .await;
    let link = resp.headers()["link"].to_str().expect("link").to_owned();
    assert!(
        link.contains("rel=\"next\"") && link.contains("rel=\"last\""),
        "{link}"
    );
    assert!(link.contains("page=2&per_page=1"), "{link}");
    let page: Value = resp.json().await.expect("json");
    assert_eq!(page.as_array().map(Vec::len), Some(1));
    let later = gh
        .get_json("/repos/acme/widgets/issues/6/comments?since=2999-01-01T00:00:00Z")
        .await;
    assert_eq!(later, json!([]));
    assert_eq!(
        gh.sim
            .stats()
            .rest_requests_for("GET /repos/{owner}/{repo}/issues/{issue_number}/comments"),
        3
    );
}

#[tokio::test]
async fn agent_tasks_run_to_completion_or_failure() {
    let gh = start().await;
    let resp = gh
        .post(
            "/agents/repos/acme/widgets/tasks",
            json!({ "prompt": "Add a CHANGELOG entry", "base_ref": "main", "model": "gpt-5", "create_pull_request": true }),
        )
        .await;
    assert_eq!(resp.status(), 201);
    let task: Value = resp.json().await.expect("json");
    assert_eq!(task["state"], "queued");
    assert_eq!(task["creator_type"], "user");
    let id = task["id"].as_str().expect("id").to_owned();
    // As documented, the 201 answer has no sessions; GET of the task has them.
    assert!(task.get("sessions").is_none(), "{task}");
    let task = gh.get_json(&format!("/agents/tasks/{id}")).await;
    let session = &task["sessions"][0];
    assert_eq!(session["prompt"], "Add a CHANGELOG entry");
    assert_eq!(session["base_ref"], "main");
    assert_eq!(session["model"], "gpt-5");
    assert_eq!(session["head_ref"], format!("copilot/task-{id}"));
    until("completed", || {
        (gh.sim.agent_task_state(&id).as_deref() == Some("completed")).then_some(())
    })
    .await;
    let task = gh.get_json(&format!("/agents/tasks/{id}")).await;
    assert_eq!(task["state"], "completed");
    assert_eq!(task["sessions"][0]["state"], "completed");
    assert!(task["sessions"][0]["completed_at"].is_string());
    assert_eq!(task["sessions"][0]["error"], Value::Null);
    let artifact = &task["artifacts"][0];
    assert_eq!(artifact["provider"], "github");
    assert_eq!(artifact["type"], "pull");
    let pr_number = gh.sim.pull_requests(WIDGETS)[0].number;
    assert_eq!(
        artifact["data"]["global_id"],
        json!(gh.id(WIDGETS, pr_number))
    );
    assert_eq!(
        gh.sim
            .pull_request(WIDGETS, pr_number)
            .expect("pr")
            .head_ref,
        format!("copilot/task-{id}")
    );
    assert!(
        !gh.sim
            .pull_request(WIDGETS, pr_number)
            .expect("pr")
            .is_draft
    );
    let same = gh
        .get_json(&format!("/agents/repos/acme/widgets/tasks/{id}"))
        .await;
    assert_eq!(same["id"], task["id"]);

    let resp = gh
        .post(
            "/agents/repos/acme/widgets/tasks",
            json!({ "prompt": "Break the build [sim:failed]" }),
        )
        .await;
    let failing: Value = resp.json().await.expect("json");
    let failing_id = failing["id"].as_str().expect("id").to_owned();
    until("failed", || {
        (gh.sim.agent_task_state(&failing_id).as_deref() == Some("failed")).then_some(())
    })
    .await;
    let failing = gh.get_json(&format!("/agents/tasks/{failing_id}")).await;
    assert_eq!(
        failing["sessions"][0]["error"]["message"],
        "The agent failed: tests did not pass"
    );
    assert_eq!(failing["artifacts"], json!([]));

    let list = gh
        .get_json("/agents/repos/acme/widgets/tasks?state=completed,failed&sort=created_at&direction=asc&per_page=10")
        .await;
    let ids: Vec<&str> = list["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .filter_map(|t| t["id"].as_str())
        .collect();
    assert_eq!(ids, vec![id.as_str(), failing_id.as_str()]);
    assert_eq!(list["total_active_count"], 2);
    let only_failed = gh
        .get_json("/agents/repos/acme/widgets/tasks?state=failed")
        .await;
    assert_eq!(only_failed["tasks"].as_array().map(Vec::len), Some(1));

    let resp = gh
        .post("/agents/repos/acme/widgets/tasks", json!({ "prompt": " " }))
        .await;
    assert_eq!(resp.status(), 422);
    assert_eq!(gh.get("/agents/tasks/nope").await.status(), 404);
    assert_eq!(gh.sim.stats().agent_tasks_created, 2);
}

#[tokio::test]
async fn scripted_faults_come_before_any_effect() {
    let gh = start().await;
    gh.sim.faults().script(["502", "ok"]);
    let input = json!({ "input": {
        "id": gh.id(WIDGETS, 1),
        "assigneeIds": [COPILOT_BOT_ID],
        "agentAssignment": { "customInstructions": "x" }
    }});
    let resp = gh
        .graphql_raw(OP_ASSIGN, input.clone(), Some(FEATURES))
        .await;
    assert_eq!(resp.status(), 502);
    let body: Value = resp.json().await.expect("json");
    assert_eq!(body, json!({ "message": "Server Error" }));
    assert_eq!(gh.sim.stats().assignments, 0);
    let body = gh.graphql_with(OP_ASSIGN, input, Some(FEATURES)).await;
    assert!(body.get("errors").is_none(), "{body}");
    assert_eq!(gh.sim.stats().assignments, 1);

    gh.sim
        .faults()
        .script(["rate_limited", "secondary_rate_limit", "bad_credentials"]);
    let resp = gh
        .graphql_raw("{ rateLimit { cost } }", json!({}), None)
        .await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["x-ratelimit-remaining"], "0");
    let reset: u64 = resp.headers()["x-ratelimit-reset"]
        .to_str()
        .expect("reset")
        .parse()
        .expect("number");
    assert!(reset > 1_700_000_000);
    let body: Value = resp.json().await.expect("json");
    assert_eq!(body["errors"][0]["type"], "RATE_LIMITED");
    assert_eq!(
        body["errors"][0]["message"],
        "API rate limit exceeded for user ID 1."
    );
    let resp = gh
        .graphql_raw("{ rateLimit { cost } }", json!({}), None)
        .await;
    assert_eq!(resp.status(), 403);
    assert_eq!(resp.headers()["retry-after"], "1");
    let body: Value = resp.json().await.expect("json");
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|m| m.contains("secondary rate limit"))
    );
    let resp = gh.get("/repos/acme/widgets/issues/1").await;
    assert_eq!(resp.status(), 401);

    // REST secondary limit is a 429.
    gh.sim.faults().script(["secondary_rate_limit"]);
    let resp = gh.get("/repos/acme/widgets/issues/1").await;
    assert_eq!(resp.status(), 429);
    assert_eq!(resp.headers()["retry-after"], "1");
    assert_eq!(resp.headers()["x-ratelimit-resource"], "core");

    // The primary switch.
    gh.sim
        .faults()
        .set_primary_limited(Some(Duration::from_secs(120)));
    let body = gh.graphql("{ rateLimit { cost } }", json!({})).await;
    assert_eq!(body["errors"][0]["type"], "RATE_LIMITED");
    let resp = gh.get("/repos/acme/widgets/issues/1").await;
    assert_eq!(resp.status(), 403);
    assert_eq!(resp.headers()["x-ratelimit-remaining"], "0");
    gh.sim.faults().clear();
    assert_eq!(gh.get("/repos/acme/widgets/issues/1").await.status(), 200);
    assert_eq!(gh.sim.stats().faults_injected, 7);
}

#[tokio::test]
async fn the_budget_is_real() {
    let gh = start_with(GithubConfig {
        rate_limit: 2,
        time_scale: 0.01,
        ..GithubConfig::default()
    })
    .await;
    for remaining in ["1", "0"] {
        let resp = gh
            .graphql_raw("{ rateLimit { cost } }", json!({}), None)
            .await;
        assert_eq!(resp.headers()["x-ratelimit-remaining"], remaining);
    }
    let body = gh.graphql("{ rateLimit { cost } }", json!({})).await;
    assert_eq!(body["errors"][0]["type"], "RATE_LIMITED");
    // REST has its own bucket.
    assert_eq!(gh.get("/repos/acme/widgets/issues/1").await.status(), 200);
}

#[tokio::test]
async fn large_bodies_and_library_api() {
    let gh = start().await;
    let big = "x".repeat(2 * 1024 * 1024);
    let resp = gh
        .post(
            "/repos/acme/widgets/issues/1/comments",
            json!({ "body": big }),
        )
        .await;
    assert_eq!(resp.status(), 413);

    let n = gh
        .sim
        .add_issue("acme/fresh", "Do a thing", Scenario::Never);
    assert_eq!(n, 1);
    gh.assign("acme/fresh", n, json!({})).await;
    assert_eq!(gh.sim.stats().assignments_for("acme/fresh", 1), 1);
    // A `Never` agent run ends without a PR: once it is over, none exists.
    until("the agent run to end", || {
        (gh.sim.stats().issue_runs_over >= 1).then_some(())
    })
    .await;
    assert!(gh.sim.pull_requests("acme/fresh").is_empty());
    let issue = gh.get_json("/api/v3/repos/acme/fresh/issues/1").await;
    assert_eq!(issue["title"], "Do a thing");
    assert!(
        issue["url"]
            .as_str()
            .is_some_and(|u| u.contains("/api/v3/repos/acme/fresh/issues/1"))
    );
    assert!(gh.sim.schema_sdl().contains("suggestedActors"));
}

#[tokio::test]
async fn agent_task_prompt_tokens_choose_the_outcome() {
    let gh = start().await;
    let mut ids = Vec::new();
    for token in [
        "[sim:waiting_for_user]",
        "[sim:timed_out]",
        "[sim:cancelled]",
    ] {
        let resp = gh
            .post(
                "/agents/repos/acme/widgets/tasks",
                json!({ "prompt": format!("Do it {token}") }),
            )
            .await;
        assert_eq!(resp.status(), 201);
        let task: Value = resp.json().await.expect("json");
        ids.push(task["id"].as_str().expect("id").to_owned());
    }
    until("waiting for the user", || {
        (gh.sim.agent_task_state(&ids[0]).as_deref() == Some("waiting_for_user")).then_some(())
    })
    .await;
    for (id, end) in ids.iter().zip(["completed", "timed_out", "cancelled"]) {
        until(end, || {
            (gh.sim.agent_task_state(id).as_deref() == Some(end)).then_some(())
        })
        .await;
    }
    // No PR was asked for.
    assert!(gh.sim.pull_requests(WIDGETS).is_empty());
    let timed_out = gh.get_json(&format!("/agents/tasks/{}", ids[1])).await;
    assert!(timed_out["sessions"][0]["error"]["message"].is_string());
}

/// One REST exchange, checked against GitHub's published description.
async fn checked(
    gh: &Gh,
    problems: &mut Vec<String>,
    label: &str,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let rest = agentgate_testkit::contracts::github_rest();
    let resp = match &body {
        Some(body) => {
            for p in rest.request_problems(label, body) {
                problems.push(format!("request {label}: {p}"));
            }
            gh.post(path, body.clone()).await
        }
        None => gh.get(path).await,
    };
    let status = resp.status().as_u16();
    let answer: Value = resp.json().await.expect("a JSON answer");
    for p in rest.response_problems(label, status, &answer) {
        problems.push(format!("{status} answer of {label} ({path}): {p}"));
    }
    (status, answer)
}

#[tokio::test]
async fn every_rest_answer_follows_githubs_published_schema() {
    const TASKS: &str = "GET /agents/repos/{owner}/{repo}/tasks";
    const TASK: &str = "GET /agents/repos/{owner}/{repo}/tasks/{task_id}";
    const CREATE: &str = "POST /agents/repos/{owner}/{repo}/tasks";
    const COMMENTS: &str = "GET /repos/{owner}/{repo}/issues/{issue_number}/comments";
    const COMMENT: &str = "POST /repos/{owner}/{repo}/issues/{issue_number}/comments";
    const TIMELINE: &str = "GET /repos/{owner}/{repo}/issues/{issue_number}/timeline";
    const PULL: &str = "GET /repos/{owner}/{repo}/pulls/{pull_number}";
    let gh = start().await;
    let mut problems = Vec::new();
    let p = &mut problems;

    // A Copilot run from assignment to a finished pull request (#6), so the
    // timelines, the pull request and the comments hold every kind we serve.
    gh.assign(WIDGETS, 1, json!({})).await;
    until("the finished PR", || {
        gh.sim
            .pull_request(WIDGETS, 6)
            .filter(|pr| !pr.is_draft)
            .map(|_| ())
    })
    .await;
    let (status, _) = checked(
        &gh,
        p,
        COMMENT,
        "/repos/acme/widgets/issues/6/comments",
        Some(json!({ "body": "@copilot please add a test" })),
    )
    .await;
    assert_eq!(status, 201);
    for path in [
        "/repos/acme/widgets/issues/1/timeline",
        "/repos/acme/widgets/issues/6/timeline",
    ] {
        assert_eq!(checked(&gh, p, TIMELINE, path, None).await.0, 200);
    }
    for path in [
        "/repos/acme/widgets/issues/1/comments",
        "/repos/acme/widgets/issues/6/comments",
    ] {
        assert_eq!(checked(&gh, p, COMMENTS, path, None).await.0, 200);
    }
    assert_eq!(
        checked(&gh, p, PULL, "/repos/acme/widgets/pulls/6", None)
            .await
            .0,
        200
    );

    // Agent tasks: created, listed and read while live and once ended.
    let tasks = "/agents/repos/acme/widgets/tasks";
    let body = json!({ "prompt": "Add a CHANGELOG entry", "base_ref": "main",
                       "model": "gpt-5.4", "create_pull_request": true });
    let (status, created) = checked(&gh, p, CREATE, tasks, Some(body)).await;
    assert_eq!(status, 201);
    let id = created["id"].as_str().expect("id").to_owned();
    let one = format!("{tasks}/{id}");
    assert_eq!(checked(&gh, p, TASK, &one, None).await.0, 200);
    let failing = json!({ "prompt": "Break the build [sim:failed]" });
    let (_, failed) = checked(&gh, p, CREATE, tasks, Some(failing)).await;
    let failed_id = failed["id"].as_str().expect("id").to_owned();
    for wanted in [(&id, "completed"), (&failed_id, "failed")] {
        until(wanted.1, || {
            (gh.sim.agent_task_state(wanted.0).as_deref() == Some(wanted.1)).then_some(())
        })
        .await;
    }
    assert_eq!(checked(&gh, p, TASK, &one, None).await.0, 200);
    let failed_path = format!("{tasks}/{failed_id}");
    assert_eq!(checked(&gh, p, TASK, &failed_path, None).await.0, 200);
    let listed = format!("{tasks}?sort=created_at&direction=desc&per_page=100");
    assert_eq!(checked(&gh, p, TASKS, &listed, None).await.0, 200);

    // Refusals, each in the shape GitHub documents for it.
    let blank = json!({ "prompt": " " });
    assert_eq!(checked(&gh, p, CREATE, tasks, Some(blank)).await.0, 422);
    let legacy = "/agents/repos/acme/legacy/tasks";
    let hi = json!({ "prompt": "hi" });
    assert_eq!(checked(&gh, p, CREATE, legacy, Some(hi)).await.0, 403);
    let missing = format!("{tasks}/00000000-0000-0000-0000-000000000000");
    assert_eq!(checked(&gh, p, TASK, &missing, None).await.0, 404);
    let gone = "/repos/acme/widgets/issues/99/comments";
    assert_eq!(checked(&gh, p, COMMENTS, gone, None).await.0, 404);
    let empty = json!({ "body": "" });
    let path = "/repos/acme/widgets/issues/1/comments";
    assert_eq!(checked(&gh, p, COMMENT, path, Some(empty)).await.0, 422);
    assert_eq!(
        checked(&gh, p, PULL, "/repos/acme/widgets/pulls/1", None)
            .await
            .0,
        404
    );
    // The front door's own refusals, on an agent tasks path.
    gh.sim.faults().script(["bad_credentials"]);
    assert_eq!(checked(&gh, p, TASKS, &listed, None).await.0, 401);

    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_strict_rest_check_refuses_an_undocumented_field() {
    // The check above could pass vacuously if strictness were lost: a
    // documented answer with one extra field must fail.
    let rest = agentgate_testkit::contracts::github_rest();
    let label = "GET /agents/repos/{owner}/{repo}/tasks/{task_id}";
    let task = json!({ "id": "t", "state": "queued", "created_at": "2026-01-01T00:00:00Z" });
    assert_eq!(
        rest.response_problems(label, 200, &task),
        Vec::<String>::new()
    );
    let mut extra = task.clone();
    extra["undocumented"] = json!(1);
    let problems = rest.response_problems(label, 200, &extra);
    assert!(
        problems.iter().any(|p| p.contains("undocumented")),
        "{problems:?}"
    );
    let mut bad_state = task;
    bad_state["state"] = json!("paused");
    let problems = rest.response_problems(label, 200, &bad_state);
    assert!(
        problems.iter().any(|p| p.contains("paused")),
        "{problems:?}"
    );
    assert!(!rest.documents("GET /agents/tasks/{task_id}/stop"));
    let post = "POST /agents/repos/{owner}/{repo}/tasks";
    assert!(
        !rest
            .request_problems(post, &json!({ "promt": "typo" }))
            .is_empty()
    );
}
