//! Driving an engine on a [`ManualClock`]: time moves only when the test's
//! task waits, and exactly as far as it waits.
//!
//! The engine measures every wait on its clock (see
//! `agentgate_core::clock`), so with a manual one a retry backoff, a
//! `Step::Wait`, a lease or a TTL passes the moment the test moves the
//! clock, never in real time. [`drive_to_end`] moves it for one task: while
//! the task sits between steps waiting for a later time, the clock jumps to
//! that time; while a step runs, it waits for the engine to announce the
//! task's next change. What the task waited for is returned, so a test can
//! check a backoff curve exactly.

use std::time::Duration;

use agentgate_core::clock::{Clock as _, ManualClock};
use agentgate_core::engine::Engine;
use agentgate_core::task::{Owner, TaskId, TaskRecord};

/// Real time a driven task may go without a change before the test fails
/// (a bound for a broken engine, not a wait anything relies on).
const STUCK: Duration = Duration::from_secs(30);

/// A task driven to its end.
#[derive(Debug)]
pub struct Driven {
    /// The task as it ended.
    pub task: TaskRecord,
    /// Each wait between steps that moved the clock, in order: how far
    /// ahead of the clock the task was due.
    pub waits: Vec<Duration>,
}

/// Moves `clock` whenever `id` waits for a later time, until it ends. For
/// tasks that need no input: one waiting for an answer fails the test after
/// a while without a change.
pub async fn drive_to_end(
    engine: &Engine,
    clock: &ManualClock,
    owner: &Owner,
    id: &TaskId,
) -> Driven {
    let mut waits = Vec::new();
    // Subscribed before the first read, so no change between a read and the
    // wait for the next one is missed.
    let mut changes = engine.subscribe();
    loop {
        let now = clock.now();
        let task = engine
            .store()
            .get(owner, id, now)
            .await
            .expect("read the driven task")
            .expect("the driven task exists");
        if task.status.is_terminal() {
            return Driven { task, waits };
        }
        if task.lease_owner.is_none()
            && let Some(due) = task.due_at.filter(|due| *due > now)
        {
            waits.push(due.since(now));
            clock.set(due);
            continue;
        }
        let change = tokio::time::timeout(STUCK, changes.recv())
            .await
            .unwrap_or_else(|_| panic!("task {id} did not change within {STUCK:?}: {task:?}"));
        // A lagged receiver only means "read again", which the loop does.
        if let Err(tokio::sync::broadcast::error::RecvError::Closed) = change {
            panic!("the engine stopped while task {id} was driven");
        }
    }
}
