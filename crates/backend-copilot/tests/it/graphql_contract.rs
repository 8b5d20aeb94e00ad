//! Every GraphQL document the Copilot backend sends to GitHub, validated
//! offline against GitHub's *published* schema (issue 15, item 2).
//!
//! Why: the backend used to be proven only against our own emulator, and the
//! two had drifted into a private dialect the real service does not speak
//! (bots in `Issue.assignees`, for one). Here a real validator, the
//! `apollo-compiler` crate, checks what we send against the SDL vendored in
//! `contracts/github/graphql/` (sources and refresh steps in
//! `contracts/README.md`):
//!
//! - the schema: `schema.graphql` + `changelog-additions.graphql` (the public
//!   schema), and the same + `preview.graphql` (fields GitHub accepts only
//!   with a `GraphQL-Features` header). The vendored copy has one known
//!   upstream defect, two `EnterpriseOwnerInfo` fields defined twice: exactly
//!   those two build errors are tolerated, anything else fails, and a refreshed
//!   copy without the defect fails too, asking for the workaround to go;
//! - every document constant in `backend_copilot::github::model` and the
//!   watcher's batched documents (1 and 25 targets, issues and pull requests
//!   mixed), by executable validation: fields, arguments, fragments,
//!   variable definitions and where they are used;
//! - the variables sent with each, by the spec's CoerceVariableValues against
//!   the operation's declarations (input objects included: a field the schema
//!   does not define, like the preview `model` without `preview.graphql`, is
//!   refused), and no variable sent that the operation does not declare;
//! - what the code really sends: the assign tool, run on a real engine against
//!   a fake GitHub that records every GraphQL request (document, variables,
//!   `GraphQL-Features` header) from the Copilot lookup to the unassignment on
//!   cancel, each request validated the same way;
//! - negative controls: an unknown field, a mistyped variable and an
//!   undeclared variable are refused, so the validator is live.

use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use agentgate_backend::{Owner, TaskId};
use agentgate_core::engine::{EngineConfig, TaskQuota};
use agentgate_core::runtime::Runtime;
use agentgate_core::store::SqliteStore;
use apollo_compiler::diagnostic::ToCliReport;
use apollo_compiler::request::coerce_variable_values;
use apollo_compiler::response::JsonMap;
use apollo_compiler::validation::{DiagnosticList, Valid};
use apollo_compiler::{ExecutableDocument, Schema};
use backend_copilot::github::model;
use backend_copilot::watcher::{self, Target};
use backend_copilot::{Copilot, CopilotConfig, Endpoint, Token};
use serde_json::{Value, json};

const GRAPHQL_DIR: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../contracts/github/graphql"
);
const PUBLIC_FILES: &[&str] = &["schema.graphql", "changelog-additions.graphql"];
const PREVIEW_FILES: &[&str] = &[
    "schema.graphql",
    "changelog-additions.graphql",
    "preview.graphql",
];

/// The upstream defect `contracts/README.md` describes: GitHub's SDL defines
/// these two `EnterpriseOwnerInfo` fields twice (the second copies, near line
/// 15153, are the ones reported). apollo-compiler keeps the first definition
/// of each and reports the second; nothing else may fail.
const KNOWN_UPSTREAM_DEFECTS: [&str; 2] = [
    "duplicate definitions for the `repositoryDeployKeySetting` field of object type `EnterpriseOwnerInfo`",
    "duplicate definitions for the `repositoryDeployKeySettingOrganizations` field of object type `EnterpriseOwnerInfo`",
];

/// The preview feature that adds `AgentAssignmentInput.model`
/// (`preview.graphql`).
const MODEL_PREVIEW_FEATURE: &str = "coding_agent_model_selection";

/// The `&str` constants of `github/model.rs` that are not GraphQL documents.
const NOT_DOCUMENTS: &[&str] = &["COPILOT_LOGIN", "COPILOT_REST_LOGIN"];
/// The documents (and watcher selections) this file validates.
const COVERED_DOCUMENTS: &[&str] = &[
    "SUGGESTED_ACTORS_FIRST",
    "SUGGESTED_ACTORS_NEXT",
    "ISSUE",
    "UPDATE_ISSUE",
    "REMOVE_ASSIGNEES",
    "WATCH_ISSUE",
    "WATCH_PULL",
    "PULL_BY_ID",
];

// ---------------------------------------------------------------------------
// Schema and validation helpers

/// GitHub's public schema: `schema.graphql` + `changelog-additions.graphql`.
fn public_schema() -> &'static Valid<Schema> {
    static SCHEMA: OnceLock<Valid<Schema>> = OnceLock::new();
    SCHEMA.get_or_init(|| build_schema(PUBLIC_FILES))
}

/// The public schema + the preview fields of `preview.graphql`.
fn preview_schema() -> &'static Valid<Schema> {
    static SCHEMA: OnceLock<Valid<Schema>> = OnceLock::new();
    SCHEMA.get_or_init(|| build_schema(PREVIEW_FILES))
}

/// Each diagnostic as (file, message).
fn located_messages(errors: &DiagnosticList) -> Vec<(String, String)> {
    errors
        .iter()
        .map(|d| {
            let file = d
                .error
                .location()
                .and_then(|span| d.sources.get(&span.file_id()))
                .map(|source| source.path().display().to_string())
                .unwrap_or_default();
            (file, d.error.to_string())
        })
        .collect()
}

/// Builds and validates the schema from `files`, tolerating exactly the
/// known upstream duplicate fields of `schema.graphql`.
fn build_schema(files: &[&str]) -> Valid<Schema> {
    let mut builder = Schema::builder();
    for file in files {
        let path = format!("{GRAPHQL_DIR}/{file}");
        let sdl = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("reading the vendored schema {path}: {e}"));
        builder = builder.parse(sdl, file);
    }
    let partial = match builder.build() {
        Ok(_) => panic!(
            "{files:?} now builds without errors: the upstream duplicate `EnterpriseOwnerInfo` \
             fields are gone. Remove KNOWN_UPSTREAM_DEFECTS and the workaround in build_schema \
             from this test, and the note in contracts/README.md."
        ),
        Err(with_errors) => {
            let found = located_messages(&with_errors.errors);
            let expected: Vec<(String, String)> = KNOWN_UPSTREAM_DEFECTS
                .iter()
                .map(|message| ("schema.graphql".to_owned(), (*message).to_owned()))
                .collect();
            assert_eq!(
                found, expected,
                "building {files:?} must fail with exactly the known upstream defect of \
                 schema.graphql (contracts/README.md) and nothing else"
            );
            with_errors.partial
        }
    };
    partial
        .validate()
        .unwrap_or_else(|e| panic!("{files:?} (known duplicates dropped) does not validate:\n{e}"))
}

/// Whether GitHub would accept `document` with `variables` under `schema`:
/// executable validation, then no undeclared variable, then the spec's
/// CoerceVariableValues. `Err` holds every reason given.
fn check_request(
    schema: &Valid<Schema>,
    name: &str,
    document: &str,
    variables: &Value,
) -> Result<(), Vec<String>> {
    let document = ExecutableDocument::parse_and_validate(schema, document, name).map_err(|e| {
        located_messages(&e.errors)
            .into_iter()
            .map(|(_, message)| message)
            .collect::<Vec<_>>()
    })?;
    let operation = document
        .operations
        .get(None)
        .map_err(|e| vec![e.message().to_string()])?;
    let sent: JsonMap = serde_json::from_value(variables.clone())
        .map_err(|e| vec![format!("the variables are not a JSON object: {e}")])?;
    let undeclared: Vec<String> = sent
        .keys()
        .filter(|key| {
            !operation
                .variables
                .iter()
                .any(|declared| declared.name.as_str() == key.as_str())
        })
        .map(|key| {
            format!(
                "variable `{}` is sent but the operation does not declare it",
                key.as_str()
            )
        })
        .collect();
    if !undeclared.is_empty() {
        return Err(undeclared);
    }
    coerce_variable_values(schema, operation, &sent).map_err(|e| vec![e.message().to_string()])?;
    Ok(())
}

fn assert_valid(schema: &Valid<Schema>, name: &str, document: &str, variables: &Value) {
    if let Err(reasons) = check_request(schema, name, document, variables) {
        panic!(
            "{name} is refused by the vendored schema:\n  {}\ndocument: {document}\nvariables: {variables}",
            reasons.join("\n  ")
        );
    }
}

fn assert_refused(
    schema: &Valid<Schema>,
    name: &str,
    document: &str,
    variables: &Value,
) -> Vec<String> {
    match check_request(schema, name, document, variables) {
        Ok(()) => panic!(
            "{name} must be refused but validates:\ndocument: {document}\nvariables: {variables}"
        ),
        Err(reasons) => reasons,
    }
}

// ---------------------------------------------------------------------------
// The variables the backend sends, as crates/backend-copilot/src/assign.rs
// builds them (`find_copilot`, `read_issue`, `AssignCopilot::assign`,
// `AssignCopilot::cancel`). The test at the end checks the ones really sent.

const OWNER: &str = "octo-org";
const REPO: &str = "widgets";
const REPO_ID: &str = "R_kgDOAbCdEf";
const ISSUE_ID: &str = "I_kwDOAbCdEf5zZzZz";
const USER_ID: &str = "U_kgDOAbCdEf";
const COPILOT_ID: &str = "BOT_kgDOC9w8XQ";
const CURSOR: &str = "Y3Vyc29yOnYyOpHOAAE=";
/// Later than any `since` the backend computes, so the fake's timeline items
/// count as new.
const LATER: &str = "2099-01-01T00:00:00Z";

fn suggested_actors_variables(cursor: Option<&str>) -> Value {
    json!({"endCursor": cursor, "name": REPO, "owner": OWNER})
}

fn issue_variables() -> Value {
    json!({"name": REPO, "number": 42, "owner": OWNER})
}

/// `updateIssue`'s input with every optional argument of the tool given;
/// `model` is a preview field.
fn update_issue_variables(model: Option<&str>) -> Value {
    let mut assignment = json!({
        "targetRepositoryId": REPO_ID,
        "baseRef": "main",
        "customInstructions": "Keep the public API stable.",
        "customAgent": "",
    });
    if let Some(model) = model {
        assignment["model"] = json!(model);
    }
    json!({"input": {
        "id": ISSUE_ID,
        "assigneeIds": [USER_ID, COPILOT_ID],
        "agentAssignment": assignment,
    }})
}

fn remove_assignees_variables() -> Value {
    json!({"input": {"assignableId": ISSUE_ID, "assigneeIds": [COPILOT_ID]}})
}

fn issue_target(number: i64) -> Target {
    Target::Issue {
        owner: OWNER.into(),
        repo: REPO.into(),
        number,
        since: "2026-12-01T10:00:00Z".into(),
    }
}

fn pull_target(number: i64) -> Target {
    Target::Pull {
        owner: OWNER.into(),
        repo: REPO.into(),
        number,
        since: "2026-12-01T10:00:00Z".into(),
    }
}

// ---------------------------------------------------------------------------
// The schema

#[test]
fn vendored_schema_builds_with_only_the_known_upstream_duplicate_fields() {
    let public = public_schema();
    let preview = preview_schema();
    // The additions are loaded (the documents need them) ...
    let assignment = public
        .get_input_object("AgentAssignmentInput")
        .expect("changelog-additions.graphql defines AgentAssignmentInput");
    assert!(assignment.fields.contains_key("targetRepositoryId"));
    // ... and the preview field is only in the preview variant.
    assert!(!assignment.fields.contains_key("model"));
    let with_preview = preview
        .get_input_object("AgentAssignmentInput")
        .expect("AgentAssignmentInput in the preview schema");
    assert!(with_preview.fields.contains_key("model"));
}

#[test]
fn every_document_constant_of_the_model_is_covered_here() {
    let source = include_str!("../../src/github/model.rs");
    let mut constants: Vec<&str> = source
        .lines()
        .filter_map(|line| line.trim().strip_prefix("pub const "))
        .filter_map(|rest| rest.split_once(": &str"))
        .map(|(name, _)| name.trim())
        .filter(|name| !NOT_DOCUMENTS.contains(name))
        .collect();
    constants.sort_unstable();
    let mut covered = COVERED_DOCUMENTS.to_vec();
    covered.sort_unstable();
    assert_eq!(
        constants, covered,
        "github/model.rs has a `&str` constant this test does not know: validate the new \
         document here (COVERED_DOCUMENTS) or list it in NOT_DOCUMENTS"
    );
}

// ---------------------------------------------------------------------------
// The documents, with the variables they are sent with

#[test]
fn suggested_actors_documents_are_valid_against_the_public_schema() {
    let schema = public_schema();
    assert_valid(
        schema,
        "SUGGESTED_ACTORS_FIRST",
        model::SUGGESTED_ACTORS_FIRST,
        &suggested_actors_variables(None),
    );
    assert_valid(
        schema,
        "SUGGESTED_ACTORS_NEXT",
        model::SUGGESTED_ACTORS_NEXT,
        &suggested_actors_variables(Some(CURSOR)),
    );
    // The later-page document needs its cursor: the backend must not send it
    // for the first page.
    let reasons = assert_refused(
        schema,
        "SUGGESTED_ACTORS_NEXT without a cursor",
        model::SUGGESTED_ACTORS_NEXT,
        &suggested_actors_variables(None),
    );
    assert!(
        reasons.iter().any(|r| r.contains("endCursor")),
        "{reasons:?}"
    );
}

#[test]
fn pull_by_id_document_is_valid_against_the_public_schema() {
    let schema = public_schema();
    let variables = json!({"id": "PR_kwDOAbCdEf5u7Vw9"});
    assert_valid(schema, "PULL_BY_ID", model::PULL_BY_ID, &variables);
    assert_refused(
        schema,
        "PULL_BY_ID without its id",
        model::PULL_BY_ID,
        &json!({}),
    );
}

#[test]
fn issue_document_is_valid_against_the_public_schema() {
    assert_valid(public_schema(), "ISSUE", model::ISSUE, &issue_variables());
}

#[test]
fn update_issue_document_without_a_model_is_valid_against_the_public_schema() {
    let schema = public_schema();
    let variables = update_issue_variables(None);
    assert_valid(schema, "UPDATE_ISSUE", model::UPDATE_ISSUE, &variables);
    // What coercion checked, spelled out: every input field sent is defined
    // on its input type.
    for (type_name, fields) in [
        ("UpdateIssueInput", &variables["input"]),
        (
            "AgentAssignmentInput",
            &variables["input"]["agentAssignment"],
        ),
    ] {
        let input = schema
            .get_input_object(type_name)
            .unwrap_or_else(|| panic!("the public schema has no input {type_name}"));
        for field in fields.as_object().expect("an input object").keys() {
            assert!(
                input.fields.contains_key(field.as_str()),
                "{type_name}.{field} is sent but not in the public schema"
            );
        }
    }
    // `baseRef` is only sent when the tool's caller gives one.
    let mut without_base = variables.clone();
    if let Some(assignment) = without_base["input"]["agentAssignment"].as_object_mut() {
        assignment.remove("baseRef");
    }
    assert_valid(
        schema,
        "UPDATE_ISSUE without baseRef",
        model::UPDATE_ISSUE,
        &without_base,
    );
}

#[test]
fn update_issue_with_a_model_is_refused_by_the_public_schema_and_valid_with_the_preview() {
    let variables = update_issue_variables(Some("claude-sonnet-4.5"));
    let reasons = assert_refused(
        public_schema(),
        "UPDATE_ISSUE with model",
        model::UPDATE_ISSUE,
        &variables,
    );
    assert_eq!(
        reasons,
        ["Input object has key model not in type AgentAssignmentInput"],
        "refused for the preview field, and only for it"
    );
    assert_valid(
        preview_schema(),
        "UPDATE_ISSUE with model",
        model::UPDATE_ISSUE,
        &variables,
    );
    // And the backend sends the preview's feature header with it.
    assert!(
        backend_copilot::github::ASSIGNMENT_FEATURES
            .split(',')
            .any(|feature| feature.trim() == MODEL_PREVIEW_FEATURE),
        "{}",
        backend_copilot::github::ASSIGNMENT_FEATURES
    );
}

#[test]
fn remove_assignees_document_is_valid_against_the_public_schema() {
    assert_valid(
        public_schema(),
        "REMOVE_ASSIGNEES",
        model::REMOVE_ASSIGNEES,
        &remove_assignees_variables(),
    );
}

#[test]
fn watcher_batch_for_one_target_is_valid_against_the_public_schema() {
    for (what, target) in [("issue", issue_target(1)), ("pull request", pull_target(2))] {
        let (document, variables) = watcher::batch_query(&[(TaskId::generate(), target)]);
        assert_valid(
            public_schema(),
            &format!("watcher batch, one {what}"),
            &document,
            &variables,
        );
    }
}

#[test]
fn watcher_batch_for_25_targets_mixing_issues_and_pull_requests_is_valid_against_the_public_schema()
{
    assert_eq!(watcher::BATCH, 25, "the watcher's batch size changed");
    let targets: Vec<(TaskId, Target)> = (0..i64::try_from(watcher::BATCH).expect("a small batch"))
        .map(|n| {
            let target = if n % 2 == 0 {
                issue_target(100 + n)
            } else {
                pull_target(100 + n)
            };
            (TaskId::generate(), target)
        })
        .collect();
    let (document, variables) = watcher::batch_query(&targets);
    assert!(document.contains("t24:repository("), "{document}");
    assert_eq!(
        variables.as_object().map(serde_json::Map::len),
        Some(4 * watcher::BATCH),
        "four variables per target"
    );
    assert_valid(
        public_schema(),
        "watcher batch, 25 targets",
        &document,
        &variables,
    );
}

// ---------------------------------------------------------------------------
// Negative controls: the validator refuses what GitHub would refuse

#[test]
fn negative_control_a_field_missing_from_issue_is_refused() {
    let document = "query($name:String!$number:Int!$owner:String!){repository(owner: $owner, name: $name){issue(number: $number){id,copilotSessionUrl}}}";
    let reasons = assert_refused(
        public_schema(),
        "unknown field",
        document,
        &issue_variables(),
    );
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("copilotSessionUrl") && r.contains("Issue")),
        "{reasons:?}"
    );
}

#[test]
fn negative_control_a_mistyped_or_undeclared_variable_is_refused() {
    let schema = public_schema();
    let mistyped = json!({"name": REPO, "number": "42", "owner": OWNER});
    let reasons = assert_refused(schema, "mistyped variable", model::ISSUE, &mistyped);
    assert!(reasons.iter().any(|r| r.contains("number")), "{reasons:?}");
    let mut undeclared = issue_variables();
    undeclared["state"] = json!("OPEN");
    let reasons = assert_refused(schema, "undeclared variable", model::ISSUE, &undeclared);
    assert!(reasons.iter().any(|r| r.contains("state")), "{reasons:?}");
    let mut unknown_input = update_issue_variables(None);
    unknown_input["input"]["assignees"] = json!(["octocat"]);
    let reasons = assert_refused(
        schema,
        "unknown input field",
        model::UPDATE_ISSUE,
        &unknown_input,
    );
    assert!(
        reasons.iter().any(|r| r.contains("assignees")),
        "{reasons:?}"
    );
}

// ---------------------------------------------------------------------------
// What the backend really sends: the assign tool against a recording fake

/// One GraphQL request as it reached the fake GitHub.
#[derive(Debug, Clone)]
struct SentRequest {
    features: Option<String>,
    query: String,
    variables: Value,
}

/// A fake GitHub that records every GraphQL request and answers each with
/// everything any of the backend's documents reads (the client ignores the
/// rest): Copilot on the second page of `suggestedActors`, an issue with a
/// user assignee and Copilot's draft pull request cross-referenced, and that
/// pull request. REST calls (the pull request's timeline) get `[]`.
#[derive(Debug, Clone, Default)]
struct FakeGitHub {
    sent: Arc<Mutex<Vec<SentRequest>>>,
}

impl FakeGitHub {
    fn sent(&self) -> Vec<SentRequest> {
        self.sent
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn answer(&self, path: &str, headers: &axum::http::HeaderMap, body: &[u8]) -> Value {
        if !path.ends_with("/graphql") {
            return json!([]);
        }
        let request: Value = serde_json::from_slice(body).unwrap_or_default();
        let sent = SentRequest {
            features: headers
                .get("graphql-features")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned),
            query: request["query"].as_str().unwrap_or_default().to_owned(),
            variables: request["variables"].clone(),
        };
        let data = fake_data(&sent.variables);
        self.sent
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(sent);
        json!({ "data": data })
    }
}

fn fake_data(variables: &Value) -> Value {
    let later_page = variables.get("endCursor").is_some_and(|c| !c.is_null());
    let suggested = if later_page {
        json!({
            "nodes": [{"id": COPILOT_ID, "login": model::COPILOT_LOGIN, "__typename": "Bot"}],
            "pageInfo": {"hasNextPage": false, "endCursor": null}
        })
    } else {
        // A user (not a Bot: no fields selected) and more to come.
        json!({"nodes": [{}], "pageInfo": {"hasNextPage": true, "endCursor": CURSOR}})
    };
    let url = format!("https://github.com/{OWNER}/{REPO}");
    let issue = json!({
        "id": ISSUE_ID, "number": 1, "title": "Fix it", "url": format!("{url}/issues/1"),
        "state": "OPEN",
        // Both fields, so the fake answers whichever the backend reads.
        "assignees": {"nodes": [{"id": USER_ID, "login": "octocat"}]},
        "assignedActors": {"nodes": [{"__typename": "User", "id": USER_ID, "login": "octocat"}]},
        "timelineItems": {"nodes": [{
            "__typename": "CrossReferencedEvent", "createdAt": LATER,
            "source": {
                "__typename": "PullRequest", "number": 7, "url": format!("{url}/pull/7"),
                "title": "WIP: Fix it", "state": "OPEN", "isDraft": true, "createdAt": LATER,
                "author": {"login": model::COPILOT_LOGIN}
            }
        }]}
    });
    let pull = json!({
        "number": 7, "url": format!("{url}/pull/7"), "title": "WIP: Fix it", "state": "OPEN",
        "isDraft": true, "merged": false, "updatedAt": LATER, "headRefName": "copilot/fix-it",
        "baseRefName": "main", "timelineItems": {"nodes": []}
    });
    let repository = json!({
        "id": REPO_ID, "suggestedActors": suggested, "issue": issue, "pullRequest": pull
    });
    let mut data = serde_json::Map::new();
    data.insert(
        "rateLimit".into(),
        json!({"cost": 1, "remaining": 4999, "resetAt": LATER}),
    );
    data.insert(
        "updateIssue".into(),
        json!({"issue": {"id": ISSUE_ID, "number": 1, "url": format!("{url}/issues/1")}}),
    );
    data.insert(
        "removeAssigneesFromAssignable".into(),
        json!({"clientMutationId": null}),
    );
    for n in 0..watcher::BATCH {
        data.insert(format!("t{n}"), repository.clone());
    }
    data.insert("repository".into(), repository);
    Value::Object(data)
}

async fn serve(fake: FakeGitHub) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind a local port for the fake GitHub");
    let addr = listener.local_addr().expect("the fake GitHub's address");
    let app = axum::Router::new().fallback(
        move |uri: axum::http::Uri, headers: axum::http::HeaderMap, body: axum::body::Bytes| {
            let answer = fake.answer(uri.path(), &headers, &body);
            async move { axum::Json(answer) }
        },
    );
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}/api/v3")
}

/// Waits until what was sent satisfies `done`.
async fn wait_for(fake: &FakeGitHub, what: &str, done: impl Fn(&[SentRequest]) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let sent = fake.sent();
        if done(&sent) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "waited 60 s for {what}; sent so far:\n{}",
            sent.iter()
                .map(|r| r.query.as_str())
                .collect::<Vec<_>>()
                .join("\n")
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn count(sent: &[SentRequest], document: &str) -> usize {
    sent.iter().filter(|r| r.query == document).count()
}

fn is_pull_batch(request: &SentRequest) -> bool {
    request.query.contains("rateLimit") && request.query.contains("pullRequest(number:$i")
}

fn is_issue_batch(request: &SentRequest) -> bool {
    request.query.contains("rateLimit") && request.query.contains("issue(number:$i")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_graphql_request_the_assign_tool_sends_is_valid_against_the_published_schema() {
    let fake = FakeGitHub::default();
    let url = serve(fake.clone()).await;
    let endpoint = Endpoint::new(&url, Some(Token::new("ghp_contractTest0123456789")))
        .expect("the fake GitHub's endpoint");
    let config = CopilotConfig {
        unassign_on_cancel: true,
        poll_min_ms: 100,
        ..CopilotConfig::default()
    };
    let copilot = Copilot::new(endpoint, config);
    let store = SqliteStore::open("sqlite::memory:")
        .await
        .expect("an in-memory store");
    let engine_config = EngineConfig {
        idle_poll: Duration::from_millis(20),
        ..EngineConfig::default()
    };
    let runtime = Runtime::builder(Arc::new(store))
        .config(engine_config)
        .backend(copilot)
        .start()
        .expect("start");
    let service = runtime.tasks();
    let tools = service.tools();
    let assign = tools
        .get(backend_copilot::ASSIGN_TOOL)
        .expect("the assign tool");

    // One task with every optional argument (the preview `model` included),
    // one with none.
    let owner = Owner::new("contract");
    let mut tasks = Vec::new();
    for args in [
        json!({
            "owner": OWNER, "repo": REPO, "issue_number": 1, "base_ref": "main",
            "custom_instructions": "Keep the public API stable.", "custom_agent": "docs",
            "model": "claude-sonnet-4.5"
        }),
        json!({"owner": OWNER, "repo": REPO, "issue_number": 2}),
    ] {
        let args = args.as_object().cloned().expect("arguments are an object");
        let task = service
            .create(owner.clone(), assign, args, &TaskQuota::default())
            .await
            .expect("create the assign task");
        tasks.push(task.id);
    }

    // Both assigned, Copilot's pull request found and watched ...
    wait_for(&fake, "both assignments and a pull request watch", |sent| {
        count(sent, model::UPDATE_ISSUE) >= 2 && sent.iter().any(is_pull_batch)
    })
    .await;
    // ... then cancelled: Copilot is unassigned (`unassign_on_cancel`).
    for id in &tasks {
        service
            .cancel(&owner, id)
            .await
            .expect("cancel the assign task");
    }
    wait_for(&fake, "both unassignments on cancel", |sent| {
        count(sent, model::REMOVE_ASSIGNEES) >= 2
    })
    .await;
    runtime.stop().await.expect("stop");

    let sent = fake.sent();
    for (document, name) in [
        (model::SUGGESTED_ACTORS_FIRST, "SUGGESTED_ACTORS_FIRST"),
        (model::SUGGESTED_ACTORS_NEXT, "SUGGESTED_ACTORS_NEXT"),
        (model::ISSUE, "ISSUE"),
        (model::UPDATE_ISSUE, "UPDATE_ISSUE"),
        (model::REMOVE_ASSIGNEES, "REMOVE_ASSIGNEES"),
    ] {
        assert!(count(&sent, document) > 0, "{name} was never sent");
    }
    assert!(
        sent.iter().any(is_issue_batch),
        "no watcher batch for an issue"
    );

    // Every request: valid against the public schema, or sent with the
    // preview's feature header and valid against the preview schema.
    let mut previewed = Vec::new();
    for (n, request) in sent.iter().enumerate() {
        let name = format!("request {n}");
        let Err(public_reasons) =
            check_request(public_schema(), &name, &request.query, &request.variables)
        else {
            continue;
        };
        let preview_enabled = request.features.as_deref().is_some_and(|features| {
            features
                .split(',')
                .any(|feature| feature.trim() == MODEL_PREVIEW_FEATURE)
        });
        assert!(
            preview_enabled,
            "{name} is refused by the public schema ({public_reasons:?}) and was sent without \
             `GraphQL-Features: {MODEL_PREVIEW_FEATURE}`:\n{request:?}"
        );
        assert_valid(preview_schema(), &name, &request.query, &request.variables);
        previewed.push((request.clone(), public_reasons));
    }
    // Only the assignment of the task given a `model` needed the preview,
    // and only for that field.
    assert!(!previewed.is_empty(), "the `model` was never sent");
    for (request, reasons) in &previewed {
        assert_eq!(request.query, model::UPDATE_ISSUE, "{request:?}");
        assert_eq!(
            request.variables["input"]["agentAssignment"]["model"],
            json!("claude-sonnet-4.5"),
            "{request:?}"
        );
        assert_eq!(
            reasons,
            &["Input object has key model not in type AgentAssignmentInput"]
        );
    }
}

// ---------------------------------------------------------------------------
// The emulator's GraphQL schema against GitHub's

/// A field as compared: name, type, and each argument's name and type.
type FieldShape = (String, String, Vec<(String, String)>);

/// Every type the GitHub emulator serves is GitHub's: same kind, and each
/// field, argument, union member, enum value and input field it has exists in
/// the public schema (or the preview additions) with the same type. The
/// emulator may serve less than GitHub, never something else.
#[test]
fn the_emulators_graphql_types_are_githubs() {
    use apollo_compiler::schema::ExtendedType;

    let sim = agentgate_sim::github::GithubSim::new(Default::default());
    let emulated = match Schema::parse(sim.schema_sdl(), "emulator.graphql") {
        Ok(schema) => schema,
        Err(with_errors) => with_errors.partial,
    };
    let github = preview_schema();
    let root = |name: &str| -> String {
        let definition = &emulated.schema_definition;
        if definition.query.as_ref().is_some_and(|q| q.name == name) {
            "Query".into()
        } else if definition.mutation.as_ref().is_some_and(|m| m.name == name) {
            "Mutation".into()
        } else {
            name.to_owned()
        }
    };
    let mut problems = Vec::new();
    let mut compared = 0;
    for (name, ty) in &emulated.types {
        if ty.is_built_in() {
            continue;
        }
        let real_name = root(name);
        let Some(real) = github.types.get(real_name.as_str()) else {
            problems.push(format!("type {name} is not in GitHub's schema"));
            continue;
        };
        compared += 1;
        let fields = |ty: &ExtendedType| -> Option<Vec<FieldShape>> {
            let list = match ty {
                ExtendedType::Object(o) => o.fields.values().map(|f| f.node.clone()).collect(),
                ExtendedType::Interface(i) => i
                    .fields
                    .values()
                    .map(|f| f.node.clone())
                    .collect::<Vec<_>>(),
                _ => return None,
            };
            Some(
                list.iter()
                    .map(|f| {
                        let args = f
                            .arguments
                            .iter()
                            .map(|a| (a.name.to_string(), a.ty.to_string()))
                            .collect();
                        (f.name.to_string(), f.ty.to_string(), args)
                    })
                    .collect(),
            )
        };
        match (ty, real) {
            (ExtendedType::Object(_), ExtendedType::Object(_))
            | (ExtendedType::Interface(_), ExtendedType::Interface(_)) => {
                let theirs = fields(real).unwrap_or_default();
                for (field, field_type, args) in fields(ty).unwrap_or_default() {
                    let Some((_, real_type, real_args)) =
                        theirs.iter().find(|(f, _, _)| *f == field)
                    else {
                        problems.push(format!("{real_name}.{field} is not in GitHub's schema"));
                        continue;
                    };
                    if *real_type != field_type {
                        problems.push(format!(
                            "{real_name}.{field}: the emulator says {field_type}, GitHub {real_type}"
                        ));
                    }
                    for (arg, arg_type) in args {
                        match real_args.iter().find(|(a, _)| *a == arg) {
                            Some((_, real)) if *real == arg_type => {}
                            Some((_, real)) => problems.push(format!(
                                "{real_name}.{field}({arg}): the emulator says {arg_type}, \
                                 GitHub {real}"
                            )),
                            None => problems.push(format!(
                                "{real_name}.{field}({arg}) is not in GitHub's schema"
                            )),
                        }
                    }
                }
            }
            (ExtendedType::Union(ours), ExtendedType::Union(theirs)) => {
                for member in &ours.members {
                    if !theirs.members.contains(member) {
                        problems.push(format!("{member} is not a member of GitHub's {name}"));
                    }
                }
            }
            (ExtendedType::Enum(ours), ExtendedType::Enum(theirs)) => {
                for value in ours.values.keys() {
                    if !theirs.values.contains_key(value) {
                        problems.push(format!("{name}.{value} is not in GitHub's enum"));
                    }
                }
            }
            (ExtendedType::InputObject(ours), ExtendedType::InputObject(theirs)) => {
                for (field, definition) in &ours.fields {
                    match theirs.fields.get(field) {
                        Some(real) if real.ty == definition.ty => {}
                        Some(real) => problems.push(format!(
                            "{name}.{field}: the emulator says {}, GitHub {}",
                            definition.ty, real.ty
                        )),
                        None => problems.push(format!("{name}.{field} is not in GitHub's input")),
                    }
                }
            }
            (ExtendedType::Scalar(_), ExtendedType::Scalar(_)) => {}
            _ => problems.push(format!("{name} is a different kind of type on GitHub")),
        }
    }
    assert!(compared >= 10, "only {compared} types compared");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
