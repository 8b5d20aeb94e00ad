-- Tasks: one row per task, the whole durable state of its job.
-- Mirrors migrations/sqlite/0001_tasks.sql: timestamps are BIGINT Unix
-- milliseconds (the clock the engine passes in), JSON is JSONB.
CREATE TABLE tasks (
    id               TEXT PRIMARY KEY,
    owner            TEXT NOT NULL,
    tool             TEXT NOT NULL,
    args             JSONB NOT NULL,
    status           TEXT NOT NULL,
    status_message   TEXT,
    job_state        JSONB,
    input_requests   JSONB NOT NULL DEFAULT '{}',
    input_responses  JSONB NOT NULL DEFAULT '{}',
    used_input_keys  JSONB NOT NULL DEFAULT '[]',
    cancel_requested BOOLEAN NOT NULL DEFAULT FALSE,
    result           JSONB,
    error            JSONB,
    created_at       BIGINT NOT NULL,
    updated_at       BIGINT NOT NULL,
    ttl_ms           BIGINT,
    due_at           BIGINT,
    lease_owner      TEXT,
    lease_until      BIGINT,
    attempt          BIGINT NOT NULL DEFAULT 0,
    steps            BIGINT NOT NULL DEFAULT 0,
    failures         BIGINT NOT NULL DEFAULT 0
);

-- `claim` and `next_due`: live tasks by due time (ended tasks have no due_at).
CREATE INDEX tasks_due ON tasks (due_at) WHERE due_at IS NOT NULL;
-- `sweep`: ended tasks past the retention window.
CREATE INDEX tasks_updated ON tasks (updated_at);
-- `release_all`: the leases one worker holds.
CREATE INDEX tasks_lease_owner ON tasks (lease_owner) WHERE lease_owner IS NOT NULL;

-- Server secrets shared by every instance on this store (MRTR sealing key).
CREATE TABLE secrets (
    name  TEXT PRIMARY KEY,
    value BYTEA NOT NULL
);
