//! The behaviour every [`TaskStore`] must have, written once.
//!
//! Each check is a plain async function over a fresh, empty store; the
//! [`store_suite!`](crate::store_suite) macro turns them into one `#[tokio::test]`
//! each for a given store constructor. Time is passed in explicitly, so lease
//! expiry and TTLs are tested by moving timestamps, never by sleeping.

use std::collections::BTreeMap;
use std::time::Duration;

use agentgate_backend::{Millis, Owner, TaskId, TaskPhase};
use serde_json::{Value, json};

use super::{StoreError, StoredUsage, SweepReport, TaskEvent, TaskStore};
use crate::task::{Fence, NewTask, Outcome};

const T0: Millis = Millis::from_unix_ms(1_800_000_000_000);

/// `ms` milliseconds after [`T0`].
fn at(ms: u64) -> Millis {
    T0.saturating_add(Duration::from_millis(ms))
}
const LEASE: Duration = Duration::from_secs(30);

fn alice() -> Owner {
    Owner::new("alice")
}

async fn new_task(store: &dyn TaskStore, ttl_ms: Option<u64>) -> TaskId {
    let id = TaskId::generate();
    store
        .create(NewTask {
            id: id.clone(),
            owner: alice(),
            tool: "tool".into(),
            args: json!({"n": 1}),
            status_message: Some("queued".into()),
            ttl_ms,
            now: T0,
        })
        .await
        .expect("create");
    id
}

fn ask(keys: &[&str]) -> Outcome {
    Outcome::InputRequired {
        state: json!({"asked": keys}),
        status_message: Some("need input".into()),
        requests: keys
            .iter()
            .map(|k| (k.to_string(), json!({"method": "elicitation/create"})))
            .collect(),
    }
}

pub async fn created_task_is_visible_to_its_owner_only(store: &dyn TaskStore) {
    let id = new_task(store, None).await;
    let task = store
        .get(&alice(), &id, T0)
        .await
        .expect("get")
        .expect("visible");
    assert_eq!(task.status, TaskPhase::Working);
    assert_eq!(task.args, json!({"n": 1}));
    assert_eq!(task.due_at, Some(T0), "a new task is due at once");
    let other = store
        .get(&Owner::new("mallory"), &id, T0)
        .await
        .expect("get");
    assert!(other.is_none(), "another owner must not see the task");
    let unknown = store
        .get(&alice(), &TaskId::generate(), T0)
        .await
        .expect("get");
    assert!(unknown.is_none());
    // Writes by another owner fail as for an unknown id, and change nothing.
    let mallory = Owner::new("mallory");
    for target in [id.clone(), TaskId::generate()] {
        let answered = store
            .record_input(&mallory, &target, BTreeMap::new(), T0)
            .await;
        assert!(
            matches!(answered, Err(StoreError::NotFound)),
            "{answered:?}"
        );
        let cancelled = store.request_cancel(&mallory, &target, T0).await;
        assert!(
            matches!(cancelled, Err(StoreError::NotFound)),
            "{cancelled:?}"
        );
    }
    let task = store
        .get(&alice(), &id, T0)
        .await
        .expect("get")
        .expect("visible");
    assert!(
        !task.cancel_requested,
        "another owner's cancel must not land"
    );
}

pub async fn task_past_its_ttl_is_invisible(store: &dyn TaskStore) {
    let id = new_task(store, Some(1_000)).await;
    assert!(
        store
            .get(&alice(), &id, at(999))
            .await
            .expect("get")
            .is_some()
    );
    assert!(
        store
            .get(&alice(), &id, at(1_000))
            .await
            .expect("get")
            .is_none()
    );
    let cancel = store.request_cancel(&alice(), &id, at(1_000)).await;
    assert!(matches!(cancel, Err(StoreError::NotFound)), "{cancel:?}");
}

pub async fn claim_leases_each_due_task_once(store: &dyn TaskStore) {
    let a = new_task(store, None).await;
    let b = new_task(store, None).await;
    let first = store.claim("w1", 10, LEASE, T0).await.expect("claim");
    assert_eq!(first.len(), 2);
    assert!(
        first
            .iter()
            .all(|t| t.fence == Fence::from_raw(1) && t.lease_owner.as_deref() == Some("w1"))
    );
    let ids: Vec<_> = first.iter().map(|t| t.id.clone()).collect();
    assert!(ids.contains(&a) && ids.contains(&b));
    let second = store.claim("w2", 10, LEASE, at(1)).await.expect("claim");
    assert!(
        second.is_empty(),
        "leased tasks must not be handed out twice"
    );
    let limited = store
        .claim("w3", 0, LEASE, at(60_000))
        .await
        .expect("claim");
    assert!(limited.is_empty());
}

/// A task created leased to its creator is that worker's to step at once:
/// nobody else claims it before the lease runs out, its creator saves it
/// with the first fence, and a crashed creator's task is taken over.
pub async fn a_task_created_claimed_is_its_creators_until_the_lease_ends(store: &dyn TaskStore) {
    let make = |id: &TaskId| NewTask {
        id: id.clone(),
        owner: alice(),
        tool: "tool".into(),
        args: json!({"n": 1}),
        status_message: Some("queued".into()),
        ttl_ms: None,
        now: T0,
    };
    let id = TaskId::generate();
    let task = store
        .create_claimed(make(&id), "creator", LEASE)
        .await
        .expect("create_claimed");
    assert_eq!(task.status, TaskPhase::Working);
    assert_eq!(task.lease_owner.as_deref(), Some("creator"));
    assert_eq!(task.lease_until, Some(T0.saturating_add(LEASE)));
    assert_eq!(
        task.fence,
        Fence::from_raw(1),
        "the fence a first claim takes"
    );
    let seen = store
        .get(&alice(), &id, T0)
        .await
        .expect("get")
        .expect("visible");
    assert_eq!(seen, task, "committed as returned");
    let others = store.claim("w2", 10, LEASE, at(1)).await.expect("claim");
    assert!(others.is_empty(), "leased to its creator: {others:?}");
    assert_eq!(
        store.next_due().await.expect("next_due"),
        Some(T0.saturating_add(LEASE)),
        "runnable again when the lease runs out"
    );
    store
        .checkpoint(&id, "creator", task.fence, Outcome::cancelled(), at(2))
        .await
        .expect("the creator saves its first step");

    // A creator that dies: its task is claimed once the lease is over (a
    // zero-length one, over on every clock, the server's included).
    let orphan = TaskId::generate();
    store
        .create_claimed(make(&orphan), "dead", Duration::ZERO)
        .await
        .expect("create_claimed");
    let taken = store.claim("w2", 10, LEASE, at(1)).await.expect("claim");
    assert_eq!(taken.len(), 1);
    assert_eq!(taken[0].id, orphan);
    assert_eq!(taken[0].taken_over_from.as_deref(), Some("dead"));
    assert_eq!(taken[0].fence, Fence::from_raw(2));
    let stale = store
        .checkpoint(
            &orphan,
            "dead",
            Fence::from_raw(1),
            Outcome::cancelled(),
            at(2),
        )
        .await;
    assert!(
        matches!(stale, Err(StoreError::LeaseLost { .. })),
        "{stale:?}"
    );
}

/// Claims take the earliest runnable tasks first, up to the limit, and
/// `next_due` is the earliest time any live task can be claimed: its due
/// time, or the end of its lease if that is later.
pub async fn claims_take_the_earliest_runnable_tasks_first(store: &dyn TaskStore) {
    let mut ids = Vec::new();
    for n in 0..5u64 {
        let id = TaskId::generate();
        store
            .create(NewTask {
                id: id.clone(),
                owner: alice(),
                tool: "tool".into(),
                args: json!({"n": n}),
                status_message: None,
                ttl_ms: None,
                now: at(n * 10),
            })
            .await
            .expect("create");
        ids.push(id);
    }
    assert_eq!(store.next_due().await.expect("next_due"), Some(T0));
    let first = store.claim("w", 3, LEASE, at(100)).await.expect("claim");
    let mut got: Vec<TaskId> = first.iter().map(|t| t.id.clone()).collect();
    got.sort_by(|a, b| a.as_str().cmp(b.as_str()));
    let mut want = ids[..3].to_vec();
    want.sort_by(|a, b| a.as_str().cmp(b.as_str()));
    assert_eq!(got, want, "the three due first");
    assert_eq!(store.next_due().await.expect("next_due"), Some(at(30)));
    let rest = store.claim("w", 10, LEASE, at(100)).await.expect("claim");
    assert_eq!(rest.len(), 2);
    // Every live task is leased: the next is the earliest lease end.
    assert_eq!(
        store.next_due().await.expect("next_due"),
        Some(at(100).saturating_add(LEASE))
    );
    // A task waiting for input is never runnable, and an ended one is gone.
    store
        .checkpoint(&first[0].id, "w", first[0].fence, ask(&["q"]), at(200))
        .await
        .expect("ask");
    store
        .checkpoint(
            &first[1].id,
            "w",
            first[1].fence,
            Outcome::cancelled(),
            at(200),
        )
        .await
        .expect("cancel");
    assert_eq!(
        store.next_due().await.expect("next_due"),
        Some(at(100).saturating_add(LEASE)),
        "the three still leased"
    );
}

/// Many creates at once (a store may insert them together) each get their
/// own answer: one that reuses an id is refused without failing the others.
pub async fn concurrent_creates_each_get_their_own_answer(store: &dyn TaskStore) {
    let taken = new_task(store, None).await;
    let ids: Vec<TaskId> = (0..30)
        .map(|n| {
            if n == 7 {
                taken.clone()
            } else {
                TaskId::generate()
            }
        })
        .collect();
    let creates = ids.iter().enumerate().map(|(n, id)| {
        let task = NewTask {
            id: id.clone(),
            owner: alice(),
            tool: "tool".into(),
            args: json!({"n": n}),
            status_message: None,
            ttl_ms: None,
            now: T0,
        };
        async move {
            if n % 2 == 0 {
                store.create_claimed(task, "w", LEASE).await
            } else {
                store.create(task).await
            }
        }
    });
    let answers = futures::future::join_all(creates).await;
    for (n, (answer, id)) in answers.into_iter().zip(&ids).enumerate() {
        if n == 7 {
            assert!(
                answer.is_err(),
                "a second task with an id in use: {answer:?}"
            );
            continue;
        }
        let created = answer.unwrap_or_else(|e| panic!("{n}: {e}"));
        assert_eq!(&created.id, id);
        assert_eq!(created.args, json!({"n": n}));
        assert_eq!(created.lease_owner.is_some(), n % 2 == 0, "{n}");
        let stored = store
            .get(&alice(), id, T0)
            .await
            .expect("get")
            .expect("visible");
        assert_eq!(stored, created, "{n}: committed as answered");
    }
    let first = store
        .get(&alice(), &taken, T0)
        .await
        .expect("get")
        .expect("visible");
    assert_eq!(
        first.args,
        json!({"n": 1}),
        "the first task with the id is untouched"
    );
}

/// Many checkpoints at once (a store may save them together) each get their
/// own answer: a stale fence is refused without failing the others.
pub async fn concurrent_checkpoints_each_get_their_own_answer(store: &dyn TaskStore) {
    for _ in 0..40 {
        new_task(store, None).await;
    }
    let claimed = store.claim("w", 100, LEASE, T0).await.expect("claim");
    assert_eq!(claimed.len(), 40);
    let saves = claimed.iter().enumerate().map(|(n, task)| {
        // Every fourth one with a fence that is not the lease's.
        let fence = if n % 4 == 0 {
            Fence::from_raw(99)
        } else {
            task.fence
        };
        let outcome = Outcome::Completed {
            result: json!({"n": n}),
        };
        async move { store.checkpoint(&task.id, "w", fence, outcome, at(1)).await }
    });
    let answers = futures::future::join_all(saves).await;
    for (n, (answer, task)) in answers.into_iter().zip(&claimed).enumerate() {
        let stored = store
            .get(&alice(), &task.id, at(2))
            .await
            .expect("get")
            .expect("visible");
        if n % 4 == 0 {
            assert!(
                matches!(answer, Err(StoreError::LeaseLost { .. })),
                "{n}: {answer:?}"
            );
            assert_eq!(stored.status, TaskPhase::Working, "{n}: unchanged");
        } else {
            let saved = answer.unwrap_or_else(|e| panic!("{n}: {e}"));
            assert_eq!(saved.result, Some(json!({"n": n})));
            assert_eq!(stored.status, TaskPhase::Completed);
            assert_eq!(stored.result, Some(json!({"n": n})), "{n}: its own result");
            assert_eq!(stored.lease_owner, None);
        }
    }
}

pub async fn expired_lease_is_taken_over_and_stale_worker_is_fenced(store: &dyn TaskStore) {
    let id = new_task(store, None).await;
    // A lease that is over as soon as it is taken, on every clock (a store
    // may judge leases by a clock of its own, which the test cannot move).
    let first = store
        .claim("w1", 1, Duration::ZERO, T0)
        .await
        .expect("claim");
    assert_eq!(first[0].fence, Fence::from_raw(1));
    let later = at(1);
    assert_eq!(first[0].taken_over_from, None, "nobody held a new task");
    let second = store.claim("w2", 1, LEASE, later).await.expect("claim");
    assert_eq!(second.len(), 1, "an expired lease must be claimable");
    assert_eq!(second[0].fence, Fence::from_raw(2));
    assert_eq!(
        second[0].taken_over_from.as_deref(),
        Some("w1"),
        "the claim names the worker whose lease it took over"
    );

    let done = Outcome::Completed {
        result: json!({"content": []}),
    };
    let stale = store
        .checkpoint(&id, "w1", Fence::from_raw(1), done.clone(), later)
        .await;
    assert!(
        matches!(stale, Err(StoreError::LeaseLost { .. })),
        "{stale:?}"
    );
    let beat = store
        .heartbeat(&id, "w1", Fence::from_raw(1), LEASE, later)
        .await;
    assert!(
        matches!(beat, Err(StoreError::LeaseLost { .. })),
        "{beat:?}"
    );

    let saved = store
        .checkpoint(&id, "w2", Fence::from_raw(2), done, later)
        .await
        .expect("checkpoint");
    assert_eq!(saved.status, TaskPhase::Completed);
    assert_eq!(saved.lease_owner, None);
    let again = store
        .checkpoint(&id, "w2", Fence::from_raw(2), Outcome::cancelled(), later)
        .await;
    assert!(
        matches!(again, Err(StoreError::LeaseLost { .. })),
        "an ended task stays ended"
    );
}

/// Alice's task's history, which a visible task has.
async fn events_of(store: &dyn TaskStore, id: &TaskId) -> Vec<TaskEvent> {
    store
        .history(&alice(), id, T0)
        .await
        .expect("history")
        .expect("a visible task has a history")
}

/// The kinds of a task's history, in order, with the worker of each.
async fn history(store: &dyn TaskStore, id: &TaskId) -> Vec<(String, Option<String>)> {
    let events = events_of(store, id).await;
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    assert!(
        seqs.windows(2).all(|pair| pair[1] == pair[0] + 1),
        "one event per change, in order: {seqs:?}"
    );
    events.into_iter().map(|e| (e.kind, e.worker)).collect()
}

fn kinds(events: &[(&str, Option<&str>)]) -> Vec<(String, Option<String>)> {
    events
        .iter()
        .map(|(kind, worker)| ((*kind).to_owned(), worker.map(str::to_owned)))
        .collect()
}

pub async fn every_change_is_in_the_tasks_history_once_in_order(store: &dyn TaskStore) {
    let id = new_task(store, None).await;
    let claimed = store.claim("w1", 1, LEASE, T0).await.expect("claim");
    store
        .checkpoint(&id, "w1", claimed[0].fence, ask(&["name"]), at(1))
        .await
        .expect("ask");
    store
        .record_input(
            &alice(),
            &id,
            BTreeMap::from([("name".to_owned(), json!({"action": "accept"}))]),
            at(2),
        )
        .await
        .expect("answer");
    let claimed = store.claim("w2", 1, LEASE, at(3)).await.expect("claim");
    // A long status message is kept to its first 1 000 characters.
    let working = Outcome::Waiting {
        state: json!({"n": 2}),
        status_message: Some("still at it ".repeat(200)),
        due_at: at(5),
    };
    store
        .checkpoint(&id, "w2", claimed[0].fence, working, at(4))
        .await
        .expect("step");
    let claimed = store.claim("w2", 1, LEASE, at(10)).await.expect("claim");
    let retry = Outcome::Retry {
        status_message: Some("upstream busy; retrying".into()),
        due_at: at(11),
    };
    store
        .checkpoint(&id, "w2", claimed[0].fence, retry, at(10))
        .await
        .expect("retry");
    // A heartbeat is not history.
    let claimed = store.claim("w2", 1, LEASE, at(12)).await.expect("claim");
    store
        .heartbeat(&id, "w2", claimed[0].fence, LEASE, at(13))
        .await
        .expect("heartbeat");
    store
        .request_cancel(&alice(), &id, at(14))
        .await
        .expect("cancel");
    store
        .checkpoint(&id, "w2", claimed[0].fence, Outcome::cancelled(), at(15))
        .await
        .expect("cancelled");
    assert_eq!(
        history(store, &id).await,
        kinds(&[
            ("created", None),
            ("claimed", Some("w1")),
            ("question_asked", Some("w1")),
            ("answered", None),
            ("claimed", Some("w2")),
            ("step_ended", Some("w2")),
            ("claimed", Some("w2")),
            ("step_failed", Some("w2")),
            ("claimed", Some("w2")),
            ("cancel_requested", Some("w2")),
            ("cancelled", Some("w2")),
        ])
    );
    let events = events_of(store, &id).await;
    let step = events[5].message.as_deref().unwrap_or_default();
    assert_eq!(step.chars().count(), 1000, "{step}");
    assert_eq!(
        events[7].message.as_deref(),
        Some("upstream busy; retrying")
    );

    // A lease that ran out is taken over, and a given-back one released.
    let id = new_task(store, None).await;
    store
        .claim("w1", 1, Duration::ZERO, T0)
        .await
        .expect("claim");
    let taken = store.claim("w2", 1, LEASE, at(1)).await.expect("claim");
    store
        .release(&id, "w2", taken[0].fence, at(2))
        .await
        .expect("release");
    let events = events_of(store, &id).await;
    let took = &events[2];
    assert_eq!(
        (
            took.kind.as_str(),
            took.worker.as_deref(),
            took.message.as_deref()
        ),
        ("taken_over", Some("w2"), Some("from w1")),
        "{events:?}"
    );
    assert_eq!(
        history(store, &id).await,
        kinds(&[
            ("created", None),
            ("claimed", Some("w1")),
            ("taken_over", Some("w2")),
            ("released", Some("w2")),
        ])
    );

    // Another owner's task has no history to read; a deleted task none left.
    let other = store
        .history(&Owner::new("mallory"), &id, T0)
        .await
        .expect("history");
    assert!(other.is_none(), "another owner must not see a history");
}

pub async fn a_tasks_history_keeps_its_last_500_events(store: &dyn TaskStore) {
    let id = new_task(store, None).await;
    // Each round is two events: claimed, then released.
    for round in 0..260u64 {
        let claimed = store.claim("w1", 1, LEASE, at(round)).await.expect("claim");
        store
            .release(&id, "w1", claimed[0].fence, at(round))
            .await
            .expect("release");
    }
    let events = events_of(store, &id).await;
    assert_eq!(events.len(), 500, "the last 500 are kept");
    let last = events.last().expect("events");
    assert_eq!((last.seq, last.kind.as_str()), (521, "released"));
    assert_eq!(events[0].seq, 22, "the oldest went first");
}

pub async fn heartbeat_keeps_a_lease_alive(store: &dyn TaskStore) {
    let id = new_task(store, None).await;
    let claimed = store.claim("w1", 1, LEASE, T0).await.expect("claim");
    let until = T0.saturating_add(2 * LEASE);
    store
        .heartbeat(&id, "w1", claimed[0].fence, 2 * LEASE, T0)
        .await
        .expect("heartbeat");
    let task = store
        .get(&alice(), &id, T0)
        .await
        .expect("get")
        .expect("task");
    assert_eq!(task.lease_until, Some(until), "extended from now");
    let at = T0.saturating_add(LEASE + Duration::from_millis(1));
    assert!(
        store
            .claim("w2", 1, LEASE, at)
            .await
            .expect("claim")
            .is_empty(),
        "past the claim's lease, within the heartbeat's"
    );
    // A last heartbeat of no length: the lease is over on every clock.
    store
        .heartbeat(&id, "w1", claimed[0].fence, Duration::ZERO, until)
        .await
        .expect("heartbeat");
    assert_eq!(
        store
            .claim("w2", 1, LEASE, until)
            .await
            .expect("claim")
            .len(),
        1
    );
}

pub async fn waiting_step_is_due_again_at_its_time(store: &dyn TaskStore) {
    let id = new_task(store, None).await;
    let t = &store.claim("w", 1, LEASE, T0).await.expect("claim")[0];
    let waiting = Outcome::Waiting {
        state: json!({"step": 1}),
        status_message: Some("halfway".into()),
        due_at: at(5_000),
    };
    let saved = store
        .checkpoint(&id, "w", t.fence, waiting, at(10))
        .await
        .expect("save");
    assert_eq!(saved.steps, 1);
    assert_eq!(saved.job_state, Some(json!({"step": 1})));
    assert_eq!(store.next_due().await.expect("next"), Some(at(5_000)));
    assert!(
        store
            .claim("w", 1, LEASE, at(4_999))
            .await
            .expect("claim")
            .is_empty()
    );
    let again = store.claim("w", 1, LEASE, at(5_000)).await.expect("claim");
    assert_eq!(again[0].status_message.as_deref(), Some("halfway"));
    assert_eq!(again[0].fence, Fence::from_raw(2));
}

pub async fn input_is_accepted_for_outstanding_keys_only(store: &dyn TaskStore) {
    let id = new_task(store, None).await;
    let t = &store.claim("w", 1, LEASE, T0).await.expect("claim")[0];
    let saved = store
        .checkpoint(&id, "w", t.fence, ask(&["a", "b"]), T0)
        .await
        .expect("save");
    assert_eq!(saved.status, TaskPhase::InputRequired);
    assert_eq!(saved.due_at, None, "a task waiting for input is not due");

    let mut partial = BTreeMap::new();
    partial.insert("a".to_owned(), json!({"action": "accept"}));
    partial.insert("zzz".to_owned(), json!("unknown key"));
    let ack = store
        .record_input(&alice(), &id, partial, at(1))
        .await
        .expect("input");
    assert_eq!(ack.accepted, vec!["a".to_owned()]);
    assert!(!ack.complete);
    let task = store
        .get(&alice(), &id, at(1))
        .await
        .expect("get")
        .expect("task");
    assert_eq!(task.status, TaskPhase::InputRequired);
    assert_eq!(task.input_requests.keys().collect::<Vec<_>>(), vec!["b"]);

    let mut again = BTreeMap::new();
    again.insert("a".to_owned(), json!({"action": "decline"}));
    let ack = store
        .record_input(&alice(), &id, again, at(2))
        .await
        .expect("input");
    assert!(ack.accepted.is_empty(), "an answered key is ignored");

    let mut rest = BTreeMap::new();
    rest.insert(
        "b".to_owned(),
        json!({"action": "accept", "content": {"v": 2}}),
    );
    let ack = store
        .record_input(&alice(), &id, rest, at(3))
        .await
        .expect("input");
    assert!(ack.complete);
    let task = store
        .get(&alice(), &id, at(3))
        .await
        .expect("get")
        .expect("task");
    assert_eq!(task.status, TaskPhase::Working);
    assert_eq!(task.due_at, Some(at(3)));
    assert_eq!(
        task.input_responses.get("a"),
        Some(&json!({"action": "accept"}))
    );
    assert_eq!(task.input_responses.len(), 2);

    let foreign = store
        .record_input(&Owner::new("mallory"), &id, BTreeMap::new(), at(3))
        .await;
    assert!(matches!(foreign, Err(StoreError::NotFound)));
}

pub async fn input_keys_are_unique_for_a_tasks_life(store: &dyn TaskStore) {
    let id = new_task(store, None).await;
    let t = &store.claim("w", 1, LEASE, T0).await.expect("claim")[0];
    store
        .checkpoint(&id, "w", t.fence, ask(&["k"]), T0)
        .await
        .expect("save");
    let mut answer = BTreeMap::new();
    answer.insert("k".to_owned(), json!({"action": "accept"}));
    store
        .record_input(&alice(), &id, answer, T0)
        .await
        .expect("input");
    let t = &store.claim("w", 1, LEASE, T0).await.expect("claim")[0];
    let saved = store
        .checkpoint(&id, "w", t.fence, ask(&["k"]), T0)
        .await
        .expect("save");
    assert_eq!(
        saved.status,
        TaskPhase::Failed,
        "reusing a key must fail the task"
    );
    let message = saved
        .error
        .as_ref()
        .and_then(|e| e.get("message"))
        .and_then(Value::as_str);
    assert!(message.is_some_and(|m| m.contains("unique")), "{message:?}");
}

pub async fn cancel_flags_a_live_task_and_makes_it_due(store: &dyn TaskStore) {
    let id = new_task(store, None).await;
    let t = &store.claim("w", 1, LEASE, T0).await.expect("claim")[0];
    store
        .checkpoint(&id, "w", t.fence, ask(&["q"]), T0)
        .await
        .expect("save");
    store
        .request_cancel(&alice(), &id, at(5))
        .await
        .expect("cancel");
    let claimed = store.claim("w", 1, LEASE, at(5)).await.expect("claim");
    assert_eq!(
        claimed.len(),
        1,
        "a cancelled task waiting for input is due at once"
    );
    assert!(claimed[0].cancel_requested);
    let done = store
        .checkpoint(&id, "w", claimed[0].fence, Outcome::cancelled(), at(6))
        .await
        .expect("save");
    assert_eq!(done.status, TaskPhase::Cancelled);
    assert_eq!(done.status_message.as_deref(), Some("cancelled"));
    assert!(done.input_requests.is_empty());
    store
        .request_cancel(&alice(), &id, at(7))
        .await
        .expect("cancel of ended task is a no-op");

    // A job that says what goes on upstream keeps its words.
    let said = new_task(store, None).await;
    let t = &store.claim("w", 1, LEASE, at(8)).await.expect("claim")[0];
    let outcome = Outcome::Cancelled {
        status_message: Some("cancelled; the agent's run goes on upstream".to_owned()),
    };
    let done = store
        .checkpoint(&said, "w", t.fence, outcome, at(9))
        .await
        .expect("save");
    assert_eq!(done.status, TaskPhase::Cancelled);
    assert_eq!(
        done.status_message.as_deref(),
        Some("cancelled; the agent's run goes on upstream")
    );
    let foreign = store
        .request_cancel(&Owner::new("mallory"), &id, at(7))
        .await;
    assert!(matches!(foreign, Err(StoreError::NotFound)));
}

pub async fn sweep_expires_overdue_tasks_and_deletes_old_ended_ones(store: &dyn TaskStore) {
    let forever = new_task(store, None).await;
    let ended = new_task(store, None).await;
    let claimed = store.claim("w", 10, LEASE, T0).await.expect("claim");
    let fence = |id: &TaskId| claimed.iter().find(|t| &t.id == id).expect("claimed").fence;
    store
        .checkpoint(&ended, "w", fence(&ended), Outcome::cancelled(), T0)
        .await
        .expect("save");
    let short = new_task(store, Some(1_000)).await;
    let report = store
        .sweep(at(1_000), Duration::from_secs(60), None)
        .await
        .expect("sweep");
    assert_eq!(report.expired, 1);
    assert_eq!(report.deleted, 0, "nothing is past retention yet");
    let owner = alice();
    assert!(
        store
            .get(&owner, &short, at(1_000))
            .await
            .expect("get")
            .is_none(),
        "an expired task answers as unknown at once"
    );
    // Not ended by the sweep: asked to cancel, and due at once, so a worker
    // runs its backend's cancel, which stops the upstream work.
    let cancelling = store
        .claim("w2", 10, LEASE, at(1_000))
        .await
        .expect("claim");
    let cancelling = cancelling
        .iter()
        .find(|t| t.id == short)
        .expect("the expired task is claimed to cancel");
    assert!(cancelling.cancel_requested);
    assert_eq!(cancelling.status, TaskPhase::Working);
    assert_eq!(
        cancelling.status_message.as_deref(),
        Some(super::transition::EXPIRING)
    );
    let report = store
        .sweep(at(1_500), Duration::from_secs(60), None)
        .await
        .expect("sweep");
    assert_eq!(report.expired, 0, "an expiring task is expired once");
    let done = store
        .checkpoint(
            &short,
            "w2",
            cancelling.fence,
            Outcome::cancelled(),
            at(2_000),
        )
        .await
        .expect("its cancel ran");
    assert_eq!(done.status, TaskPhase::Cancelled);
    assert_eq!(
        done.status_message.as_deref(),
        Some(super::transition::EXPIRED_AND_CANCELLED)
    );
    assert!(done.is_expired(at(2_000)), "ending brings no handle back");
    let report = store
        .sweep(at(60_999), Duration::from_secs(60), None)
        .await
        .expect("sweep");
    assert_eq!(
        report.deleted, 1,
        "the cancelled task, retention after it ended"
    );
    let report = store
        .sweep(at(61_000), Duration::from_secs(60), None)
        .await
        .expect("sweep");
    assert_eq!(
        report.deleted, 1,
        "the expired one, retention after it expired"
    );
    assert!(
        store
            .get(&owner, &ended, at(61_000))
            .await
            .expect("get")
            .is_none()
    );
    assert!(
        store
            .get(&owner, &forever, at(61_000))
            .await
            .expect("get")
            .is_some()
    );
}

/// Issue 32: a TTL counts from the last progress, not from creation. A
/// step that gets somewhere, a question and an answer move it forward; a
/// retried failure does not.
pub async fn a_live_tasks_ttl_moves_with_its_progress(store: &dyn TaskStore) {
    let id = new_task(store, Some(1_000)).await;
    let owner = alice();
    let claimed = store.claim("w", 10, LEASE, at(900)).await.expect("claim");
    let fence = claimed.iter().find(|t| t.id == id).expect("claimed").fence;
    let waiting = Outcome::Waiting {
        state: json!({"step": 1}),
        status_message: Some("still working".into()),
        due_at: at(1_500),
    };
    let saved = store
        .checkpoint(&id, "w", fence, waiting, at(900))
        .await
        .expect("save");
    assert_eq!(saved.expires_at, Some(at(1_900)));
    assert_eq!(
        saved.ttl_from_creation_ms(),
        Some(1_900),
        "the wire's ttl grows"
    );
    let seen = store.get(&owner, &id, at(1_500)).await.expect("get");
    assert!(seen.is_some(), "alive past created_at + ttl");
    // A failed attempt is no progress.
    let claimed = store.claim("w", 10, LEASE, at(1_500)).await.expect("claim");
    let fence = claimed.iter().find(|t| t.id == id).expect("claimed").fence;
    let retry = Outcome::Retry {
        status_message: Some("retrying".into()),
        due_at: at(1_800),
    };
    let saved = store
        .checkpoint(&id, "w", fence, retry, at(1_600))
        .await
        .expect("save");
    assert_eq!(saved.expires_at, Some(at(1_900)));
    // A question is progress; so is its answer.
    let claimed = store.claim("w", 10, LEASE, at(1_800)).await.expect("claim");
    let fence = claimed.iter().find(|t| t.id == id).expect("claimed").fence;
    let saved = store
        .checkpoint(&id, "w", fence, ask(&["k"]), at(1_800))
        .await
        .expect("save");
    assert_eq!(saved.expires_at, Some(at(2_800)));
    let answer = BTreeMap::from([("k".to_owned(), json!("yes"))]);
    store
        .record_input(&owner, &id, answer, at(2_500))
        .await
        .expect("answer");
    let seen = store
        .get(&owner, &id, at(3_000))
        .await
        .expect("get")
        .expect("the answer moved the expiry");
    assert_eq!(seen.expires_at, Some(at(3_500)));
    assert!(
        store
            .get(&owner, &id, at(3_500))
            .await
            .expect("get")
            .is_none()
    );
}

/// A task that keeps making progress still ends: past `max_lifetime` after
/// its creation the sweep expires it like any overdue task.
pub async fn a_task_past_its_lifetime_is_expired_whatever_its_ttl(store: &dyn TaskStore) {
    let old = new_task(store, None).await;
    let report = store
        .sweep(
            at(5_000),
            Duration::from_secs(60),
            Some(Duration::from_secs(10)),
        )
        .await
        .expect("sweep");
    assert_eq!(report.expired, 0, "not yet");
    let report = store
        .sweep(
            at(10_000),
            Duration::from_secs(60),
            Some(Duration::from_secs(10)),
        )
        .await
        .expect("sweep");
    assert_eq!(report.expired, 1);
    assert!(
        store
            .get(&alice(), &old, at(10_000))
            .await
            .expect("get")
            .is_none()
    );
}

/// Durations beyond what milliseconds in an `i64` hold saturate, as in the
/// scheduler: an absurd lease holds (it does not wrap into the past and let
/// another worker in), an absurd retention keeps every ended task (it does
/// not wrap into the future and delete them all).
pub async fn absurd_durations_saturate(store: &dyn TaskStore) {
    let ended = new_task(store, None).await;
    let claimed = store
        .claim("w", 10, Duration::MAX, T0)
        .await
        .expect("claim with an absurd lease");
    let task = claimed.iter().find(|t| t.id == ended).expect("claimed");
    assert!(
        task.lease_until.is_some_and(|until| until > T0),
        "the lease ends after now: {:?}",
        task.lease_until
    );
    let later = T0.saturating_add(Duration::from_secs(365 * 24 * 3600));
    assert!(
        store
            .claim("thief", 10, LEASE, later)
            .await
            .expect("claim")
            .is_empty(),
        "the lease still holds a year later"
    );
    store
        .checkpoint(&ended, "w", task.fence, Outcome::cancelled(), T0)
        .await
        .expect("save");
    let report = store
        .sweep(later, Duration::MAX, None)
        .await
        .expect("sweep");
    assert_eq!(report.deleted, 0, "nothing is past an absurd retention");
    assert!(
        store
            .get(&alice(), &ended, later)
            .await
            .expect("get")
            .is_some(),
        "the ended task is kept"
    );
}

/// A checkpoint for a task that is gone (swept) says so: it is not a lost
/// lease, which would mean another worker holds it.
pub async fn checkpoint_of_a_deleted_task_is_not_found(store: &dyn TaskStore) {
    let id = new_task(store, None).await;
    // A lease that is over as soon as it is taken, on every clock (a store
    // may judge leases by a clock of its own, which the test cannot move).
    let claimed = store
        .claim("w", 10, Duration::ZERO, T0)
        .await
        .expect("claim");
    let stale = claimed.iter().find(|t| t.id == id).expect("claimed").fence;
    // `w` stalls past its lease; `w2` takes the task over and ends it, and
    // long past the retention the sweep deletes it.
    let taken = store.claim("w2", 10, LEASE, at(1)).await.expect("claim");
    let fence = taken.iter().find(|t| t.id == id).expect("taken over").fence;
    store
        .checkpoint(&id, "w2", fence, Outcome::cancelled(), at(1))
        .await
        .expect("save");
    let report = store
        .sweep(at(40_000), Duration::from_secs(1), None)
        .await
        .expect("sweep");
    assert_eq!(report.deleted, 1);
    let saved = store
        .checkpoint(&id, "w", stale, Outcome::cancelled(), at(40_000))
        .await;
    assert!(matches!(saved, Err(StoreError::NotFound)), "{saved:?}");
    let other = store
        .checkpoint(
            &TaskId::generate(),
            "w",
            Fence::from_raw(1),
            Outcome::cancelled(),
            T0,
        )
        .await;
    assert!(matches!(other, Err(StoreError::NotFound)), "{other:?}");
}

/// Retryable failures count up in a row (the scheduler gives up on the
/// count), and a step that gets somewhere starts the count again.
pub async fn retries_count_failures_in_a_row(store: &dyn TaskStore) {
    let id = new_task(store, None).await;
    let mut now = T0;
    let retry = |due_at| Outcome::Retry {
        status_message: Some("retrying".into()),
        due_at,
    };
    for expected in 1..=3 {
        let claimed = store.claim("w", 10, LEASE, now).await.expect("claim");
        let task = claimed.iter().find(|t| t.id == id).expect("due again");
        let saved = store
            .checkpoint(&id, "w", task.fence, retry(now), now)
            .await
            .expect("save");
        assert_eq!(saved.failures, expected, "failures in a row");
        assert_eq!(saved.steps, 0, "a failed step is not a step");
        now = now.saturating_add(Duration::from_millis(1));
    }
    let claimed = store.claim("w", 10, LEASE, now).await.expect("claim");
    let task = claimed.iter().find(|t| t.id == id).expect("due again");
    assert_eq!(task.failures, 3, "the count is stored");
    let saved = store
        .checkpoint(
            &id,
            "w",
            task.fence,
            Outcome::Waiting {
                state: json!({}),
                status_message: None,
                due_at: now,
            },
            now,
        )
        .await
        .expect("save");
    assert_eq!(saved.failures, 0, "a step that got somewhere resets it");
    assert_eq!(saved.steps, 1);
}

/// NUL characters (which PostgreSQL refuses in text and JSON) are stored as
/// U+FFFD wherever they come from, on every store alike: a new task's
/// arguments, a step's state, status, input requests and result, and a
/// client's answers.
pub async fn nul_characters_are_stored_as_replacement_characters(store: &dyn TaskStore) {
    let id = TaskId::generate();
    store
        .create(NewTask {
            id: id.clone(),
            owner: alice(),
            tool: "tool".into(),
            args: json!({"q\u{0}": ["a\u{0}b"]}),
            status_message: Some("queued\u{0}".into()),
            ttl_ms: None,
            now: T0,
        })
        .await
        .expect("a NUL in the arguments is storable");
    let task = store
        .get(&alice(), &id, T0)
        .await
        .expect("get")
        .expect("task");
    assert_eq!(task.args, json!({"q\u{FFFD}": ["a\u{FFFD}b"]}));
    assert_eq!(task.status_message.as_deref(), Some("queued\u{FFFD}"));

    let claimed = store.claim("w", 10, LEASE, T0).await.expect("claim");
    let fence = claimed.iter().find(|t| t.id == id).expect("claimed").fence;
    let asked = store
        .checkpoint(
            &id,
            "w",
            fence,
            Outcome::InputRequired {
                state: json!({"s": "x\u{0}"}),
                status_message: Some("agent says \u{0}".into()),
                requests: BTreeMap::from([("k\u{0}".to_owned(), json!({"m": "\u{0}"}))]),
            },
            at(1),
        )
        .await
        .expect("a NUL in a step's state, status and requests is storable");
    assert_eq!(asked.job_state, Some(json!({"s": "x\u{FFFD}"})));
    assert_eq!(asked.status_message.as_deref(), Some("agent says \u{FFFD}"));
    assert_eq!(
        asked.input_requests,
        BTreeMap::from([("k\u{FFFD}".to_owned(), json!({"m": "\u{FFFD}"}))])
    );
    let ack = store
        .record_input(
            &alice(),
            &id,
            BTreeMap::from([("k\u{FFFD}".to_owned(), json!("yes\u{0}"))]),
            at(2),
        )
        .await
        .expect("a NUL in an answer is storable");
    assert!(ack.complete);
    let task = store
        .get(&alice(), &id, at(2))
        .await
        .expect("get")
        .expect("task");
    assert_eq!(
        task.input_responses,
        BTreeMap::from([("k\u{FFFD}".to_owned(), json!("yes\u{FFFD}"))])
    );

    let claimed = store.claim("w", 10, LEASE, at(3)).await.expect("claim");
    let fence = claimed.iter().find(|t| t.id == id).expect("claimed").fence;
    let done = store
        .checkpoint(
            &id,
            "w",
            fence,
            Outcome::Completed {
                result: json!({"content": [{"type": "text", "text": "status\u{0}text"}]}),
            },
            at(4),
        )
        .await
        .expect("a NUL in a result is storable");
    assert_eq!(done.status, TaskPhase::Completed);
    assert_eq!(
        done.result,
        Some(json!({"content": [{"type": "text", "text": "status\u{FFFD}text"}]}))
    );
    let stored = store
        .get(&alice(), &id, at(4))
        .await
        .expect("get")
        .expect("task");
    assert_eq!(stored.result, done.result, "what was read back is stored");

    // A client's task id with a NUL is unknown, like any id no task has.
    let odd = TaskId::from_client("task\u{0}");
    assert_eq!(store.get(&alice(), &odd, at(5)).await.expect("get"), None);
    let answered = store
        .record_input(&alice(), &odd, BTreeMap::new(), at(5))
        .await;
    assert!(
        matches!(answered, Err(StoreError::NotFound)),
        "{answered:?}"
    );
    let cancelled = store.request_cancel(&alice(), &odd, at(5)).await;
    assert!(
        matches!(cancelled, Err(StoreError::NotFound)),
        "{cancelled:?}"
    );

    // An upstream id with a NUL (an agent's context id) is bound and found,
    // and the id it is stored as is the same binding, not a second one.
    let bound = store
        .bind_upstream_id("a2a/context", "ctx\u{0}", &alice(), at(5))
        .await
        .expect("an upstream id with a NUL is storable");
    assert_eq!(bound, alice());
    assert_eq!(
        store
            .upstream_id_owner("a2a/context", "ctx\u{0}")
            .await
            .expect("owner"),
        Some(alice())
    );
    assert_eq!(
        store
            .bind_upstream_id("a2a/context", "ctx\u{FFFD}", &Owner::new("bob"), at(6))
            .await
            .expect("bind"),
        alice(),
        "the look-alike id is alice's, so bob is refused"
    );
}

pub async fn release_all_frees_a_workers_leases(store: &dyn TaskStore) {
    new_task(store, None).await;
    new_task(store, None).await;
    assert_eq!(
        store.claim("w1", 10, LEASE, T0).await.expect("claim").len(),
        2
    );
    assert_eq!(store.release_all("w1", at(1)).await.expect("release"), 2);
    assert_eq!(
        store
            .claim("w2", 10, LEASE, at(1))
            .await
            .expect("claim")
            .len(),
        2
    );
}

pub async fn release_gives_up_one_lease_and_is_fenced(store: &dyn TaskStore) {
    let id = new_task(store, None).await;
    let other = new_task(store, None).await;
    let claimed = store.claim("w1", 10, LEASE, T0).await.expect("claim");
    assert_eq!(claimed.len(), 2);
    let attempt = claimed.iter().find(|c| c.id == id).expect("claimed").fence;
    // A stale attempt or another worker cannot release it.
    assert!(matches!(
        store.release(&id, "w1", attempt.next(), at(1)).await,
        Err(StoreError::LeaseLost { .. })
    ));
    assert!(matches!(
        store.release(&id, "w2", attempt, at(1)).await,
        Err(StoreError::LeaseLost { .. })
    ));
    store
        .release(&id, "w1", attempt, at(1))
        .await
        .expect("release");
    // Due again at once for anyone, its state untouched; the other task
    // keeps its lease.
    let again = store.claim("w2", 10, LEASE, at(1)).await.expect("claim");
    assert_eq!(again.len(), 1, "only the released task is claimable");
    assert_eq!(again[0].id, id);
    assert_eq!(again[0].fence, attempt.next());
    assert_eq!(again[0].steps, 0);
    assert_eq!(again[0].status, TaskPhase::Working);
    assert!(matches!(
        store.release(&id, "w1", attempt, at(2)).await,
        Err(StoreError::LeaseLost { .. })
    ));
    assert_ne!(other, id);
}

pub async fn secrets_are_created_once(store: &dyn TaskStore) {
    let a = store.secret("k", b"first".to_vec()).await.expect("secret");
    let b = store.secret("k", b"second".to_vec()).await.expect("secret");
    assert_eq!(a, b"first");
    assert_eq!(b, b"first", "the first writer wins");
    assert!(
        !store
            .replace_secret("k", b"not it", b"x".to_vec())
            .await
            .expect("replace"),
        "replacing needs the current value"
    );
    assert!(
        store
            .replace_secret("k", b"first", b"third".to_vec())
            .await
            .expect("replace")
    );
    assert_eq!(store.secret("k", vec![]).await.expect("secret"), b"third");
    assert_eq!(
        store.secret("other", b"o".to_vec()).await.expect("secret"),
        b"o"
    );
}

pub async fn an_upstream_id_belongs_to_the_first_principal_that_binds_it(store: &dyn TaskStore) {
    let bob = Owner::new("bob");
    let ns = "qbusiness/conversation";
    assert_eq!(
        store.upstream_id_owner(ns, "c1").await.expect("owner"),
        None
    );
    assert_eq!(
        store
            .bind_upstream_id(ns, "c1", &alice(), T0)
            .await
            .expect("bind"),
        alice()
    );
    assert_eq!(
        store
            .bind_upstream_id(ns, "c1", &bob, at(1))
            .await
            .expect("bind"),
        alice(),
        "the first binder keeps the id"
    );
    assert_eq!(
        store.upstream_id_owner(ns, "c1").await.expect("owner"),
        Some(alice())
    );
    // Namespaces are apart: the same id of another kind is another id.
    assert_eq!(
        store
            .bind_upstream_id("a2a/context", "c1", &bob, at(2))
            .await
            .expect("bind"),
        bob
    );
    assert_eq!(
        store.upstream_id_owner(ns, "c2").await.expect("owner"),
        None
    );
}

/// A write whose caller stops waiting part-way (a step interrupted by a
/// cancel, a client that hung up) leaves nothing behind: the writes after it
/// still work. Each write is abandoned after a growing number of polls, so
/// some are dropped while their `BEGIN` or `COMMIT` is in flight.
pub async fn an_abandoned_write_leaves_the_store_writable(store: &dyn TaskStore) {
    use futures::FutureExt as _;
    let (owner, task) = (alice(), new_task(store, None).await);
    for polls in 0..24u64 {
        let id = format!("c{polls}");
        let mut writes = [
            store
                .bind_upstream_id("qbusiness/conversation", &id, &owner, at(polls))
                .map(drop)
                .boxed(),
            store
                .request_cancel(&owner, &task, at(polls))
                .map(drop)
                .boxed(),
        ];
        for write in &mut writes {
            for _ in 0..polls {
                if write.as_mut().now_or_never().is_some() {
                    break;
                }
                tokio::task::yield_now().await;
            }
        }
        drop(writes);
        let after = new_task(store, None).await;
        store
            .request_cancel(&alice(), &after, at(polls))
            .await
            .unwrap_or_else(|e| panic!("a write after one abandoned at poll {polls}: {e}"));
    }
}

/// `tasks/list`: the owner's tasks that have not expired, newest first, a
/// page at a time; nobody else's, and a cursor never repeats or skips one.
pub async fn tasks_are_listed_newest_first_a_page_at_a_time(store: &dyn TaskStore) {
    let bob = Owner::new("bob");
    let mut created = Vec::new();
    for n in 0..5u64 {
        let id = TaskId::generate();
        store
            .create(NewTask {
                id: id.clone(),
                owner: alice(),
                tool: "tool".into(),
                args: json!({"n": n}),
                status_message: None,
                // The third (created at 2 ms) expires at 100 ms.
                ttl_ms: (n == 2).then_some(98),
                // Two pairs created in the same millisecond: the id orders them.
                now: at(n / 2 * 2),
            })
            .await
            .expect("create");
        created.push((at(n / 2 * 2), id));
    }
    let other = TaskId::generate();
    store
        .create(NewTask {
            id: other.clone(),
            owner: bob.clone(),
            tool: "tool".into(),
            args: json!({}),
            status_message: None,
            ttl_ms: None,
            now: at(9),
        })
        .await
        .expect("create");
    // Newest first: by creation time, then by id.
    created.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| b.1.as_str().cmp(a.1.as_str())));
    let mut pages = Vec::new();
    let mut after = None;
    loop {
        let page = store
            .list(&alice(), at(50), after.as_ref(), 2)
            .await
            .expect("list");
        assert!(page.len() <= 2);
        let Some(last) = page.last() else { break };
        after = Some(super::ListCursor {
            created_at: last.created_at,
            id: last.id.clone(),
        });
        pages.extend(page.iter().map(|t| t.id.clone()));
    }
    let expected: Vec<TaskId> = created.iter().map(|(_, id)| id.clone()).collect();
    assert_eq!(pages, expected, "every task once, newest first");
    assert!(!pages.contains(&other), "never another owner's");
    // Past its TTL, a task is no longer listed.
    let later = store.list(&alice(), at(200), None, 10).await.expect("list");
    assert_eq!(later.len(), 4, "the expired one is gone: {later:?}");
    assert_eq!(
        store
            .list(&bob, at(50), None, 10)
            .await
            .expect("list")
            .len(),
        1
    );
}

pub async fn sealed_secrets_are_not_in_the_store_in_clear(store: &dyn TaskStore) {
    let key = super::seal::SealKey::generate();
    let plain = super::seal::shared_secret(store, &key, "s")
        .await
        .expect("secret");
    let again = super::seal::shared_secret(store, &key, "s")
        .await
        .expect("secret");
    assert_eq!(plain, again, "every reader gets the same secret");
    let stored = store.secret("s", vec![]).await.expect("raw");
    assert!(
        !stored.windows(plain.len()).any(|w| w == plain.as_slice()),
        "the secret must be stored sealed"
    );
    let err = super::seal::shared_secret(store, &super::seal::SealKey::generate(), "s")
        .await
        .expect_err("another key cannot open it");
    assert!(err.to_string().contains("same key"), "{err}");

    // A secret an earlier version stored in clear is sealed on first read.
    store
        .secret("legacy", b"0123456789abcdef0123456789abcdef".to_vec())
        .await
        .expect("legacy");
    let opened = super::seal::shared_secret(store, &key, "legacy")
        .await
        .expect("legacy opens");
    assert_eq!(opened, b"0123456789abcdef0123456789abcdef");
    let stored = store.secret("legacy", vec![]).await.expect("raw");
    assert!(!stored.windows(opened.len()).any(|w| w == opened.as_slice()));
    assert_eq!(
        super::seal::shared_secret(store, &key, "legacy")
            .await
            .expect("still opens"),
        opened
    );
}

pub async fn nudge_makes_a_waiting_task_due_now_and_nothing_else(store: &dyn TaskStore) {
    let id = new_task(store, None).await;
    let t = &store.claim("w", 1, LEASE, T0).await.expect("claim")[0];
    assert!(
        !store.nudge(&id, at(1)).await.expect("nudge"),
        "a task in a step is not nudged"
    );
    let wait = Outcome::Waiting {
        state: serde_json::json!({"phase": "watching"}),
        status_message: Some("watching".into()),
        due_at: at(60_000),
    };
    store
        .checkpoint(&id, "w", t.fence, wait, at(2))
        .await
        .expect("save");
    assert!(
        store
            .claim("w", 1, LEASE, at(3))
            .await
            .expect("claim")
            .is_empty()
    );
    assert!(store.nudge(&id, at(3)).await.expect("nudge"));
    let claimed = store.claim("w", 1, LEASE, at(3)).await.expect("claim");
    assert_eq!(claimed.len(), 1, "a nudged task is due at once");
    assert_eq!(
        claimed[0].job_state,
        Some(serde_json::json!({"phase": "watching"}))
    );
    assert_eq!(claimed[0].status_message.as_deref(), Some("watching"));
    store
        .checkpoint(&id, "w", claimed[0].fence, ask(&["q"]), at(4))
        .await
        .expect("save");
    assert!(
        !store.nudge(&id, at(5)).await.expect("nudge"),
        "a task waiting for input is not nudged"
    );
    let unknown = TaskId::generate();
    assert!(!store.nudge(&unknown, at(5)).await.expect("nudge"));
}

pub async fn tasks_are_counted_by_tool_and_status(store: &dyn TaskStore) {
    assert!(
        store
            .count_by_tool_and_status()
            .await
            .expect("count")
            .is_empty()
    );
    let mut ids = Vec::new();
    for tool in ["a", "a", "a", "b"] {
        let id = TaskId::generate();
        store
            .create(NewTask {
                id: id.clone(),
                owner: alice(),
                tool: tool.into(),
                args: json!({}),
                status_message: None,
                ttl_ms: None,
                now: T0,
            })
            .await
            .expect("create");
        ids.push(id);
    }
    // Complete one `a` task and send another one to input_required.
    let claimed = store.claim("w", 10, LEASE, T0).await.expect("claim");
    assert_eq!(claimed.len(), 4);
    let attempt = |id: &TaskId| {
        claimed
            .iter()
            .find(|t| &t.id == id)
            .map(|t| t.fence)
            .expect("claimed")
    };
    let done = Outcome::Completed {
        result: json!({"content": []}),
    };
    store
        .checkpoint(&ids[0], "w", attempt(&ids[0]), done, T0)
        .await
        .expect("save");
    store
        .checkpoint(&ids[1], "w", attempt(&ids[1]), ask(&["k"]), T0)
        .await
        .expect("save");
    let mut counts: Vec<_> = store
        .count_by_tool_and_status()
        .await
        .expect("count")
        .into_iter()
        .map(|c| (c.tool, c.status, c.count))
        .collect();
    counts.sort_by(|x, y| (&x.0, x.1.as_str()).cmp(&(&y.0, y.1.as_str())));
    assert_eq!(
        counts,
        vec![
            ("a".to_owned(), TaskPhase::Completed, 1),
            ("a".to_owned(), TaskPhase::InputRequired, 1),
            ("a".to_owned(), TaskPhase::Working, 1),
            ("b".to_owned(), TaskPhase::Working, 1),
        ]
    );
}

pub async fn active_tasks_are_counted_per_owner(store: &dyn TaskStore) {
    assert_eq!(
        store.count_active(&alice(), T0, 100).await.expect("count"),
        0
    );
    let done = new_task(store, None).await;
    let asking = new_task(store, None).await;
    let _working = new_task(store, None).await;
    let _short_lived = new_task(store, Some(1_000)).await;
    store
        .create(NewTask {
            id: TaskId::generate(),
            owner: Owner::new("bob"),
            tool: "tool".into(),
            args: json!({}),
            status_message: None,
            ttl_ms: None,
            now: T0,
        })
        .await
        .expect("create");
    assert_eq!(
        store.count_active(&alice(), T0, 100).await.expect("count"),
        4
    );
    assert_eq!(
        store.count_active(&alice(), T0, 2).await.expect("count"),
        2,
        "counts no further than asked"
    );
    assert_eq!(
        store
            .count_active(&Owner::new("bob"), T0, 100)
            .await
            .expect("count"),
        1
    );
    // One task ends and one waits for input: only the ended one stops counting.
    let claimed = store.claim("w", 10, LEASE, T0).await.expect("claim");
    let attempt = |id: &TaskId| {
        claimed
            .iter()
            .find(|t| &t.id == id)
            .map(|t| t.fence)
            .expect("claimed")
    };
    let result = Outcome::Completed {
        result: json!({"content": []}),
    };
    store
        .checkpoint(&done, "w", attempt(&done), result, T0)
        .await
        .expect("save");
    store
        .checkpoint(&asking, "w", attempt(&asking), ask(&["k"]), T0)
        .await
        .expect("save");
    assert_eq!(
        store.count_active(&alice(), T0, 100).await.expect("count"),
        3
    );
    // Past its TTL a task no longer counts, even before the sweeper runs.
    assert_eq!(
        store
            .count_active(&alice(), at(1_000), 100)
            .await
            .expect("count"),
        2
    );
    assert_eq!(
        store
            .count_active(&Owner::new("carol"), T0, 100)
            .await
            .expect("count"),
        0
    );
}

async fn usage(store: &dyn TaskStore, owner: &str, at_most: u64) -> StoredUsage {
    store
        .stored_usage(&Owner::new(owner), at_most)
        .await
        .expect("stored usage")
}

/// A new task of `owner` whose arguments hold `filler` bytes of text.
async fn task_with_args(
    store: &dyn TaskStore,
    owner: &str,
    filler: usize,
    ttl_ms: Option<u64>,
) -> TaskId {
    let id = TaskId::generate();
    store
        .create(NewTask {
            id: id.clone(),
            owner: Owner::new(owner),
            tool: "tool".into(),
            args: json!({ "blob": "a".repeat(filler) }),
            status_message: Some("queued".into()),
            ttl_ms,
            now: T0,
        })
        .await
        .expect("create");
    id
}

pub async fn stored_usage_follows_creates_checkpoints_answers_and_sweeps(store: &dyn TaskStore) {
    // Each row holds a little JSON besides the payloads (`{}`, `[]`, a
    // status message, the stores' own spacing): payloads are measured with
    // this much slack.
    const SLACK: u64 = 200;
    assert_eq!(usage(store, "alice", 100).await, StoredUsage::default());
    assert_eq!(store.oldest_ended(&alice()).await.expect("oldest"), None);

    let big = task_with_args(store, "alice", 10_000, None).await;
    let created = usage(store, "alice", 100).await;
    assert_eq!(created.tasks, 1);
    assert!(
        (10_000..10_000 + SLACK).contains(&created.bytes),
        "a create counts its arguments: {created:?}"
    );
    let asking = task_with_args(store, "alice", 0, None).await;
    let short_lived = task_with_args(store, "alice", 0, Some(1_000)).await;
    task_with_args(store, "bob", 3_000, None).await;
    let both = usage(store, "alice", 100).await;
    assert_eq!(both.tasks, 3, "another owner's task is not counted");
    assert!(both.bytes > created.bytes && both.bytes < created.bytes + 3 * SLACK);
    let bob = usage(store, "bob", 100).await;
    assert_eq!(bob.tasks, 1);
    assert!((3_000..3_000 + SLACK).contains(&bob.bytes), "{bob:?}");
    assert_eq!(
        usage(store, "alice", 2).await.tasks,
        2,
        "counts no further than asked"
    );

    // A checkpoint's result and state count, in the batch that saves it.
    let claimed = store.claim("w", 10, LEASE, T0).await.expect("claim");
    let fence = |id: &TaskId| {
        claimed
            .iter()
            .find(|t| &t.id == id)
            .map(|t| t.fence)
            .expect("claimed")
    };
    let result = Outcome::Completed {
        result: json!({ "content": [{ "type": "text", "text": "r".repeat(20_000) }] }),
    };
    store
        .checkpoint(&big, "w", fence(&big), result, at(5))
        .await
        .expect("save");
    store
        .checkpoint(&asking, "w", fence(&asking), ask(&["k"]), at(5))
        .await
        .expect("save");
    let stepped = usage(store, "alice", 100).await;
    assert_eq!(stepped.tasks, 3, "an ended task is still stored");
    assert!(
        stepped.bytes >= both.bytes + 20_000 && stepped.bytes < both.bytes + 20_000 + 2 * SLACK,
        "a checkpoint counts its result: {both:?} then {stepped:?}"
    );
    assert_eq!(
        store.oldest_ended(&alice()).await.expect("oldest"),
        Some(at(5))
    );

    // Answers count once recorded.
    let answer = BTreeMap::from([("k".to_owned(), json!({ "text": "z".repeat(5_000) }))]);
    let ack = store
        .record_input(&alice(), &asking, answer, at(6))
        .await
        .expect("answer");
    assert!(ack.complete);
    let answered = usage(store, "alice", 100).await;
    assert!(
        answered.bytes >= stepped.bytes + 5_000 - SLACK
            && answered.bytes < stepped.bytes + 5_000 + SLACK,
        "answers count: {stepped:?} then {answered:?}"
    );

    // Expiry writes why into the row (and asks the backend to cancel);
    // deletion, once it ended, frees the row.
    let swept = store
        .sweep(at(1_000), Duration::from_secs(3_600), None)
        .await
        .expect("sweep");
    assert_eq!(
        swept,
        SweepReport {
            expired: 1,
            deleted: 0
        }
    );
    let expired = usage(store, "alice", 100).await;
    assert_eq!(expired.tasks, 3);
    assert!(expired.bytes > answered.bytes, "the expiry message counts");
    store
        .checkpoint(
            &short_lived,
            "w",
            fence(&short_lived),
            Outcome::cancelled(),
            at(2_000),
        )
        .await
        .expect("its cancel ran");
    let swept = store
        .sweep(at(10_000), Duration::from_secs(1), None)
        .await
        .expect("sweep");
    assert_eq!(swept.deleted, 2, "the completed and the expired task");
    let left = usage(store, "alice", 100).await;
    assert_eq!(left.tasks, 1, "the task waiting for its next step stays");
    assert!(
        left.bytes < expired.bytes - 20_000 - 10_000,
        "deleted tasks no longer count: {expired:?} then {left:?}"
    );
    assert_eq!(store.oldest_ended(&alice()).await.expect("oldest"), None);
    assert_eq!(
        usage(store, "bob", 100).await,
        bob,
        "bob's usage is his own"
    );
}

/// Runs the whole suite against a store constructor.
///
/// `store_suite!(async { ... })`, where the block yields a fresh
/// `impl TaskStore`, writes one `#[tokio::test]` per case.
///
/// `store_suite!(cases: make)` is for a store that needs a server which may
/// be absent, in a test binary with a harness of its own (one that can
/// report a test skipped at run time as ignored): it is an expression, a
/// `Vec` of `(case name, async fn() -> ())`, where `make` is an async
/// function returning something that derefs to a fresh store (a guard that
/// drops the test's database when the test ends, say) and ends the test
/// its own way when there is no server.
#[macro_export]
macro_rules! store_suite {
    (@tests $make:expr; $($name:ident),*) => {
        $(
            #[tokio::test]
            async fn $name() {
                let store = $make.await;
                $crate::store::suite::$name(&store).await;
            }
        )*
    };
    (@cases $make:path; $($name:ident),*) => {
        ::std::vec![$(
            (
                stringify!($name),
                (|| -> ::std::pin::Pin<::std::boxed::Box<dyn ::std::future::Future<Output = ()>>> {
                    ::std::boxed::Box::pin(async {
                        let store = $make().await;
                        $crate::store::suite::$name(&*store).await;
                    })
                }) as fn() -> ::std::pin::Pin<::std::boxed::Box<dyn ::std::future::Future<Output = ()>>>,
            ),
        )*]
    };
    (@each $mode:ident $make:tt) => {
        // Braces: the expansion is items for `tests`, an expression for
        // `cases`, and a brace-delimited call is both.
        $crate::store_suite! {@ $mode $make;
            created_task_is_visible_to_its_owner_only,
            task_past_its_ttl_is_invisible,
            claim_leases_each_due_task_once,
            a_task_created_claimed_is_its_creators_until_the_lease_ends,
            claims_take_the_earliest_runnable_tasks_first,
            concurrent_checkpoints_each_get_their_own_answer,
            concurrent_creates_each_get_their_own_answer,
            expired_lease_is_taken_over_and_stale_worker_is_fenced,
            every_change_is_in_the_tasks_history_once_in_order,
            a_tasks_history_keeps_its_last_500_events,
            heartbeat_keeps_a_lease_alive,
            waiting_step_is_due_again_at_its_time,
            input_is_accepted_for_outstanding_keys_only,
            input_keys_are_unique_for_a_tasks_life,
            cancel_flags_a_live_task_and_makes_it_due,
            sweep_expires_overdue_tasks_and_deletes_old_ended_ones,
            a_live_tasks_ttl_moves_with_its_progress,
            a_task_past_its_lifetime_is_expired_whatever_its_ttl,
            absurd_durations_saturate,
            checkpoint_of_a_deleted_task_is_not_found,
            retries_count_failures_in_a_row,
            nul_characters_are_stored_as_replacement_characters,
            release_all_frees_a_workers_leases,
            release_gives_up_one_lease_and_is_fenced,
            nudge_makes_a_waiting_task_due_now_and_nothing_else,
            tasks_are_counted_by_tool_and_status,
            active_tasks_are_counted_per_owner,
            stored_usage_follows_creates_checkpoints_answers_and_sweeps,
            secrets_are_created_once,
            an_upstream_id_belongs_to_the_first_principal_that_binds_it,
            an_abandoned_write_leaves_the_store_writable,
            tasks_are_listed_newest_first_a_page_at_a_time,
            sealed_secrets_are_not_in_the_store_in_clear
        }
    };
    (cases: $make:path) => {
        $crate::store_suite!(@each cases $make)
    };
    ($make:expr) => {
        $crate::store_suite!(@each tests $make);
    };
}
