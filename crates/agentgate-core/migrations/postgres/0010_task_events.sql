-- A task's history: one row per change that matters to a person reading
-- what happened (created, claimed by which instance, a step's end with its
-- outcome, a question, an answer, a cancel request, a lease taken over or
-- given back, the end). A trigger appends them, so every write that changes
-- a task records its events in the same transaction, whichever code path or
-- instance made it. `at` is the database server's clock in Unix
-- milliseconds; `seq` orders a task's events; a status message is kept to
-- its first 1 000 characters. At most 500 are kept per task (the oldest go
-- first), and a task's events go with it.
CREATE TABLE task_events (
    task_id TEXT NOT NULL,
    seq     BIGINT NOT NULL,
    at      BIGINT NOT NULL,
    kind    TEXT NOT NULL,
    worker  TEXT,
    status  TEXT NOT NULL,
    message TEXT,
    PRIMARY KEY (task_id, seq)
);

CREATE FUNCTION task_events_record() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    now_ms BIGINT := (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT;
    next_seq BIGINT;
    kind TEXT;
BEGIN
    IF TG_OP = 'DELETE' THEN
        DELETE FROM task_events WHERE task_id = OLD.id;
        RETURN NULL;
    END IF;
    IF TG_OP = 'INSERT' THEN
        INSERT INTO task_events VALUES
            (NEW.id, 1, now_ms, 'created', NULL, NEW.status, left(NEW.status_message, 1000));
        IF NEW.lease_owner IS NOT NULL THEN
            INSERT INTO task_events VALUES
                (NEW.id, 2, now_ms, 'claimed', NEW.lease_owner, NEW.status, NULL);
        END IF;
        RETURN NULL;
    END IF;
    -- A claim takes the next fence; a lease that still named a holder was
    -- taken over. After each event, the task's events beyond the last 500 go.
    IF NEW.fence <> OLD.fence AND NEW.lease_owner IS NOT NULL THEN
        SELECT COALESCE(MAX(seq), 0) + 1 INTO next_seq FROM task_events WHERE task_id = NEW.id;
        INSERT INTO task_events VALUES (NEW.id, next_seq, now_ms,
            CASE WHEN OLD.lease_owner IS NULL THEN 'claimed' ELSE 'taken_over' END,
            NEW.lease_owner, NEW.status,
            CASE WHEN OLD.lease_owner IS NULL THEN NULL ELSE 'from ' || OLD.lease_owner END);
        DELETE FROM task_events WHERE task_id = NEW.id AND seq <= next_seq - 500;
        RETURN NULL;
    END IF;
    -- One row per other write: a step's end, named by its outcome (a
    -- question asked, completed, failed, cancelled, or `step_ended` when it
    -- works on; its status and message say more), a step that failed and
    -- will be retried (`step_failed`), else what changed.
    kind := CASE
        WHEN NEW.steps <> OLD.steps THEN CASE NEW.status
            WHEN 'input_required' THEN 'question_asked'
            WHEN 'working' THEN 'step_ended'
            ELSE NEW.status END
        WHEN NEW.failures > OLD.failures THEN 'step_failed'
        WHEN NEW.cancel_requested AND NOT OLD.cancel_requested THEN 'cancel_requested'
        WHEN NEW.input_responses <> OLD.input_responses THEN 'answered'
        WHEN NEW.status <> OLD.status THEN NEW.status
        WHEN NEW.lease_owner IS NULL AND OLD.lease_owner IS NOT NULL THEN 'released'
    END;
    IF kind IS NOT NULL THEN
        SELECT COALESCE(MAX(seq), 0) + 1 INTO next_seq FROM task_events WHERE task_id = NEW.id;
        INSERT INTO task_events VALUES (NEW.id, next_seq, now_ms, kind,
            COALESCE(OLD.lease_owner, NEW.lease_owner), NEW.status,
            left(NEW.status_message, 1000));
        DELETE FROM task_events WHERE task_id = NEW.id AND seq <= next_seq - 500;
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER task_events_record AFTER INSERT OR UPDATE OR DELETE ON tasks
    FOR EACH ROW EXECUTE FUNCTION task_events_record();
