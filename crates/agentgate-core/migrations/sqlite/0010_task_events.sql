-- A task's history: one row per change that matters to a person reading
-- what happened (created, claimed by which instance, a step's end with its
-- outcome, a question, an answer, a cancel request, a lease taken over or
-- given back, the end). Triggers append them, so every write that changes a
-- task records its events in the same transaction, whichever code path made
-- it. `at` is the database host's clock in Unix milliseconds; `seq` orders a
-- task's events; a status message is kept to its first 1 000 characters.
-- At most 500 are kept per task (the oldest go first), and a task's events
-- go with it.
CREATE TABLE task_events (
    task_id TEXT NOT NULL,
    seq     INTEGER NOT NULL,
    at      INTEGER NOT NULL,
    kind    TEXT NOT NULL,
    worker  TEXT,
    status  TEXT NOT NULL,
    message TEXT,
    PRIMARY KEY (task_id, seq)
) STRICT, WITHOUT ROWID;

CREATE TRIGGER task_events_created AFTER INSERT ON tasks BEGIN
    INSERT INTO task_events VALUES (
        NEW.id, 1, CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER),
        'created', NULL, NEW.status, substr(NEW.status_message, 1, 1000));
    INSERT INTO task_events SELECT
        NEW.id, 2, CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER),
        'claimed', NEW.lease_owner, NEW.status, NULL
    WHERE NEW.lease_owner IS NOT NULL;
END;

-- A claim takes the next fence; a lease that still named a holder was taken
-- over. After each event, the task's events beyond the last 500 go.
CREATE TRIGGER task_events_claimed AFTER UPDATE OF fence ON tasks
WHEN NEW.fence <> OLD.fence AND NEW.lease_owner IS NOT NULL BEGIN
    INSERT INTO task_events SELECT
        NEW.id, COALESCE(MAX(seq), 0) + 1,
        CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER),
        CASE WHEN OLD.lease_owner IS NULL THEN 'claimed' ELSE 'taken_over' END,
        NEW.lease_owner, NEW.status,
        CASE WHEN OLD.lease_owner IS NULL THEN NULL ELSE 'from ' || OLD.lease_owner END
    FROM task_events WHERE task_id = NEW.id;
    DELETE FROM task_events WHERE task_id = NEW.id
        AND seq <= (SELECT MAX(seq) FROM task_events WHERE task_id = NEW.id) - 500;
END;

-- One row per write below: a step's end, named by its outcome (a question
-- asked, completed, failed, cancelled, or `step_ended` when it works on; its
-- status and message say more), a step that failed and will be retried
-- (`step_failed`), else what changed.
CREATE TRIGGER task_events_changed AFTER UPDATE ON tasks
WHEN NEW.steps <> OLD.steps
  OR NEW.failures > OLD.failures
  OR NEW.status <> OLD.status
  OR NEW.input_responses <> OLD.input_responses
  OR (NEW.cancel_requested AND NOT OLD.cancel_requested)
  OR (NEW.lease_owner IS NULL AND OLD.lease_owner IS NOT NULL)
BEGIN
    INSERT INTO task_events SELECT
        NEW.id, COALESCE(MAX(seq), 0) + 1,
        CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER),
        CASE
            WHEN NEW.steps <> OLD.steps THEN CASE NEW.status
                WHEN 'input_required' THEN 'question_asked'
                WHEN 'working' THEN 'step_ended'
                ELSE NEW.status END
            WHEN NEW.failures > OLD.failures THEN 'step_failed'
            WHEN NEW.cancel_requested AND NOT OLD.cancel_requested THEN 'cancel_requested'
            WHEN NEW.input_responses <> OLD.input_responses THEN 'answered'
            WHEN NEW.status <> OLD.status THEN NEW.status
            ELSE 'released'
        END,
        COALESCE(OLD.lease_owner, NEW.lease_owner), NEW.status,
        substr(NEW.status_message, 1, 1000)
    FROM task_events WHERE task_id = NEW.id;
    DELETE FROM task_events WHERE task_id = NEW.id
        AND seq <= (SELECT MAX(seq) FROM task_events WHERE task_id = NEW.id) - 500;
END;

CREATE TRIGGER task_events_deleted AFTER DELETE ON tasks BEGIN
    DELETE FROM task_events WHERE task_id = OLD.id;
END;
