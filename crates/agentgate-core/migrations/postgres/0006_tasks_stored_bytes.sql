-- The per-principal storage quota (`limits.max_stored_tasks`,
-- `limits.max_stored_bytes`; `stored_usage`): how many bytes of JSON text a
-- task's row holds (arguments, status message, state, input requests and
-- answers, result, error), kept in an index with the owner, so summing an
-- owner's usage is an index-only scan.
--
-- Kept up to date by a trigger, so no write can forget it. It runs on
-- INSERT and on an UPDATE that sets one of the JSON columns (a step's
-- checkpoint, answers, expiry), not on claims, heartbeats or releases.
-- `args` never changes after the INSERT: its size is kept in `args_bytes`,
-- so a checkpoint measures only the values it writes (which it has in
-- memory), never the arguments (possibly big and TOASTed). Both columns
-- are NOT NULL with a constant default: adding them rewrites nothing.
ALTER TABLE tasks ADD COLUMN args_bytes BIGINT NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN stored_bytes BIGINT NOT NULL DEFAULT 0;

CREATE FUNCTION tasks_stored_bytes() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        NEW.args_bytes := octet_length(NEW.args::text);
    END IF;
    NEW.stored_bytes := NEW.args_bytes
        + COALESCE(octet_length(NEW.status_message), 0)
        + COALESCE(octet_length(NEW.job_state::text), 0)
        + octet_length(NEW.input_requests::text)
        + octet_length(NEW.input_responses::text)
        + octet_length(NEW.used_input_keys::text)
        + COALESCE(octet_length(NEW.result::text), 0)
        + COALESCE(octet_length(NEW.error::text), 0);
    RETURN NEW;
END
$$;

-- Tasks stored before this migration, in one pass over the table.
UPDATE tasks SET args_bytes = octet_length(args::text), stored_bytes = octet_length(args::text)
    + COALESCE(octet_length(status_message), 0)
    + COALESCE(octet_length(job_state::text), 0)
    + octet_length(input_requests::text)
    + octet_length(input_responses::text)
    + octet_length(used_input_keys::text)
    + COALESCE(octet_length(result::text), 0)
    + COALESCE(octet_length(error::text), 0);

CREATE TRIGGER tasks_stored_bytes
    BEFORE INSERT OR UPDATE OF status_message, job_state, input_requests, input_responses,
        used_input_keys, result, error
    ON tasks FOR EACH ROW EXECUTE FUNCTION tasks_stored_bytes();

-- `stored_usage` walks an owner's entries (at most the task quota of them);
-- `oldest_ended` finds the owner's ended task the sweeper deletes first.
CREATE INDEX tasks_owner_stored ON tasks (owner, status, updated_at) INCLUDE (stored_bytes);
