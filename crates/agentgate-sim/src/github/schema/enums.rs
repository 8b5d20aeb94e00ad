//! GitHub's enums the schema exposes, and which timeline events each item
//! kind shows.

use super::*;

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
pub(super) enum Kind {
    CrossReferenced,
    IssueComment,
    Assigned,
    Unassigned,
    ReadyForReview,
    ConvertToDraft,
    Closed,
    Merged,
}

pub(super) fn kind_of(event: &EventKind) -> Option<Kind> {
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
