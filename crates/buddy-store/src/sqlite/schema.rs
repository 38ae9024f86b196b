//! The SQLite store's schema, as the migrations that build it.

/// Schema migrations, applied in order; `PRAGMA user_version` records how many ran.
pub(super) const MIGRATIONS: &[&str] = &[
    r#"
CREATE TABLE conversations (
    id TEXT PRIMARY KEY,
    created_at_ms INTEGER NOT NULL,
    updated_at_ms INTEGER NOT NULL
);
CREATE TABLE messages (
    conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    turn_id TEXT NOT NULL,
    role TEXT NOT NULL,
    body TEXT NOT NULL,
    created_at_ms INTEGER NOT NULL,
    PRIMARY KEY (conversation_id, seq)
);
CREATE TABLE turns (
    id TEXT PRIMARY KEY,
    conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    model TEXT NOT NULL,
    started_at_ms INTEGER NOT NULL,
    finished_at_ms INTEGER,
    stop_reason TEXT,
    stats TEXT,
    error TEXT
);
CREATE INDEX turns_by_conversation ON turns(conversation_id, started_at_ms);
"#,
    r#"
ALTER TABLE conversations ADD COLUMN owner TEXT NOT NULL DEFAULT 'anonymous';
CREATE INDEX conversations_by_owner ON conversations(owner, updated_at_ms);
"#,
    r#"
ALTER TABLE conversations ADD COLUMN title TEXT;
"#,
    r#"
ALTER TABLE turns ADD COLUMN tape TEXT;
"#,
    r#"
CREATE TABLE spend (
    owner TEXT NOT NULL,
    day TEXT NOT NULL,
    nanos INTEGER NOT NULL,
    PRIMARY KEY (owner, day)
);
"#,
    r#"
ALTER TABLE conversations ADD COLUMN settings TEXT;
"#,
    // Each message's token count and the counting it was made by (issue 30): a
    // continued conversation is not counted again.
    r#"
ALTER TABLE messages ADD COLUMN tokens INTEGER;
ALTER TABLE messages ADD COLUMN token_encoding TEXT;
"#,
    // A deleted response whose messages later turns build on is hidden, not removed.
    r#"
ALTER TABLE turns ADD COLUMN hidden INTEGER NOT NULL DEFAULT 0;
"#,
    // A fork records where it came from, so a client can show it as a version of it.
    r#"
ALTER TABLE conversations ADD COLUMN forked_from TEXT;
ALTER TABLE conversations ADD COLUMN fork_before INTEGER;
"#,
    // What running turns hold of their key's spend room (issue 46): settled at the
    // turn's end; one a dead process left lapses at `expires_at_ms`.
    r#"
CREATE TABLE spend_holds (
    id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    nanos INTEGER NOT NULL,
    expires_at_ms INTEGER NOT NULL
);
CREATE INDEX spend_holds_by_owner ON spend_holds(owner);
"#,
    // The tasks tool calls became on their MCP servers (issue 48): a turn after a
    // restart waits on them again instead of answering the calls as interrupted.
    r#"
CREATE TABLE call_tasks (
    conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    call_id TEXT NOT NULL,
    server TEXT NOT NULL,
    task_id TEXT NOT NULL,
    created_at_ms INTEGER NOT NULL,
    PRIMARY KEY (conversation_id, call_id)
);
"#,
    // A client session's conversation (guard mode, issue 54) is found by its id, kept
    // in the settings' metadata.
    r#"
CREATE INDEX conversations_by_session
    ON conversations(owner, json_extract(settings, '$.metadata.buddy_session'));
"#,
    // What a Responses API request said of its turn (issue 58): read back with the
    // response (`previous_response_id`, `background`).
    r#"
ALTER TABLE turns ADD COLUMN response TEXT;
"#,
    // Bytes of message JSON each key's conversations hold (issue 59): the storage quota
    // reads one row instead of summing the key's messages at every turn. Kept by
    // triggers on every write; a conversation's messages go before it does, so each is
    // taken off while its key is still known.
    r#"
CREATE TABLE owner_bytes (
    owner TEXT PRIMARY KEY,
    bytes INTEGER NOT NULL
);
INSERT INTO owner_bytes (owner, bytes)
    SELECT c.owner, SUM(octet_length(m.body)) FROM messages m
    JOIN conversations c ON c.id = m.conversation_id GROUP BY c.owner;
CREATE TRIGGER messages_bytes_in AFTER INSERT ON messages BEGIN
    INSERT INTO owner_bytes (owner, bytes)
        SELECT owner, octet_length(NEW.body) FROM conversations WHERE id = NEW.conversation_id
        ON CONFLICT (owner) DO UPDATE SET bytes = bytes + excluded.bytes;
END;
CREATE TRIGGER messages_bytes_out AFTER DELETE ON messages BEGIN
    UPDATE owner_bytes SET bytes = bytes - octet_length(OLD.body)
        WHERE owner = (SELECT owner FROM conversations WHERE id = OLD.conversation_id);
END;
CREATE TRIGGER conversation_messages_out BEFORE DELETE ON conversations BEGIN
    DELETE FROM messages WHERE conversation_id = OLD.id;
END;
"#,
];
