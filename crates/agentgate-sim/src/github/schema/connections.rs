//! Relay connections: page info, windows over a list, and the connection
//! types of actors and assignees.

use super::*;

/// GitHub's `PageInfo`.
#[derive(Clone, Debug, SimpleObject)]
pub(crate) struct PageInfo {
    pub(super) has_next_page: bool,
    pub(super) has_previous_page: bool,
    pub(super) start_cursor: Option<String>,
    pub(super) end_cursor: Option<String>,
}

/// `suggestedActors` results.
#[derive(Clone, Debug, SimpleObject)]
pub(crate) struct ActorConnection {
    pub(super) nodes: Option<Vec<Option<Actor>>>,
    pub(super) page_info: PageInfo,
    pub(super) total_count: i32,
}

/// `assignees` results: users only, as GitHub's public schema types them
/// (`UserConnection` of `User`). Bots (Copilot among them) are in
/// `assignedActors`.
#[derive(Clone, Debug, SimpleObject)]
pub(crate) struct UserConnection {
    pub(super) nodes: Option<Vec<Option<User>>>,
    pub(super) page_info: PageInfo,
    pub(super) total_count: i32,
}

/// GitHub's `Assignee` union: what `assignedActors` returns.
#[derive(Clone, Debug, Union)]
pub(crate) enum Assignee {
    Bot(Bot),
    Mannequin(Mannequin),
    Organization(Organization),
    User(User),
}

/// GitHub's `Mannequin` (an imported user). The emulator's seeds have none;
/// the type is here because `Assignee` holds it, so documents that spread on
/// it are valid as on GitHub.
#[derive(Clone, Debug, SimpleObject)]
pub(crate) struct Mannequin {
    pub(super) id: ID,
    pub(super) login: String,
}

/// GitHub's `Organization`, as an `Assignee` (never assigned in the seeds).
#[derive(Clone, Debug, SimpleObject)]
pub(crate) struct Organization {
    pub(super) id: ID,
    pub(super) login: String,
}

/// `assignedActors` results: every assignee, users and bots.
#[derive(Clone, Debug, SimpleObject)]
pub(crate) struct AssigneeConnection {
    pub(super) nodes: Option<Vec<Option<Assignee>>>,
    pub(super) page_info: PageInfo,
    pub(super) total_count: i32,
}

pub(super) fn count_i32(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// The window `[start, end)` of `total` items per `after`, `first`, `last`.
pub(super) fn window(
    total: usize,
    first: Option<i32>,
    last: Option<i32>,
    after: Option<&str>,
    connection: &str,
) -> async_graphql::Result<(usize, usize)> {
    let check = |n: Option<i32>, arg: &str| -> async_graphql::Result<Option<usize>> {
        match n {
            None => Ok(None),
            Some(n) if n < 0 => Err(Error::new(format!(
                "`{arg}` on the `{connection}` connection cannot be less than zero."
            ))),
            Some(n) if n > 100 => Err(Error::new(format!(
                "Requesting {n} records on the `{connection}` connection exceeds the `{arg}` \
                 limit of 100 records."
            ))),
            Some(n) => Ok(Some(usize::try_from(n).unwrap_or(0))),
        }
    };
    let first = check(first, "first")?;
    let last = check(last, "last")?;
    let mut start = match after {
        None => 0,
        Some(c) => parse_cursor(c)
            .map(|i| i + 1)
            .ok_or_else(|| Error::new(format!("`{c}` does not appear to be a valid cursor.")))?,
    };
    start = start.min(total);
    let mut end = total;
    if let Some(f) = first {
        end = end.min(start + f);
    }
    if let Some(l) = last {
        start = start.max(end.saturating_sub(l));
    }
    if first.is_none() && last.is_none() {
        end = end.min(start + 100);
    }
    Ok((start, end))
}

pub(super) fn page_info(start: usize, end: usize, total: usize) -> PageInfo {
    PageInfo {
        has_next_page: end < total,
        has_previous_page: start > 0,
        start_cursor: (end > start).then(|| cursor(start)),
        end_cursor: (end > start).then(|| cursor(end - 1)),
    }
}
