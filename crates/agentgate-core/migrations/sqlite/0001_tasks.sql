-- Tasks: one row per task, the whole durable state of its job.
CREATE TABLE tasks (
    id               TEXT PRIMARY KEY NOT NULL,
    owner            TEXT NOT NULL,
    tool             TEXT NOT NULL,
    args             TEXT NOT NULL,
    status           TEXT NOT NULL,
    status_message   TEXT,
    job_state        TEXT,
    input_requests   TEXT NOT NULL DEFAULT '{}',
    input_responses  TEXT NOT NULL DEFAULT '{}',
    used_input_keys  TEXT NOT NULL DEFAULT '[]',
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    result           TEXT,
    error            TEXT,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    ttl_ms           INTEGER,
    due_at           INTEGER,
    lease_owner      TEXT,
    lease_until      INTEGER,
    attempt          INTEGER NOT NULL DEFAULT 0,
    steps            INTEGER NOT NULL DEFAULT 0,
    failures         INTEGER NOT NULL DEFAULT 0
) STRICT;

CREATE INDEX tasks_due ON tasks (due_at) WHERE due_at IS NOT NULL;
CREATE INDEX tasks_updated ON tasks (updated_at);

-- Server secrets shared by every instance on this store (MRTR sealing key).
CREATE TABLE secrets (
    name  TEXT PRIMARY KEY NOT NULL,
    value BLOB NOT NULL
) STRICT;
