//! The schema of the PostgreSQL store.

/// The schema; every statement is idempotent, and instances starting together take
/// turns (an advisory lock) to apply it.
pub(super) const SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS buddy_conversations (
    id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    created_at_ms BIGINT NOT NULL,
    updated_at_ms BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS buddy_conversations_by_owner ON buddy_conversations(owner, updated_at_ms);
ALTER TABLE buddy_conversations ADD COLUMN IF NOT EXISTS title TEXT;
ALTER TABLE buddy_conversations ADD COLUMN IF NOT EXISTS settings TEXT;
-- A fork records where it came from, so a client can show it as a version of it.
ALTER TABLE buddy_conversations ADD COLUMN IF NOT EXISTS forked_from TEXT;
ALTER TABLE buddy_conversations ADD COLUMN IF NOT EXISTS fork_before BIGINT;
-- A client session's conversation (guard mode) is found by its id, kept in the
-- settings' metadata.
CREATE INDEX IF NOT EXISTS buddy_conversations_by_session
    ON buddy_conversations(owner, ((settings::jsonb -> 'metadata') ->> 'buddy_session'));
-- The conversation's last message number: an append takes its numbers from this row
-- (which it locks), so a round goes in as one statement. Filled in for older databases.
ALTER TABLE buddy_conversations ADD COLUMN IF NOT EXISTS last_seq BIGINT;
CREATE TABLE IF NOT EXISTS buddy_messages (
    conversation_id TEXT NOT NULL REFERENCES buddy_conversations(id) ON DELETE CASCADE,
    seq BIGINT NOT NULL,
    turn_id TEXT NOT NULL,
    role TEXT NOT NULL,
    body TEXT NOT NULL,
    created_at_ms BIGINT NOT NULL,
    PRIMARY KEY (conversation_id, seq)
);
-- Each message's token count and the counting it was made by: a continued
-- conversation is not counted again.
ALTER TABLE buddy_messages ADD COLUMN IF NOT EXISTS tokens BIGINT;
ALTER TABLE buddy_messages ADD COLUMN IF NOT EXISTS token_encoding TEXT;
UPDATE buddy_conversations c
    SET last_seq = (SELECT COALESCE(MAX(seq), 0) FROM buddy_messages m WHERE m.conversation_id = c.id)
    WHERE last_seq IS NULL;
ALTER TABLE buddy_conversations ALTER COLUMN last_seq SET DEFAULT 0;
ALTER TABLE buddy_conversations ALTER COLUMN last_seq SET NOT NULL;
CREATE TABLE IF NOT EXISTS buddy_turns (
    id TEXT PRIMARY KEY,
    conversation_id TEXT NOT NULL REFERENCES buddy_conversations(id) ON DELETE CASCADE,
    model TEXT NOT NULL,
    instance TEXT NOT NULL,
    started_at_ms BIGINT NOT NULL,
    finished_at_ms BIGINT,
    stop_reason TEXT,
    stats TEXT,
    error TEXT
);
CREATE INDEX IF NOT EXISTS buddy_turns_by_conversation ON buddy_turns(conversation_id, started_at_ms);
ALTER TABLE buddy_turns ADD COLUMN IF NOT EXISTS tape TEXT;
ALTER TABLE buddy_turns ADD COLUMN IF NOT EXISTS hidden BOOLEAN NOT NULL DEFAULT false;
ALTER TABLE buddy_turns ADD COLUMN IF NOT EXISTS response TEXT;
CREATE TABLE IF NOT EXISTS buddy_instances (
    id TEXT PRIMARY KEY,
    last_seen_ms BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS buddy_running_turns (
    turn_id TEXT PRIMARY KEY,
    conversation_id TEXT UNIQUE,
    owner TEXT NOT NULL,
    instance TEXT NOT NULL,
    started_at_ms BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS buddy_owner_turns (
    owner TEXT PRIMARY KEY,
    running BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS buddy_turn_logs (
    log_id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    started_at_ms BIGINT NOT NULL,
    ended_at_ms BIGINT
);
CREATE TABLE IF NOT EXISTS buddy_turn_events (
    log_id TEXT NOT NULL,
    seq BIGINT NOT NULL,
    name TEXT NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (log_id, seq)
);
CREATE TABLE IF NOT EXISTS buddy_spend (
    owner TEXT NOT NULL,
    day TEXT NOT NULL,
    nanos BIGINT NOT NULL,
    PRIMARY KEY (owner, day)
);
CREATE TABLE IF NOT EXISTS buddy_spend_holds (
    id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    nanos BIGINT NOT NULL,
    expires_at_ms BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS buddy_spend_holds_by_owner ON buddy_spend_holds(owner);
-- The instance whose turn holds it: a hold lives as long as its instance's heartbeat.
ALTER TABLE buddy_spend_holds ADD COLUMN IF NOT EXISTS instance TEXT;
-- The tasks tool calls became on their MCP servers: a turn after a restart waits on
-- them again instead of answering the calls as interrupted.
CREATE TABLE IF NOT EXISTS buddy_call_tasks (
    conversation_id TEXT NOT NULL REFERENCES buddy_conversations(id) ON DELETE CASCADE,
    call_id TEXT NOT NULL,
    server TEXT NOT NULL,
    task_id TEXT NOT NULL,
    created_at_ms BIGINT NOT NULL,
    PRIMARY KEY (conversation_id, call_id)
);
-- Answers a person posted through another instance than the one running the turn; the
-- running instance takes them and writes its verdict, which the posting one reads.
CREATE TABLE IF NOT EXISTS buddy_turn_answers (
    seq BIGSERIAL PRIMARY KEY,
    turn_id TEXT NOT NULL,
    question TEXT NOT NULL,
    answer TEXT NOT NULL,
    verdict TEXT,
    detail TEXT,
    posted_at_ms BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS buddy_turn_answers_waiting ON buddy_turn_answers(turn_id) WHERE verdict IS NULL;
-- Cancels asked through any instance (a table of its own: an ALTER of the running turns,
-- hot with claims, would lock them at every instance's start).
CREATE TABLE IF NOT EXISTS buddy_turn_cancels (
    turn_id TEXT PRIMARY KEY,
    asked_at_ms BIGINT NOT NULL
);
-- A key's spend hold in one round trip (`hold_room`): under the key's advisory lock, the
-- holds that lapsed or whose instance stopped go, and the room left under each ceiling
-- (`days`/`limits`: each ceiling's first day and amount, nanodollars) less what is
-- held and spent is added to hold `id` when it is at least `least`; the amount back (0:
-- none). A function, so that each statement in it reads what committed before the lock
-- was taken (one statement alone would read from before).
CREATE OR REPLACE FUNCTION buddy_hold_room(
    p_owner TEXT, p_id TEXT, p_wanted BIGINT, p_days TEXT[], p_limits BIGINT[],
    p_now BIGINT, p_alive_after BIGINT, p_expires BIGINT, p_instance TEXT, p_least BIGINT
) RETURNS BIGINT LANGUAGE plpgsql AS $fn$
DECLARE
    held NUMERIC;
    spent NUMERIC;
    room NUMERIC := COALESCE(p_wanted, 9223372036854775807);
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended(p_owner, 46));
    DELETE FROM buddy_spend_holds WHERE owner = p_owner AND (expires_at_ms <= p_now
        OR (instance IS NOT NULL AND instance NOT IN (SELECT id FROM buddy_instances WHERE last_seen_ms > p_alive_after)));
    SELECT COALESCE(SUM(nanos), 0) INTO held FROM buddy_spend_holds WHERE owner = p_owner;
    FOR i IN 1 .. COALESCE(array_length(p_days, 1), 0) LOOP
        SELECT COALESCE(SUM(nanos), 0) INTO spent FROM buddy_spend WHERE owner = p_owner AND day >= p_days[i];
        room := LEAST(room, GREATEST(p_limits[i] - spent - held, 0));
    END LOOP;
    room := LEAST(room, 9223372036854775807);
    IF room < GREATEST(p_least, 1) THEN
        RETURN 0;
    END IF;
    INSERT INTO buddy_spend_holds (id, owner, nanos, expires_at_ms, instance)
        VALUES (p_id, p_owner, room::BIGINT, p_expires, p_instance)
        ON CONFLICT (id) DO UPDATE SET nanos = buddy_spend_holds.nanos + excluded.nanos;
    RETURN room::BIGINT;
END
$fn$;
-- Bytes of message JSON each key's conversations hold, in the key's row (which a
-- turn's opening and end update anyway): the storage quota reads one row, not the key's
-- messages. A running turn's writes wait in its conversation's `pending` and count when
-- it ends. Counted from the messages once, when the column is made (under the schema's
-- lock).
ALTER TABLE buddy_conversations ADD COLUMN IF NOT EXISTS pending BIGINT NOT NULL DEFAULT 0;
DO $$
BEGIN
    IF NOT EXISTS (
        SELECT 1 FROM information_schema.columns
        WHERE table_schema = current_schema() AND table_name = 'buddy_owner_turns' AND column_name = 'bytes'
    ) THEN
        ALTER TABLE buddy_owner_turns ADD COLUMN bytes BIGINT NOT NULL DEFAULT 0;
        INSERT INTO buddy_owner_turns (owner, running, bytes)
            SELECT c.owner, 0, SUM(octet_length(m.body)) FROM buddy_messages m
            JOIN buddy_conversations c ON c.id = m.conversation_id GROUP BY c.owner
            ON CONFLICT (owner) DO UPDATE SET bytes = EXCLUDED.bytes;
    END IF;
END $$;
"#;
