-- +goose Up
-- A conversation is the history of one chat (thread, and user when the scope is per user). A reset
-- starts a new one and keeps the old one, inactive, for the audit trail.
CREATE TABLE conversations (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    platform   TEXT     NOT NULL,
    chat_id    TEXT     NOT NULL,
    thread_id  TEXT     NOT NULL DEFAULT '',
    user_id    TEXT     NOT NULL DEFAULT '',
    active     INTEGER  NOT NULL DEFAULT 1,
    created_at DATETIME NOT NULL
);
CREATE UNIQUE INDEX idx_conversations_active_key
    ON conversations (platform, chat_id, thread_id, user_id) WHERE active = 1;
CREATE INDEX idx_conversations_created ON conversations (created_at);

CREATE TABLE turns (
    id                 INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation_id    INTEGER  NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    user_id            TEXT     NOT NULL DEFAULT '',
    user_name          TEXT     NOT NULL DEFAULT '',
    inbound_message_id TEXT     NOT NULL DEFAULT '',
    model              TEXT     NOT NULL DEFAULT '',
    status             TEXT     NOT NULL,
    rounds             INTEGER  NOT NULL DEFAULT 0,
    tokens_in          INTEGER  NOT NULL DEFAULT 0,
    tokens_out         INTEGER  NOT NULL DEFAULT 0,
    error              TEXT     NOT NULL DEFAULT '',
    started_at         DATETIME NOT NULL,
    finished_at        DATETIME
);
CREATE INDEX idx_turns_conversation ON turns (conversation_id, id);
CREATE INDEX idx_turns_status ON turns (status);
CREATE INDEX idx_turns_started ON turns (started_at);

CREATE TABLE messages (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation_id INTEGER  NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    turn_id         INTEGER  NOT NULL REFERENCES turns (id) ON DELETE CASCADE,
    seq             INTEGER  NOT NULL,
    role            TEXT     NOT NULL,
    content         TEXT     NOT NULL DEFAULT '',
    name            TEXT     NOT NULL DEFAULT '',
    reasoning       TEXT     NOT NULL DEFAULT '',
    tool_calls      TEXT     NOT NULL DEFAULT '',
    tool_call_id    TEXT     NOT NULL DEFAULT '',
    images          INTEGER  NOT NULL DEFAULT 0,
    created_at      DATETIME NOT NULL
);
CREATE UNIQUE INDEX idx_messages_turn_seq ON messages (turn_id, seq);

-- The audit log: one row per tool call, written when the call starts and completed when it ends.
-- turn_id is not a foreign key: a row must never be refused, whatever the turn's fate.
CREATE TABLE tool_calls (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    turn_id         INTEGER  NOT NULL DEFAULT 0,
    conversation_id INTEGER  NOT NULL DEFAULT 0,
    platform        TEXT     NOT NULL DEFAULT '',
    chat_id         TEXT     NOT NULL DEFAULT '',
    user_id         TEXT     NOT NULL DEFAULT '',
    round           INTEGER  NOT NULL DEFAULT 0,
    tool_call_id    TEXT     NOT NULL DEFAULT '',
    tool_name       TEXT     NOT NULL,
    source          TEXT     NOT NULL DEFAULT '',
    server          TEXT     NOT NULL DEFAULT '',
    status          TEXT     NOT NULL,
    arguments       TEXT     NOT NULL DEFAULT '',
    result          TEXT     NOT NULL DEFAULT '',
    error           TEXT     NOT NULL DEFAULT '',
    arguments_size  INTEGER  NOT NULL DEFAULT 0,
    result_size     INTEGER  NOT NULL DEFAULT 0,
    started_at      DATETIME NOT NULL,
    finished_at     DATETIME,
    duration_ms     INTEGER  NOT NULL DEFAULT 0
);
CREATE INDEX idx_tool_calls_started ON tool_calls (started_at, id);
CREATE INDEX idx_tool_calls_tool_status ON tool_calls (tool_name, status, started_at, id);
CREATE INDEX idx_tool_calls_status ON tool_calls (status, started_at, id);
CREATE INDEX idx_tool_calls_chat ON tool_calls (platform, chat_id, started_at, id);
CREATE INDEX idx_tool_calls_user ON tool_calls (user_id, started_at, id);
CREATE INDEX idx_tool_calls_turn ON tool_calls (turn_id);

CREATE TABLE llm_calls (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    turn_id         INTEGER  NOT NULL REFERENCES turns (id) ON DELETE CASCADE,
    seq             INTEGER  NOT NULL,
    round           INTEGER  NOT NULL DEFAULT 0,
    model           TEXT     NOT NULL,
    candidate       INTEGER  NOT NULL DEFAULT 0,
    fallback_reason TEXT     NOT NULL DEFAULT '',
    status          TEXT     NOT NULL,
    ttft_ms         INTEGER  NOT NULL DEFAULT 0,
    duration_ms     INTEGER  NOT NULL DEFAULT 0,
    tokens_in       INTEGER  NOT NULL DEFAULT 0,
    tokens_out      INTEGER  NOT NULL DEFAULT 0,
    error           TEXT     NOT NULL DEFAULT '',
    started_at      DATETIME NOT NULL
);
CREATE INDEX idx_llm_calls_turn ON llm_calls (turn_id, seq);
CREATE INDEX idx_llm_calls_started ON llm_calls (started_at);

-- +goose Down
DROP TABLE llm_calls;
DROP TABLE tool_calls;
DROP TABLE messages;
DROP TABLE turns;
DROP TABLE conversations;
