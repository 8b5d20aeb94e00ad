//! Tool results: a sentence for people, everything GitHub told us in
//! `structuredContent`, and Copilot's own timeline read over REST.

use std::time::Duration;

use agentgate_backend::Millis;
use rmcp::model::{CallToolResult, ContentBlock};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::github::model::{self, CrossReferenceSource, TimelineEvent, WatchedPull};
use crate::github::{GitHub, GitHubError};

/// A pull request as the tools report it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct PullRequest {
    pub number: i64,
    pub url: String,
    pub title: String,
    /// GitHub's GraphQL state: OPEN, CLOSED or MERGED.
    pub state: String,
    pub draft: bool,
}

impl PullRequest {
    pub(crate) fn from_source(source: &CrossReferenceSource) -> Option<Self> {
        match source {
            CrossReferenceSource::PullRequest {
                number,
                url,
                title,
                state,
                is_draft,
                ..
            } => Some(Self {
                number: *number,
                url: url.clone(),
                title: title.clone(),
                state: state.clone(),
                draft: *is_draft,
            }),
            CrossReferenceSource::Other => None,
        }
    }

    pub(crate) fn from_watched(pull: &WatchedPull) -> Self {
        Self {
            number: pull.number,
            url: pull.url.clone(),
            title: pull.title.clone(),
            state: if pull.merged {
                "MERGED".into()
            } else {
                pull.state.clone()
            },
            draft: pull.is_draft,
        }
    }

    pub(crate) fn from_rest(pull: &model::RestPull) -> Self {
        Self {
            number: pull.number,
            url: pull.html_url.clone(),
            title: pull.title.clone(),
            state: if pull.merged {
                "MERGED".into()
            } else {
                pull.state.to_uppercase()
            },
            draft: pull.draft,
        }
    }

    /// `#7 (draft): [WIP] Add a --version flag`
    pub(crate) fn describe(&self) -> String {
        let draft = if self.draft { " (draft)" } else { "" };
        format!("#{}{draft}: {}", self.number, self.title)
    }
}

/// A result with a sentence and structured content.
pub(crate) fn result(is_error: bool, text: String, structured: Value) -> CallToolResult {
    let content = vec![ContentBlock::text(text)];
    let mut result = if is_error {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    };
    result.structured_content = Some(structured);
    result
}

/// How a Copilot work cycle on a pull request ended, per its REST timeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CycleEnd {
    Finished { at: String },
    Failed { at: String },
}

/// Copilot's `copilot_work_*` events on a pull request, oldest first.
pub(crate) async fn copilot_events(
    github: &GitHub,
    owner: &str,
    repo: &str,
    number: i64,
) -> Result<Vec<TimelineEvent>, GitHubError> {
    const PER_PAGE: usize = 100;
    const MAX_PAGES: usize = 20;
    let mut events = Vec::new();
    for page in 1..=MAX_PAGES {
        let batch: Vec<TimelineEvent> = github
            .rest_get(
                &format!("repos/{owner}/{repo}/issues/{number}/timeline"),
                &[
                    ("per_page", PER_PAGE.to_string()),
                    ("page", page.to_string()),
                ],
                None,
            )
            .await?;
        let full = batch.len() == PER_PAGE;
        events.extend(
            batch
                .into_iter()
                .filter(|e| e.event.starts_with("copilot_work_")),
        );
        if !full {
            break;
        }
    }
    Ok(events)
}

/// Whether the cycle started at or after `since` has ended: the first end
/// event after the first `copilot_work_started` at or after `since` (or, on
/// a timeline without start events, the first end at or after `since`).
/// Timestamps have second precision, so an earlier cycle's end in the same
/// second as `since` must not count: order decides, not the clock alone.
pub(crate) fn cycle_end(events: &[TimelineEvent], since: &str) -> Option<CycleEnd> {
    let floor = model::parse_time(since)?;
    let at_or_after = |e: &TimelineEvent| {
        e.created_at
            .as_deref()
            .and_then(model::parse_time)
            .is_some_and(|t| t >= floor)
    };
    let from = events
        .iter()
        .position(|e| e.event == "copilot_work_started" && at_or_after(e));
    let mut candidates: Box<dyn Iterator<Item = &TimelineEvent>> = match from {
        Some(start) => Box::new(events.iter().skip(start + 1)),
        None if events.iter().any(|e| e.event == "copilot_work_started") => return None,
        None => Box::new(events.iter().filter(|e| at_or_after(e))),
    };
    candidates.find_map(|e| {
        let at = e.created_at.clone().unwrap_or_default();
        match e.event.as_str() {
            "copilot_work_finished" => Some(CycleEnd::Finished { at }),
            "copilot_work_finished_failure" => Some(CycleEnd::Failed { at }),
            _ => None,
        }
    })
}

/// Whether a cycle started at or after `since`.
pub(crate) fn cycle_started(events: &[TimelineEvent], since: &str) -> bool {
    let Some(floor) = model::parse_time(since) else {
        return false;
    };
    events.iter().any(|e| {
        e.event == "copilot_work_started"
            && e.created_at
                .as_deref()
                .and_then(model::parse_time)
                .is_some_and(|t| t >= floor)
    })
}

/// GitHub's notion of "now" minus a tolerance for clock skew between us and
/// GitHub: items at or after it count as caused by us.
pub(crate) fn since(now: Millis, skew: Duration) -> String {
    let then = now.saturating_sub(skew);
    model::format_time(chrono::DateTime::from_timestamp_millis(then.unix_ms()).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(kind: &str, at: &str) -> TimelineEvent {
        TimelineEvent {
            event: kind.into(),
            created_at: Some(at.into()),
            actor: None,
        }
    }

    #[test]
    fn cycle_end_ignores_earlier_cycles() {
        let events = vec![
            event("copilot_work_started", "2026-12-01T10:00:00Z"),
            event("copilot_work_finished_failure", "2026-12-01T10:05:00Z"),
            event("copilot_work_started", "2026-12-01T11:00:00Z"),
        ];
        assert_eq!(
            cycle_end(&events, "2026-12-01T09:59:00Z"),
            Some(CycleEnd::Failed {
                at: "2026-12-01T10:05:00Z".into()
            })
        );
        assert_eq!(cycle_end(&events, "2026-12-01T10:59:00Z"), None);
        // The previous cycle ended in the same second as our request.
        let same_second = vec![
            event("copilot_work_started", "2026-12-01T10:00:00Z"),
            event("copilot_work_finished", "2026-12-01T10:05:00Z"),
            event("copilot_work_started", "2026-12-01T10:05:00Z"),
        ];
        assert_eq!(cycle_end(&same_second, "2026-12-01T10:05:00Z"), None);
        assert!(cycle_started(&events, "2026-12-01T10:59:00Z"));
        assert!(!cycle_started(&events, "2026-12-01T11:00:01Z"));
    }

    #[test]
    fn since_subtracts_the_skew() {
        assert_eq!(
            since(
                Millis::from_unix_ms(1_764_669_605_000),
                Duration::from_secs(30)
            ),
            "2025-12-02T09:59:35Z"
        );
    }
}
