//! Timeline items (cross-references, comments, assignments) and the
//! timeline connections of issues and pull requests.

use super::*;

/// One timeline event with its context.
#[derive(Clone, Debug)]
pub(crate) struct EventView {
    pub(super) repo: Repository,
    pub(super) item_number: u64,
    pub(super) item_url: String,
    pub(super) event: Event,
}

impl EventView {
    pub(super) fn id(&self) -> ID {
        ID(self.event.node_id.clone())
    }
    pub(super) fn created_at(&self) -> DateTime {
        DateTime(self.event.created_at)
    }
    pub(super) fn actor(&self) -> Option<Actor> {
        self.repo.actor(&self.event.actor)
    }
}

/// `CrossReferencedEvent`.
#[derive(Clone, Debug)]
pub(crate) struct CrossReferencedEvent(pub(super) EventView);

#[Object]
impl CrossReferencedEvent {
    pub(super) async fn id(&self) -> ID {
        self.0.id()
    }
    pub(super) async fn created_at(&self) -> DateTime {
        self.0.created_at()
    }
    pub(super) async fn referenced_at(&self) -> DateTime {
        self.0.created_at()
    }
    pub(super) async fn actor(&self) -> Option<Actor> {
        self.0.actor()
    }
    pub(super) async fn will_close_target(&self) -> bool {
        matches!(
            self.0.event.kind,
            EventKind::CrossReferenced {
                will_close: true,
                ..
            }
        )
    }
    pub(super) async fn is_cross_repository(&self) -> bool {
        false
    }
    pub(super) async fn source(&self) -> async_graphql::Result<ReferencedSubject> {
        match self.0.event.kind {
            EventKind::CrossReferenced { source, .. } => self.0.repo.subject(source),
            _ => None,
        }
        .ok_or_else(|| "the referencing issue or pull request is gone".into())
    }
    pub(super) async fn target(&self) -> async_graphql::Result<ReferencedSubject> {
        self.0
            .repo
            .subject(self.0.item_number)
            .ok_or_else(|| "the referenced issue or pull request is gone".into())
    }
}

/// `IssueComment`.
#[derive(Clone, Debug)]
pub(crate) struct IssueComment(pub(super) EventView);

#[Object]
impl IssueComment {
    pub(super) async fn id(&self) -> ID {
        self.0.id()
    }
    pub(super) async fn database_id(&self) -> Option<i64> {
        i64::try_from(self.0.event.db_id).ok()
    }
    pub(super) async fn created_at(&self) -> DateTime {
        self.0.created_at()
    }
    pub(super) async fn updated_at(&self) -> DateTime {
        match self.0.event.kind {
            EventKind::Comment { updated_at, .. } => DateTime(updated_at),
            _ => self.0.created_at(),
        }
    }
    pub(super) async fn body(&self) -> String {
        match &self.0.event.kind {
            EventKind::Comment { body, .. } => body.clone(),
            _ => String::new(),
        }
    }
    pub(super) async fn url(&self) -> Uri {
        Uri(format!(
            "{}#issuecomment-{}",
            self.0.item_url, self.0.event.db_id
        ))
    }
    pub(super) async fn author(&self) -> Option<Actor> {
        self.0.actor()
    }
}

/// `AssignedEvent`.
#[derive(Clone, Debug)]
pub(crate) struct AssignedEvent(pub(super) EventView);
/// `UnassignedEvent`.
#[derive(Clone, Debug)]
pub(crate) struct UnassignedEvent(pub(super) EventView);

/// An actor as GitHub's `Assignee` union holds it.
pub(super) fn as_assignee(actor: Actor) -> Assignee {
    match actor {
        Actor::Bot(bot) => Assignee::Bot(bot),
        Actor::User(user) => Assignee::User(user),
    }
}

pub(super) fn assignee_of(view: &EventView) -> Option<Assignee> {
    match &view.event.kind {
        EventKind::Assigned { assignee } | EventKind::Unassigned { assignee } => {
            view.repo.actor(assignee).map(as_assignee)
        }
        _ => None,
    }
}

#[Object]
impl AssignedEvent {
    pub(super) async fn id(&self) -> ID {
        self.0.id()
    }
    pub(super) async fn created_at(&self) -> DateTime {
        self.0.created_at()
    }
    pub(super) async fn actor(&self) -> Option<Actor> {
        self.0.actor()
    }
    pub(super) async fn assignee(&self) -> Option<Assignee> {
        assignee_of(&self.0)
    }
}

#[Object]
impl UnassignedEvent {
    pub(super) async fn id(&self) -> ID {
        self.0.id()
    }
    pub(super) async fn created_at(&self) -> DateTime {
        self.0.created_at()
    }
    pub(super) async fn actor(&self) -> Option<Actor> {
        self.0.actor()
    }
    pub(super) async fn assignee(&self) -> Option<Assignee> {
        assignee_of(&self.0)
    }
}

macro_rules! simple_event {
    ($name:ident) => {
        /// A timeline event with an id, a time and an actor.
        #[derive(Clone, Debug)]
        pub(crate) struct $name(EventView);

        #[Object]
        impl $name {
            async fn id(&self) -> ID {
                self.0.id()
            }
            async fn created_at(&self) -> DateTime {
                self.0.created_at()
            }
            async fn actor(&self) -> Option<Actor> {
                self.0.actor()
            }
        }
    };
}

simple_event!(ReadyForReviewEvent);
simple_event!(ConvertToDraftEvent);
simple_event!(ClosedEvent);
simple_event!(MergedEvent);

/// A timeline's item union and its `itemTypes` enum, for the events GitHub's
/// schema lists in that union (an issue has no draft or merge events).
macro_rules! timeline_types {
    ($union:ident, $enum:ident, [$($kind:ident => $event:ident),* $(,)?]) => {
        /// Timeline item types (GitHub's enum values).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Enum)]
        pub(crate) enum $enum {
            $($event,)*
        }

        impl From<$enum> for Kind {
            fn from(t: $enum) -> Self {
                match t {
                    $($enum::$event => Kind::$kind,)*
                }
            }
        }

        /// Timeline items.
        #[derive(Clone, Debug, Union)]
        pub(crate) enum $union {
            $($event($event),)*
        }

        impl $union {
            pub(super) fn from_view(kind: Kind, v: EventView) -> Option<Self> {
                match kind {
                    $(Kind::$kind => Some(Self::$event($event(v))),)*
                    #[allow(unreachable_patterns)]
                    _ => None,
                }
            }
        }
    };
}

timeline_types!(IssueTimelineItems, IssueTimelineItemsItemType, [
    CrossReferenced => CrossReferencedEvent,
    IssueComment => IssueComment,
    Assigned => AssignedEvent,
    Unassigned => UnassignedEvent,
    Closed => ClosedEvent,
]);
timeline_types!(PullRequestTimelineItems, PullRequestTimelineItemsItemType, [
    CrossReferenced => CrossReferencedEvent,
    IssueComment => IssueComment,
    Assigned => AssignedEvent,
    Unassigned => UnassignedEvent,
    ReadyForReview => ReadyForReviewEvent,
    ConvertToDraft => ConvertToDraftEvent,
    Closed => ClosedEvent,
    Merged => MergedEvent,
]);

/// `IssueTimelineItemsConnection`.
#[derive(Clone, Debug, SimpleObject)]
pub(crate) struct IssueTimelineItemsConnection {
    pub(super) nodes: Option<Vec<Option<IssueTimelineItems>>>,
    pub(super) page_info: PageInfo,
    pub(super) total_count: i32,
    pub(super) filtered_count: i32,
}

/// `PullRequestTimelineItemsConnection`.
#[derive(Clone, Debug, SimpleObject)]
pub(crate) struct PullRequestTimelineItemsConnection {
    pub(super) nodes: Option<Vec<Option<PullRequestTimelineItems>>>,
    pub(super) page_info: PageInfo,
    pub(super) total_count: i32,
    pub(super) filtered_count: i32,
}

/// The arguments of `timelineItems`.
pub(super) struct TimelineArgs {
    pub(super) first: Option<i32>,
    pub(super) last: Option<i32>,
    pub(super) after: Option<String>,
    pub(super) since: Option<DateTime>,
    pub(super) kinds: Option<Vec<Kind>>,
}

/// The selected events, with the page info, the total and the filtered counts.
pub(super) type TimelinePage = (Vec<(Kind, EventView)>, PageInfo, i32, i32);

/// Selects the events of a timeline.
pub(super) fn timeline(
    repo: &Repository,
    item: &Item,
    args: &TimelineArgs,
) -> async_graphql::Result<TimelinePage> {
    let item_url = repo.item_url(item);
    let total = item
        .timeline
        .iter()
        .filter(|e| kind_of(&e.kind).is_some())
        .count();
    let filtered: Vec<(Kind, &Event)> = item
        .timeline
        .iter()
        .filter_map(|e| kind_of(&e.kind).map(|k| (k, e)))
        .filter(|(k, _)| args.kinds.as_ref().is_none_or(|ks| ks.contains(k)))
        .filter(|(_, e)| args.since.is_none_or(|s| e.created_at >= s.0))
        .collect();
    let (start, end) = window(
        filtered.len(),
        args.first,
        args.last,
        args.after.as_deref(),
        "timelineItems",
    )?;
    let info = page_info(start, end, filtered.len());
    let nodes = filtered
        .get(start..end)
        .unwrap_or_default()
        .iter()
        .map(|(k, e)| {
            (
                *k,
                EventView {
                    repo: repo.clone(),
                    item_number: item.number,
                    item_url: item_url.clone(),
                    event: (*e).clone(),
                },
            )
        })
        .collect();
    Ok((nodes, info, count_i32(total), count_i32(filtered.len())))
}

/// `assignees`: the users among the assignees (GitHub leaves bots out).
pub(super) fn assignees(
    repo: &Repository,
    item: &Item,
    first: Option<i32>,
) -> async_graphql::Result<UserConnection> {
    let users: Vec<User> = item
        .assignees
        .iter()
        .filter_map(|login| match repo.actor(login) {
            Some(Actor::User(user)) => Some(user),
            _ => None,
        })
        .collect();
    let (start, end) = window(users.len(), first, None, None, "assignees")?;
    Ok(UserConnection {
        nodes: Some(
            users
                .get(start..end)
                .unwrap_or_default()
                .iter()
                .cloned()
                .map(Some)
                .collect(),
        ),
        page_info: page_info(start, end, users.len()),
        total_count: count_i32(users.len()),
    })
}

/// `assignedActors`: every assignee, users and bots.
pub(super) fn assigned_actors(
    repo: &Repository,
    item: &Item,
    first: Option<i32>,
) -> async_graphql::Result<AssigneeConnection> {
    let (start, end) = window(item.assignees.len(), first, None, None, "assignedActors")?;
    Ok(AssigneeConnection {
        nodes: Some(
            item.assignees
                .get(start..end)
                .unwrap_or_default()
                .iter()
                .map(|login| repo.actor(login).map(as_assignee))
                .collect(),
        ),
        page_info: page_info(start, end, item.assignees.len()),
        total_count: count_i32(item.assignees.len()),
    })
}
