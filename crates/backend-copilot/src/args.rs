//! The tools' inputs, their validation, and their upstream-shaped schemas.
//!
//! `issue_number` and `pull_number` take a number or a numeric string, as
//! github-mcp-server's weak decoding does. Unknown fields are refused by name
//! rather than dropped.

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Value, json};

/// `assign_copilot_to_issue`'s arguments.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct AssignArgs {
    pub owner: String,
    pub repo: String,
    #[serde(deserialize_with = "number_or_numeric_string")]
    pub issue_number: i64,
    #[serde(default)]
    pub base_ref: Option<String>,
    #[serde(default)]
    pub custom_instructions: Option<String>,
    #[serde(default)]
    pub custom_agent: Option<String>,
    #[serde(default)]
    pub model: Option<String>,
}

/// `request_copilot_changes`'s arguments.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ChangesArgs {
    pub owner: String,
    pub repo: String,
    #[serde(deserialize_with = "number_or_numeric_string")]
    pub pull_number: i64,
    pub instructions: String,
}

/// `create_pull_request_with_copilot`'s arguments.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CreatePrArgs {
    pub owner: String,
    pub repo: String,
    pub problem_statement: String,
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub base_ref: Option<String>,
    #[serde(default)]
    pub model: Option<String>,
}

/// Arguments that passed [`Validate`]: a job takes `Valid<Args>`, so bad
/// input is refused with its field named before any task is created.
#[derive(Debug, Clone)]
pub(crate) struct Valid<T>(pub T);

/// Checks beyond the JSON shape.
pub(crate) trait Validate {
    fn validate(&self) -> Result<(), String>;
}

impl<'de, T: Deserialize<'de> + Validate> Deserialize<'de> for Valid<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let inner = T::deserialize(d)?;
        inner.validate().map_err(serde::de::Error::custom)?;
        Ok(Self(inner))
    }
}

impl<T: JsonSchema> JsonSchema for Valid<T> {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        T::schema_name()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        T::json_schema(generator)
    }
}

/// Longest free text we pass on (GitHub's comment body limit is 65,536).
pub(crate) const MAX_TEXT: usize = 65_000;

/// `f` as an integer, if it is a whole number an `i64` holds (upstream
/// accepts `5.0` for 5).
fn whole(f: f64) -> Option<i64> {
    // i64::MAX is not exact as an f64; 2^63 is the first value beyond.
    const LIMIT: f64 = 9_223_372_036_854_775_808.0;
    #[expect(
        clippy::cast_possible_truncation,
        reason = "f is whole and within i64's range, so the cast is exact"
    )]
    (f.fract() == 0.0 && (-LIMIT..LIMIT).contains(&f)).then_some(f as i64)
}

fn number_or_numeric_string<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    let value = Value::deserialize(d)?;
    let number = match &value {
        Value::Number(n) => n.as_i64().or_else(|| whole(n.as_f64()?)),
        Value::String(s) => s.trim().parse::<i64>().ok(),
        _ => None,
    };
    match number {
        Some(n) if (1..=i64::from(i32::MAX)).contains(&n) => Ok(n),
        _ => Err(serde::de::Error::custom(format!(
            "expected a positive whole number (or a string of digits), got {value}"
        ))),
    }
}

/// Checks an owner login: GitHub allows letters, digits and single hyphens,
/// up to 39 characters.
pub(crate) fn check_owner(owner: &str) -> Result<(), String> {
    let ok = !owner.is_empty()
        && owner.len() <= 39
        && owner.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "field `owner`: `{owner}` is not a GitHub user or organisation login (letters, \
             digits and hyphens, at most 39)"
        ))
    }
}

/// Checks a repository name: letters, digits, `.`, `-`, `_`, up to 100.
pub(crate) fn check_repo(repo: &str) -> Result<(), String> {
    let ok = !repo.is_empty()
        && repo.len() <= 100
        && repo != "."
        && repo != ".."
        && repo
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "field `repo`: `{repo}` is not a repository name (letters, digits, `.`, `-`, `_`, \
             at most 100; without the owner)"
        ))
    }
}

/// Checks an optional short token such as a branch, model or agent name.
pub(crate) fn check_word(field: &str, value: &Option<String>) -> Result<(), String> {
    match value {
        Some(v) if v.trim().is_empty() => Err(format!(
            "field `{field}`: is empty; leave it out to use the default"
        )),
        Some(v) if v.len() > 255 || v.chars().any(|c| c.is_whitespace() || c.is_control()) => Err(
            format!("field `{field}`: `{v}` must be a single word of at most 255 characters"),
        ),
        _ => Ok(()),
    }
}

/// Checks free text: present, not too long.
pub(crate) fn check_text(field: &str, value: &str, required: bool) -> Result<(), String> {
    if required && value.trim().is_empty() {
        return Err(format!("field `{field}`: must not be empty"));
    }
    if value.len() > MAX_TEXT {
        return Err(format!(
            "field `{field}`: is {} bytes; GitHub takes at most {MAX_TEXT}",
            value.len()
        ));
    }
    Ok(())
}

impl Validate for AssignArgs {
    fn validate(&self) -> Result<(), String> {
        check_owner(&self.owner)?;
        check_repo(&self.repo)?;
        check_word("base_ref", &self.base_ref)?;
        check_word("custom_agent", &self.custom_agent)?;
        check_word("model", &self.model)?;
        if let Some(text) = &self.custom_instructions {
            check_text("custom_instructions", text, false)?;
        }
        Ok(())
    }
}

impl Validate for ChangesArgs {
    fn validate(&self) -> Result<(), String> {
        check_owner(&self.owner)?;
        check_repo(&self.repo)?;
        check_text("instructions", &self.instructions, true)
    }
}

impl Validate for CreatePrArgs {
    fn validate(&self) -> Result<(), String> {
        check_owner(&self.owner)?;
        check_repo(&self.repo)?;
        check_text("problem_statement", &self.problem_statement, true)?;
        if let Some(title) = &self.title {
            check_text("title", title, true)?;
            if title.contains('\n') {
                return Err("field `title`: must be a single line".into());
            }
        }
        check_word("base_ref", &self.base_ref)?;
        check_word("model", &self.model)
    }
}

/// `assign_copilot_to_issue`'s input schema: upstream's five properties with
/// their descriptions, plus `custom_agent` and `model`.
pub(crate) fn assign_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "owner": {"type": "string", "description": "Repository owner"},
            "repo": {"type": "string", "description": "Repository name"},
            "issue_number": {"type": "number", "description": "Issue number"},
            "base_ref": {"type": "string", "description": "Git reference (e.g., branch) that the agent will start its work from. If not specified, defaults to the repository's default branch"},
            "custom_instructions": {"type": "string", "description": "Optional custom instructions to guide the agent beyond the issue body. Use this to provide additional context, constraints, or guidance that is not captured in the issue description"},
            "custom_agent": {"type": "string", "description": "Optional custom agent (defined in the repository's .github/agents) to do the work instead of the default Copilot agent"},
            "model": {"type": "string", "description": "Optional model for the agent session (e.g. claude-sonnet-4.6, gpt-5.4). If not specified, Copilot picks one"}
        },
        "required": ["owner", "repo", "issue_number"]
    })
}

/// What `assign_copilot_to_issue` returns in `structuredContent`: upstream's
/// typed fields with upstream's types (github-mcp-server's `outputSchema`,
/// vendored in `contracts/github/mcp-server/`), plus ours. Upstream refuses
/// extra properties; ours are documented here, so a client that validates
/// against this schema accepts them.
pub(crate) fn assign_output_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "issue_number": {"type": "integer"},
            "issue_url": {"type": "string"},
            "message": {"type": "string"},
            "note": {"type": "string", "description": "Why the pull request is not there yet (clients without tasks)"},
            "owner": {"type": "string"},
            "repo": {"type": "string"},
            "pull_request": {
                "type": "object",
                "properties": {
                    "number": {"type": "integer"},
                    "state": {"type": "string", "description": "OPEN, CLOSED or MERGED"},
                    "title": {"type": "string"},
                    "url": {"type": "string"},
                    "draft": {"type": "boolean"}
                },
                "required": ["number", "state", "title", "url"]
            },
            "outcome": {"type": "string", "description": "How the task ended: finished, failed_to_start, finished_with_failure, closed, gone, watch_timeout, …"},
            "issue_title": {"type": "string"},
            "task_id": {"type": "string", "description": "The task that keeps following the agent (clients without tasks)"},
            "detail": {"type": "object", "description": "What decided the outcome (Copilot's timeline events, its comment)"}
        },
        "required": ["issue_number", "issue_url", "message", "owner", "repo"]
    })
}

pub(crate) fn changes_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "owner": {"type": "string", "description": "Repository owner"},
            "repo": {"type": "string", "description": "Repository name"},
            "pull_number": {"type": "number", "description": "Number of a pull request Copilot opened"},
            "instructions": {"type": "string", "description": "What Copilot should change; posted as an @copilot comment on the pull request"}
        },
        "required": ["owner", "repo", "pull_number", "instructions"]
    })
}

pub(crate) fn create_pr_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "owner": {"type": "string", "description": "Repository owner"},
            "repo": {"type": "string", "description": "Repository name"},
            "problem_statement": {"type": "string", "description": "Detailed description of the task"},
            "title": {"type": "string", "description": "Title for the pull request that will be created"},
            "base_ref": {"type": "string", "description": "Git reference (e.g., branch) that the agent will start its work from. If not specified, defaults to the repository's default branch"},
            "model": {"type": "string", "description": "Optional model for the agent session. If not specified, Copilot picks one"}
        },
        "required": ["owner", "repo", "problem_statement"]
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentgate_backend::parse_args;

    fn object(v: Value) -> rmcp::model::JsonObject {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn issue_number_takes_numbers_and_numeric_strings() {
        for raw in [json!(123), json!("123"), json!(123.0)] {
            let args: AssignArgs = parse_args(&object(
                json!({"owner": "o", "repo": "r", "issue_number": raw}),
            ))
            .expect("parses");
            assert_eq!(args.issue_number, 123);
        }
        for raw in [
            json!("12a"),
            json!(0),
            json!(-1),
            json!(1.5),
            json!(true),
            json!(3_000_000_000_i64),
        ] {
            let err = parse_args::<AssignArgs>(&object(
                json!({"owner": "o", "repo": "r", "issue_number": raw}),
            ))
            .expect_err("refused");
            assert!(err.contains("issue_number"), "{err}");
        }
    }

    #[test]
    fn unknown_fields_and_bad_names_are_named() {
        let err = parse_args::<AssignArgs>(&object(
            json!({"owner": "o", "repo": "r", "issue_number": 1, "assignee": "x"}),
        ))
        .expect_err("refused");
        assert!(err.contains("assignee"), "{err}");
        let bad = AssignArgs {
            owner: "acme/widgets".into(),
            repo: "r".into(),
            issue_number: 1,
            base_ref: None,
            custom_instructions: None,
            custom_agent: None,
            model: None,
        };
        assert!(bad.validate().expect_err("owner").contains("field `owner`"));
        let bad = AssignArgs {
            owner: "acme".into(),
            base_ref: Some("my branch".into()),
            ..bad
        };
        assert!(
            bad.validate()
                .expect_err("base_ref")
                .contains("field `base_ref`")
        );
        let err = parse_args::<Valid<AssignArgs>>(&object(
            json!({"owner": "acme widgets", "repo": "r", "issue_number": 1}),
        ))
        .expect_err("validated while parsing");
        assert!(err.contains("field `owner`"), "{err}");
    }

    #[test]
    fn schema_keeps_upstreams_required_set() {
        let schema = assign_schema();
        assert_eq!(schema["required"], json!(["owner", "repo", "issue_number"]));
        assert_eq!(schema["properties"].as_object().map(|p| p.len()), Some(7));
    }
}
