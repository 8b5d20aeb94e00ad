//! Property tests: hostile GitHub GraphQL and REST responses, and hostile
//! arguments for the three Copilot tools.
//!
//! A tiny axum server stands in for GitHub and answers every request with a
//! generated status, headers and body: GraphQL responses shaped like the
//! ones the tools read (every field possibly of the wrong type, missing or
//! null, `errors` of every kind, rate-limit headers with absurd values), REST
//! objects likewise, arbitrary JSON and garbage. The token never appears in
//! what comes back, even when GitHub echoes it.
//!
//! Properties:
//! - the client ([`GitHub::graphql`], `rest_get`, `rest_post`) gives a value or
//!   a clear error within [`CASE_TIMEOUT`], never a panic;
//! - each tool, run as a task on a real engine (in-memory SQLite) with its
//!   watcher, gets past its first step: the task fails, completes, waits or
//!   retries with a clear message; hostile arguments are refused naming the
//!   field before any task exists.
//!
//! `PROPTEST_CASES` raises the (CI-sized) case counts for long local runs.
//!
//! Beside the properties, one GitHub that answers without end: the client
//! stops at its cap with a clear error (issue 30, item 5).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentgate_backend::{Owner, TaskPhase};
use agentgate_core::engine::{EngineConfig, TaskQuota};
use agentgate_core::runtime::Runtime;
use agentgate_core::store::SqliteStore;
use agentgate_testkit::prop::{self as shared, Canned, CannedUpstream, config};
use backend_copilot::github::GitHub;
use backend_copilot::github::model;
use backend_copilot::{Copilot, CopilotConfig, Endpoint, Token};
use proptest::prelude::*;
use proptest::test_runner::{TestCaseError, TestRunner};
use serde_json::{Map, Value, json};

/// A request or step that takes longer than this counts as a hang.
const CASE_TIMEOUT: Duration = Duration::from_secs(30);
/// The token the client sends; the fake GitHub sometimes echoes it.
const TOKEN: &str = "ghp_propTestSecret0123456789";

/// Which canned queue answers `path`: GraphQL and REST have their own.
fn route(path: &str) -> &'static str {
    if path.ends_with("/graphql") {
        "graphql"
    } else {
        "rest"
    }
}

/// What an empty queue answers.
fn not_found() -> Canned {
    Canned {
        status: 404,
        headers: vec![],
        body: b"{\"message\":\"Not Found\"}".to_vec(),
    }
}

/// One answer for each kind of request, repeating.
fn set(upstream: &CannedUpstream, graphql: Canned, rest: Canned) {
    upstream.set("graphql", vec![graphql]);
    upstream.set("rest", vec![rest]);
}

struct Harness {
    rt: tokio::runtime::Runtime,
    upstream: CannedUpstream,
    url: String,
}

fn harness() -> Harness {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let upstream = CannedUpstream::new(route, not_found());
    let url = rt.block_on(async { format!("{}/api/v3", upstream.serve().await) });
    Harness { rt, upstream, url }
}

impl Harness {
    fn endpoint(&self) -> Endpoint {
        Endpoint::new(&self.url, Some(Token::new(TOKEN))).expect("endpoint")
    }

    fn within<T>(&self, work: impl Future<Output = T>) -> Result<T, TestCaseError> {
        self.rt
            .block_on(async { tokio::time::timeout(CASE_TIMEOUT, work).await })
            .map_err(|_| TestCaseError::fail(format!("no answer within {CASE_TIMEOUT:?}: hang")))
    }
}

/// A message shown to a client: not empty, and without the token.
fn check_message(what: &str, text: &str) -> Result<(), TestCaseError> {
    prop_assert!(!text.trim().is_empty(), "{what}: empty message");
    prop_assert!(!text.contains(TOKEN), "{what} leaks the token: {text}");
    Ok(())
}

// ---------------------------------------------------------------------------
// Generators

/// The shared hostile strings, plus an error that quotes the token.
fn nasty_string() -> BoxedStrategy<String> {
    shared::nasty_string(&[format!("bad credentials {TOKEN}")])
}

fn any_json() -> BoxedStrategy<Value> {
    shared::any_json(nasty_string(), ".{0,8}".boxed(), 3)
}

/// `template` with every field independently kept, dropped or replaced by
/// anything, and leaves now and then of the wrong type; sometimes intact.
fn mutate(template: Value) -> BoxedStrategy<Value> {
    prop_oneof![1 => Just(template.clone()), 3 => mutate_inner(template)].boxed()
}

fn mutate_inner(template: Value) -> BoxedStrategy<Value> {
    match template {
        Value::Object(map) => {
            let fields: Vec<BoxedStrategy<(String, Option<Value>)>> = map
                .into_iter()
                .map(|(k, v)| {
                    let value = prop_oneof![
                        16 => mutate_inner(v).prop_map(Some),
                        1 => Just(None),
                        1 => any_json().prop_map(Some),
                    ];
                    (Just(k), value).boxed()
                })
                .collect();
            fields
                .prop_map(|fields| {
                    Value::Object(
                        fields
                            .into_iter()
                            .filter_map(|(k, v)| v.map(|v| (k, v)))
                            .collect::<Map<_, _>>(),
                    )
                })
                .boxed()
        }
        Value::Array(items) => {
            let items: Vec<BoxedStrategy<Value>> = items.into_iter().map(mutate_inner).collect();
            items.prop_map(Value::Array).boxed()
        }
        leaf => prop_oneof![
            24 => Just(leaf),
            1 => Just(Value::Null),
            1 => any_json(),
        ]
        .boxed(),
    }
}

const TIME: &str = "2026-12-01T10:00:00Z";

/// What every query the tools send reads, in one `data` object: each query
/// picks its fields and ignores the rest.
fn graphql_template() -> Value {
    let issue = json!({
        "id": "I_1", "number": 1, "title": "Fix it", "url": "https://github.example/o/r/issues/1",
        "state": "OPEN",
        "assignedActors": {"nodes": [{"__typename": "Bot", "id": "BOT_1", "login": "copilot-swe-agent"}]},
        "timelineItems": {"nodes": [
            {"__typename": "CrossReferencedEvent", "createdAt": TIME, "source": {
                "__typename": "PullRequest", "number": 2, "url": "https://github.example/o/r/pull/2",
                "title": "WIP", "state": "OPEN", "isDraft": true, "createdAt": TIME,
                "author": {"login": "copilot-swe-agent"}}},
            {"__typename": "IssueComment", "createdAt": TIME, "url": "u", "body": "b",
             "author": {"login": "Copilot"}}
        ]}
    });
    let pull = json!({
        "number": 2, "url": "https://github.example/o/r/pull/2", "title": "WIP", "state": "OPEN",
        "isDraft": false, "merged": false, "updatedAt": TIME, "headRefName": "copilot/fix",
        "baseRefName": "main",
        "timelineItems": {"nodes": [
            {"__typename": "ReadyForReviewEvent", "createdAt": TIME},
            {"__typename": "IssueComment", "createdAt": TIME, "url": "u",
             "body": "Copilot finished work", "author": {"login": "Copilot"}}
        ]}
    });
    let repository = json!({
        "id": "R_1",
        "suggestedActors": {
            "nodes": [{"id": "BOT_1", "login": "copilot-swe-agent", "__typename": "Bot"}],
            "pageInfo": {"hasNextPage": false, "endCursor": null}
        },
        "issue": issue,
        "pullRequest": pull
    });
    json!({
        "rateLimit": {"cost": 1, "remaining": 4999, "resetAt": TIME},
        "repository": repository,
        "t0": repository,
        "t1": repository,
        "updateIssue": {"issue": {"id": "I_1", "number": 1, "url": "https://github.example/o/r/issues/1"}},
        "removeAssigneesFromAssignable": {"clientMutationId": null}
    })
}

/// What the REST calls read (a pull request, a comment, an agent task and
/// lists of them), as one object or a list.
fn rest_template() -> Value {
    json!({
        "id": 7, "number": 2, "state": "completed", "title": "WIP", "draft": false,
        "merged": false, "html_url": "https://github.example/o/r/pull/2",
        "updated_at": TIME, "created_at": TIME, "body": "done",
        "user": {"login": "Copilot"}, "event": "copilot_work_finished",
        "actor": {"login": "Copilot"},
        "tasks": [{"id": "t1", "state": "completed"}], "sessions": [], "artifacts": []
    })
}

fn graphql_errors() -> impl Strategy<Value = Option<Value>> {
    let error = (
        proptest::option::of(prop::sample::select(vec![
            "NOT_FOUND",
            "FORBIDDEN",
            "RATE_LIMITED",
            "UNPROCESSABLE",
            "INTERNAL",
            "SOMETHING_NEW",
        ])),
        nasty_string(),
    )
        .prop_map(
            |(kind, message)| json!({"type": kind, "message": message, "path": ["repository"]}),
        );
    prop_oneof![
        6 => Just(None),
        2 => prop::collection::vec(error, 1..3).prop_map(|e| Some(Value::Array(e))),
        1 => any_json().prop_map(Some),
    ]
}

fn body(template: Value, graphql: bool) -> BoxedStrategy<Vec<u8>> {
    let shaped = if graphql {
        (
            prop_oneof![6 => mutate(template.clone()), 1 => Just(Value::Null), 1 => any_json()],
            graphql_errors(),
        )
            .prop_map(|(data, errors)| {
                let mut body = json!({"data": data});
                if let Some(errors) = errors {
                    body["errors"] = errors;
                }
                body
            })
            .boxed()
    } else {
        prop_oneof![
            3 => mutate(template.clone()),
            1 => prop::collection::vec(mutate(template.clone()), 0..3).prop_map(Value::Array),
            1 => nasty_string().prop_map(|m| json!({"message": m})),
        ]
        .boxed()
    };
    prop_oneof![
        8 => shaped.prop_map(|v| v.to_string().into_bytes()),
        2 => any_json().prop_map(|v| v.to_string().into_bytes()),
        1 => Just(template.to_string().into_bytes()).prop_flat_map(|text| {
            let len = text.len();
            (0..=len).prop_map(move |cut| text[..cut].to_vec())
        }),
        1 => prop::collection::vec(any::<u8>(), 0..256),
        1 => (1usize..2_000_000).prop_map(|n| {
            json!({"message": "x".repeat(n)}).to_string().into_bytes()
        }),
    ]
    .boxed()
}

/// Header values at the edges: huge, negative, not numbers.
fn number_header() -> impl Strategy<Value = String> {
    prop_oneof![
        (0u64..120).prop_map(|n| n.to_string()),
        any::<u64>().prop_map(|n| n.to_string()),
        any::<i64>().prop_map(|n| n.to_string()),
        Just(u64::MAX.to_string()),
        Just(i64::MAX.to_string()),
        Just("soon".to_owned()),
        Just(" 0 ".to_owned()),
    ]
}

fn canned(graphql: bool) -> impl Strategy<Value = Canned> {
    let template = if graphql {
        graphql_template()
    } else {
        rest_template()
    };
    let status = prop_oneof![
        8 => Just(200u16),
        1 => prop::sample::select(vec![201u16, 204, 301, 400, 401, 403, 404, 422, 429, 500, 502, 503]),
    ];
    let headers = (
        proptest::option::of(number_header()),
        proptest::option::of(number_header()),
        proptest::option::of(number_header()),
        proptest::option::of(Just("repo, read:org".to_owned())),
    )
        .prop_map(|(retry, remaining, reset, scopes)| {
            let mut headers = vec![("content-type", "application/json".to_owned())];
            for (name, value) in [
                ("retry-after", retry),
                ("x-ratelimit-remaining", remaining),
                ("x-ratelimit-reset", reset),
                ("x-accepted-oauth-scopes", scopes),
            ] {
                if let Some(value) = value {
                    headers.push((name, value));
                }
            }
            headers
        });
    (status, headers, body(template, graphql)).prop_map(|(status, headers, body)| Canned {
        status,
        headers,
        body,
    })
}

// ---------------------------------------------------------------------------
// Properties

/// One client call, chosen by the generator.
#[derive(Debug, Clone, Copy)]
enum Call {
    Issue,
    SuggestedActors,
    RestPull,
    RestComments,
    RestPostTask,
}

async fn call(github: &GitHub, call: Call) -> Result<String, String> {
    let vars = json!({"owner": "o", "name": "r", "number": 1, "endCursor": null});
    let shown = |e: backend_copilot::github::GitHubError| e.to_string();
    match call {
        Call::Issue => github
            .graphql(model::ISSUE, vars, None)
            .await
            .map_err(shown)?
            .into_data::<model::IssueData>()
            .map(|d| format!("{d:?}"))
            .map_err(shown),
        Call::SuggestedActors => github
            .graphql(model::SUGGESTED_ACTORS_FIRST, vars, None)
            .await
            .map_err(shown)?
            .into_data::<model::SuggestedActorsData>()
            .map(|d| format!("{d:?}"))
            .map_err(shown),
        Call::RestPull => github
            .rest_get::<model::RestPull>("repos/o/r/pulls/2", &[], None)
            .await
            .map(|p| format!("{p:?}"))
            .map_err(shown),
        Call::RestComments => github
            .rest_get::<Vec<model::Comment>>("repos/o/r/issues/2/comments", &[], None)
            .await
            .map(|c| format!("{c:?}"))
            .map_err(shown),
        Call::RestPostTask => github
            .rest_post::<_, model::AgentTask>(
                "agents/repos/o/r/tasks",
                &json!({"problem_statement": "x"}),
                Some(backend_copilot::AGENT_TASKS_API_VERSION),
            )
            .await
            .map(|t| format!("{t:?}"))
            .map_err(shown),
    }
}

#[test]
fn hostile_github_responses_give_a_value_or_a_clear_error() {
    let h = harness();
    let calls = prop::sample::select(vec![
        Call::Issue,
        Call::SuggestedActors,
        Call::RestPull,
        Call::RestComments,
        Call::RestPostTask,
    ]);
    let mut runner = TestRunner::new(config(3072));
    runner
        .run(
            &(calls, canned(true), canned(false)),
            |(which, graphql, rest)| {
                set(&h.upstream, graphql, rest);
                // A fresh client: a rate limit from one case must not turn the
                // next into a fast "waiting for the reset".
                let github = GitHub::new(h.endpoint());
                match h.within(call(&github, which))? {
                    Ok(value) => prop_assert!(!value.contains(TOKEN), "{value}"),
                    Err(message) => check_message("error", &message)?,
                }
                // The backoff GitHub asked for is a usable duration.
                if let Some(wait) = github.backoff() {
                    prop_assert!(wait <= Duration::from_secs(24 * 3600), "{wait:?}");
                }
                Ok(())
            },
        )
        .expect("property");
}

/// Arguments for one tool: its fields with hostile values, and junk.
fn tool_call() -> impl Strategy<Value = (&'static str, Map<String, Value>)> {
    let tool = prop::sample::select(vec![
        backend_copilot::ASSIGN_TOOL,
        backend_copilot::CHANGES_TOOL,
        backend_copilot::CREATE_PR_TOOL,
    ]);
    let args = mutate(json!({
        "owner": "octo-org",
        "repo": "widgets",
        "issue_number": 1,
        "pull_number": "2",
        "instructions": "Please add tests",
        "problem_statement": "Add a README",
        "title": "README",
        "base_ref": "main",
        "model": "gpt",
        "custom_agent": "docs",
        "custom_instructions": "Be brief"
    }));
    (tool, args, any::<prop::sample::Index>()).prop_map(|(tool, args, drop)| {
        // Keep only the fields this tool knows, most of the time.
        let known: &[&str] = match tool {
            backend_copilot::ASSIGN_TOOL => &[
                "owner",
                "repo",
                "issue_number",
                "base_ref",
                "custom_instructions",
                "custom_agent",
                "model",
            ],
            backend_copilot::CHANGES_TOOL => &["owner", "repo", "pull_number", "instructions"],
            _ => &[
                "owner",
                "repo",
                "problem_statement",
                "title",
                "base_ref",
                "model",
            ],
        };
        let Value::Object(all) = args else {
            return (tool, Map::new());
        };
        let keep_extra = drop.index(8) == 0;
        let args = all
            .into_iter()
            .filter(|(k, _)| keep_extra || known.contains(&k.as_str()))
            .collect();
        (tool, args)
    })
}

#[test]
fn copilot_tools_survive_hostile_arguments_and_responses() {
    let h = harness();
    let mut runner = TestRunner::new(config(1200));
    let outcomes = Mutex::new(std::collections::BTreeMap::<String, usize>::new());
    let count = |kind: String| {
        *outcomes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(kind)
            .or_default() += 1;
    };
    runner
        .run(
            &(tool_call(), canned(true), canned(false)),
            |((tool, args), graphql, rest)| {
                set(&h.upstream, graphql, rest);
                let copilot = Copilot::new(h.endpoint(), CopilotConfig::default());
                let tools = copilot.tools();
                let Some(spec) = tools.iter().find(|t| t.tool.name == tool) else {
                    return Err(TestCaseError::fail(format!("no tool {tool}")));
                };
                // The gateway's check: refused arguments name the field.
                if let Err(problem) = spec.check_args(&args) {
                    prop_assert!(problem.contains('`'), "{problem}");
                    count("refused arguments".to_owned());
                    return Ok(());
                }
                let status = h.within(run_first_step(copilot, tool, args))??;
                count(format!("{tool}: {status:?}"));
                Ok(())
            },
        )
        .expect("property");
    let outcomes = outcomes.into_inner().unwrap_or_else(|p| p.into_inner());
    eprintln!("outcomes: {outcomes:#?}");
    // Both sides must be reached, or the property proves little.
    assert!(outcomes.contains_key("refused arguments"), "{outcomes:?}");
    assert!(
        outcomes.keys().filter(|k| k.contains(": ")).count() >= 3,
        "too few tasks ran: {outcomes:?}"
    );
}

/// Creates a task for `tool` on a fresh engine and checks what its first
/// step left behind.
async fn run_first_step(
    copilot: Copilot,
    tool: &str,
    args: Map<String, Value>,
) -> Result<TaskPhase, TestCaseError> {
    let store = SqliteStore::open("sqlite::memory:")
        .await
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    let config = EngineConfig {
        idle_poll: Duration::from_millis(20),
        ..EngineConfig::default()
    };
    let runtime = Runtime::builder(Arc::new(store))
        .config(config)
        .backend(copilot)
        .start()
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    // However the case ends (a failure returned early, or dropped by the
    // harness's time bound), its engine and watcher stop: left running,
    // each polls every 20 ms, and a few hundred of them starve the rest.
    let _stop = runtime.shutdown_token().clone().drop_guard();
    let tasks = runtime.tasks();
    let owner = Owner::new("prop");
    let tools = tasks.tools();
    let spec = tools
        .get(tool)
        .ok_or_else(|| TestCaseError::fail(format!("no tool {tool}")))?;
    let created = tasks
        .create(owner.clone(), spec, args, &TaskQuota::default())
        .await
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    let id = created.id.clone();
    let outcome = |t: &agentgate_core::task::TaskRecord| {
        (
            t.status,
            t.status_message.clone(),
            t.job_state.clone(),
            t.result.clone(),
            t.error.clone(),
        )
    };
    let before = outcome(&created);
    let mut watch = tasks.watch(&owner, vec![id.clone()]);
    let task = loop {
        let task = watch
            .read(&id)
            .await
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        if outcome(&task) != before {
            break task;
        }
        // Woken by the engine's change feed; the timeout only bounds a
        // missed notification.
        let _ = tokio::time::timeout(Duration::from_millis(200), watch.next_change()).await;
    };
    let shown = format!("{:?}", outcome(&task));
    prop_assert!(!shown.contains(TOKEN), "the task leaks the token: {shown}");
    match task.status {
        TaskPhase::Failed => {
            let message = task
                .error
                .as_ref()
                .and_then(|e| e["message"].as_str())
                .unwrap_or("");
            check_message("failed task", message)?;
        }
        TaskPhase::Completed => {
            let result = task.result.clone().unwrap_or_default();
            let text = result["content"][0]["text"].as_str().unwrap_or("");
            check_message("completed task", text)?;
        }
        TaskPhase::Working | TaskPhase::InputRequired => {
            let message = task.status_message.clone().unwrap_or_default();
            check_message("status message", &message)?;
        }
        TaskPhase::Cancelled => prop_assert!(false, "cancelled without a cancel request"),
    }
    Ok(task.status)
}

// ---------------------------------------------------------------------------
// Regressions found by the properties above

/// `retry-after: 18446744073709551615` (or an `x-ratelimit-reset` centuries
/// away) once panicked: the client added it to `Instant::now()`, which
/// overflows. GitHub's waits are capped instead.
#[test]
fn an_absurd_rate_limit_wait_is_capped_not_a_panic() {
    let h = harness();
    for headers in [
        vec![("retry-after", u64::MAX.to_string())],
        vec![
            ("x-ratelimit-remaining", "0".to_owned()),
            ("x-ratelimit-reset", i64::MAX.to_string()),
        ],
    ] {
        let limited = Canned {
            status: 403,
            headers: headers.clone(),
            body: br#"{"message":"API rate limit exceeded"}"#.to_vec(),
        };
        set(&h.upstream, limited.clone(), limited);
        let github = GitHub::new(h.endpoint());
        let answer = h
            .within(call(&github, Call::RestPull))
            .expect("an answer in time");
        let message = answer.expect_err("a rate-limit error");
        assert!(message.contains("rate limit"), "{headers:?}: {message}");
        let wait = github.backoff().expect("calls are held back");
        assert!(wait <= Duration::from_secs(3600), "{headers:?}: {wait:?}");
        // A GraphQL RATE_LIMITED error with the same reset is capped too.
        let graphql = Canned {
            status: 200,
            headers,
            body: br#"{"errors":[{"type":"RATE_LIMITED","message":"slow down"}]}"#.to_vec(),
        };
        set(&h.upstream, graphql.clone(), graphql);
        let github = GitHub::new(h.endpoint());
        let message = h
            .within(call(&github, Call::Issue))
            .expect("an answer in time")
            .expect_err("a rate-limit error");
        assert!(message.contains("rate limit"), "{message}");
        assert!(
            github
                .backoff()
                .is_some_and(|w| w <= Duration::from_secs(3600))
        );
    }
}

/// A body that echoes the token where a decode error quotes it (here as an
/// assignee, which must be an object) once put the token in the error text.
/// Bodies are scrubbed before anything reads them.
#[test]
fn a_token_echoed_in_a_body_never_reaches_an_error() {
    let h = harness();
    let echoed = format!(
        r#"{{"data":{{"repository":{{"id":"R","issue":{{"id":"I","number":1,"title":"t","url":"u","state":"OPEN","assignedActors":{{"nodes":["bad credentials {TOKEN}"]}}}}}}}}}}"#
    );
    let rest = format!(r#"{{"number":"{TOKEN}"}}"#);
    let canned = |body: String| Canned {
        status: 200,
        headers: vec![("content-type", "application/json".to_owned())],
        body: body.into_bytes(),
    };
    set(&h.upstream, canned(echoed), canned(rest));
    let github = GitHub::new(h.endpoint());
    for which in [Call::Issue, Call::RestPull] {
        let message = h
            .within(call(&github, which))
            .expect("an answer in time")
            .expect_err("a decode error");
        assert!(message.contains("<redacted>"), "{message}");
        assert!(!message.contains(TOKEN), "{message}");
    }
}

/// A GitHub that answers one request with `head` (status line and headers,
/// no length: the body ends when the connection does) and then `fill`
/// without end, until the reader hangs up. Gives its URL and the number of
/// body bytes the socket took, known once the reader has hung up.
async fn flooding_github(head: &'static str, fill: u8) -> (String, tokio::task::JoinHandle<u64>) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/api/v3", listener.local_addr().expect("address"));
    let written = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.expect("a connection");
        // The request: read until its head and body are in (they are small).
        let mut request = vec![0; 64 * 1024];
        let _ = socket.read(&mut request).await;
        socket.write_all(head.as_bytes()).await.expect("the head");
        let chunk = vec![fill; 64 * 1024];
        let mut written = 0u64;
        // Ends when the reader closes the connection.
        while let Ok(n) = socket.write(&chunk).await {
            written += n as u64;
        }
        written
    });
    (url, written)
}

/// An endless answer (issue 30, item 5): the client stops at its cap with
/// an error that names it, is not retried, and hangs up having taken about
/// the cap; an endless error body only loses its message.
#[tokio::test]
async fn an_endless_answer_is_cut_at_its_cap_with_a_clear_error() {
    use backend_copilot::github::{ANSWER_CAP, ERROR_BODY_CAP, GitHubError};
    // Sockets buffer a few MiB at most; an unbounded reader takes all.
    let slack = 16 * 1024 * 1024;

    let (url, written) = flooding_github(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n{\"data\":\"",
        b'x',
    )
    .await;
    let github = GitHub::new(Endpoint::new(&url, Some(Token::new(TOKEN))).expect("endpoint"));
    let error = tokio::time::timeout(
        CASE_TIMEOUT,
        github.graphql("query { viewer { login } }", json!({}), None),
    )
    .await
    .expect("an answer in time")
    .expect_err("an endless answer");
    assert!(matches!(error, GitHubError::TooLarge { .. }), "{error:?}");
    assert!(!error.is_transient(), "an oversized answer is not retried");
    assert!(
        error
            .to_string()
            .starts_with("GitHub's answer to graphql_query is over the 16 MiB cap"),
        "{error}"
    );
    let written = tokio::time::timeout(CASE_TIMEOUT, written)
        .await
        .expect("the client hung up")
        .expect("the server task");
    assert!(
        written > ANSWER_CAP as u64 && written < (ANSWER_CAP + slack) as u64,
        "the server wrote {written} bytes"
    );

    let (url, written) = flooding_github(
        "HTTP/1.1 502 Bad Gateway\r\ncontent-type: text/html\r\nconnection: close\r\n\r\n",
        b'y',
    )
    .await;
    let github = GitHub::new(Endpoint::new(&url, Some(Token::new(TOKEN))).expect("endpoint"));
    let error = tokio::time::timeout(
        CASE_TIMEOUT,
        github.graphql("query { viewer { login } }", json!({}), None),
    )
    .await
    .expect("an answer in time")
    .expect_err("a 502");
    match &error {
        GitHubError::Server {
            status: 502,
            message,
        } => assert!(message.contains("over the 64 KiB cap"), "{message}"),
        other => panic!("not the 502: {other:?}"),
    }
    let written = tokio::time::timeout(CASE_TIMEOUT, written)
        .await
        .expect("the client hung up")
        .expect("the server task");
    assert!(
        written < (ERROR_BODY_CAP + slack) as u64,
        "the server wrote {written} bytes"
    );
}
