//! The seed: the users, repositories, issues and timings the emulator starts with.
//!
//! A seed file is TOML (or JSON when the file name ends in `.json`; same fields). Every
//! field has a default, so a seed may be tiny. `crates/agentgate-sim/seeds/default.toml` is the
//! built-in seed ([`Seed::default`]) written out:
//!
//! ```toml
//! viewer = "agentgate-user"          # the login of the token's user
//!
//! [timings]                          # seconds, before --time-scale is applied
//! pr_delay = 5.0                     # assignment -> PR opened (and task -> in_progress)
//! work_duration = 20.0               # PR opened -> work finished (and task -> done)
//!
//! [[users]]
//! login = "octocat"
//! name = "The Octocat"               # optional
//!
//! [[repositories]]
//! owner = "acme"
//! name = "widgets"
//! default_branch = "main"            # default "main"
//! copilot_enabled = true             # default true
//! extra_suggested_actors = 0         # generated humans listed before Copilot
//! collaborators = ["octocat"]        # suggested actors (created if unknown)
//! agent_task_scenario = "completed"  # completed | failed | timed_out | cancelled | waiting_for_user | idle
//!
//! [[repositories.issues]]
//! number = 1                         # optional: next free number
//! title = "Add a --version flag"
//! body = ""
//! state = "open"                     # open | closed
//! assignees = []                     # logins
//! scenario = "normal"                # normal | fails_to_start | finishes_with_failure | slow | never
//! ```

use std::path::Path;

use anyhow::Context;
use serde::{Deserialize, Serialize};

use super::{DEFAULT_VIEWER, Scenario, TaskScenario};

/// A whole seed (see the module docs).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Seed {
    /// The login of the token's user (comment author, assigner).
    pub viewer: String,
    /// Timings, in seconds before the time scale.
    pub timings: TimingsSeed,
    /// Users known up front (collaborators and assignees are created as needed).
    pub users: Vec<UserSeed>,
    /// Repositories.
    pub repositories: Vec<RepoSeed>,
}

/// Timings in seconds, before the time scale is applied.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TimingsSeed {
    /// From the assignment (or a task's creation, or an `@copilot` comment) to the agent
    /// starting work (PR opened, task `in_progress`).
    pub pr_delay: f64,
    /// From the start of work to its end.
    pub work_duration: f64,
}

impl Default for TimingsSeed {
    fn default() -> Self {
        Self {
            pr_delay: 5.0,
            work_duration: 20.0,
        }
    }
}

/// A user.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserSeed {
    /// Login.
    pub login: String,
    /// Display name.
    #[serde(default)]
    pub name: Option<String>,
}

/// A repository.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RepoSeed {
    /// Owner login.
    pub owner: String,
    /// Repository name.
    pub name: String,
    /// Default branch (the PRs' base unless `agentAssignment.baseRef` says otherwise).
    pub default_branch: String,
    /// Whether the Copilot cloud agent is enabled (assignable, agent tasks allowed).
    pub copilot_enabled: bool,
    /// Generated human suggested actors (`<owner>-dev-001`, …) listed before Copilot.
    pub extra_suggested_actors: usize,
    /// Human suggested actors, first in the list.
    pub collaborators: Vec<String>,
    /// Outcome of agent tasks unless the prompt carries a `[sim:…]` token.
    pub agent_task_scenario: TaskScenario,
    /// Issues.
    pub issues: Vec<IssueSeed>,
}

impl Default for RepoSeed {
    fn default() -> Self {
        Self {
            owner: "acme".into(),
            name: "widgets".into(),
            default_branch: "main".into(),
            copilot_enabled: true,
            extra_suggested_actors: 0,
            collaborators: Vec::new(),
            agent_task_scenario: TaskScenario::Completed,
            issues: Vec::new(),
        }
    }
}

/// An issue.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct IssueSeed {
    /// Number; `None`: the next free one.
    pub number: Option<u64>,
    /// Title.
    pub title: String,
    /// Body.
    pub body: String,
    /// `open` or `closed`.
    pub state: String,
    /// Assignee logins.
    pub assignees: Vec<String>,
    /// What the simulated agent does when assigned.
    pub scenario: Scenario,
}

impl Default for IssueSeed {
    fn default() -> Self {
        Self {
            number: None,
            title: String::new(),
            body: String::new(),
            state: "open".into(),
            assignees: Vec::new(),
            scenario: Scenario::Normal,
        }
    }
}

fn issue(number: u64, title: &str, scenario: Scenario, assignees: &[&str]) -> IssueSeed {
    IssueSeed {
        number: Some(number),
        title: title.into(),
        body: format!("{title}.\n\nSeeded by the agentgate GitHub emulator."),
        state: "open".into(),
        assignees: assignees.iter().map(|a| (*a).to_owned()).collect(),
        scenario,
    }
}

impl Default for Seed {
    /// The built-in seed (`crates/agentgate-sim/seeds/default.toml`).
    fn default() -> Self {
        Self {
            viewer: DEFAULT_VIEWER.into(),
            timings: TimingsSeed::default(),
            users: vec![
                UserSeed {
                    login: "octocat".into(),
                    name: Some("The Octocat".into()),
                },
                UserSeed {
                    login: "hubot".into(),
                    name: Some("Hubot".into()),
                },
            ],
            repositories: vec![
                RepoSeed {
                    owner: "acme".into(),
                    name: "widgets".into(),
                    collaborators: vec!["octocat".into(), "hubot".into()],
                    issues: vec![
                        issue(1, "Add a --version flag", Scenario::Normal, &[]),
                        issue(
                            2,
                            "Fix the flaky retry test",
                            Scenario::Normal,
                            &["octocat", "hubot"],
                        ),
                        issue(3, "Upgrade the CI runners", Scenario::FailsToStart, &[]),
                        issue(
                            4,
                            "Port the parser to nom 8",
                            Scenario::FinishesWithFailure,
                            &[],
                        ),
                        issue(5, "Rewrite the docs site", Scenario::Slow, &[]),
                    ],
                    ..RepoSeed::default()
                },
                RepoSeed {
                    owner: "acme".into(),
                    name: "crowded".into(),
                    extra_suggested_actors: 120,
                    issues: vec![issue(1, "Tidy the changelog", Scenario::Normal, &[])],
                    ..RepoSeed::default()
                },
                RepoSeed {
                    owner: "acme".into(),
                    name: "legacy".into(),
                    copilot_enabled: false,
                    collaborators: vec!["octocat".into()],
                    issues: vec![issue(1, "Remove Python 2 support", Scenario::Normal, &[])],
                    ..RepoSeed::default()
                },
            ],
        }
    }
}

impl Seed {
    /// Parses a TOML seed.
    pub fn from_toml(text: &str) -> anyhow::Result<Self> {
        toml::from_str(text).context("invalid TOML seed")
    }

    /// Parses a JSON seed.
    pub fn from_json(text: &str) -> anyhow::Result<Self> {
        serde_json::from_str(text).context("invalid JSON seed")
    }

    /// Reads a seed file: JSON if the name ends in `.json`, else TOML.
    pub fn from_path(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the seed {}", path.display()))?;
        let parsed = if path.extension().is_some_and(|e| e == "json") {
            Self::from_json(&text)
        } else {
            Self::from_toml(&text)
        };
        parsed.with_context(|| format!("in {}", path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_sample_is_the_builtin_seed() {
        let shipped = Seed::from_toml(include_str!("../../seeds/default.toml")).expect("parses");
        assert_eq!(shipped, Seed::default());
    }

    #[test]
    fn seed_files_load_by_extension() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("seeds/default.toml");
        assert_eq!(Seed::from_path(&path).expect("loads"), Seed::default());
        let err = Seed::from_path(Path::new("/nonexistent/seed.json")).expect_err("missing");
        assert!(
            format!("{err:#}").contains("cannot read the seed"),
            "{err:#}"
        );
    }

    #[test]
    fn a_tiny_seed_takes_defaults() {
        let seed = Seed::from_toml(
            "[[repositories]]\nowner = \"o\"\nname = \"r\"\n[[repositories.issues]]\ntitle = \"t\"\n",
        )
        .expect("parses");
        assert_eq!(seed.viewer, DEFAULT_VIEWER);
        assert!(seed.repositories[0].copilot_enabled);
        assert_eq!(seed.repositories[0].issues[0].scenario, Scenario::Normal);
        let json = Seed::from_json(r#"{"viewer":"me","repositories":[]}"#).expect("json");
        assert_eq!(json.viewer, "me");
        assert!(Seed::from_toml("bogus = 1").is_err());
    }
}
