-- +goose Up
-- Model calls are written when they start, with the tokens they reserve against the quotas
-- (status running), and completed when they end, so concurrent turns (and replicas) see each
-- other's calls and a call is never lost with its turn's final write. platform, chat_id and
-- user_id name whom a call is counted against (a /compact call has no turn: turn_id NULL);
-- estimated marks tokens the bot estimated because the provider reported none (a stopped, cut
-- or failed stream, or a call still running); instance_id is the replica that made it, for the
-- recovery of a crashed one's calls. SQLite cannot drop NOT NULL in place: the table is rebuilt.
CREATE TABLE llm_calls_new (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    turn_id         INTEGER  REFERENCES turns (id) ON DELETE CASCADE,
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
    started_at      DATETIME NOT NULL,
    platform        TEXT     NOT NULL DEFAULT '',
    chat_id         TEXT     NOT NULL DEFAULT '',
    user_id         TEXT     NOT NULL DEFAULT '',
    estimated       BOOLEAN  NOT NULL DEFAULT FALSE,
    instance_id     TEXT     NOT NULL DEFAULT ''
);
INSERT INTO llm_calls_new (id, turn_id, seq, round, model, candidate, fallback_reason, status, ttft_ms,
        duration_ms, tokens_in, tokens_out, error, started_at, platform, chat_id, user_id)
    SELECT l.id, l.turn_id, l.seq, l.round, l.model, l.candidate, l.fallback_reason, l.status, l.ttft_ms,
        l.duration_ms, l.tokens_in, l.tokens_out, l.error, l.started_at, c.platform, c.chat_id, t.user_id
    FROM llm_calls l JOIN turns t ON t.id = l.turn_id JOIN conversations c ON c.id = t.conversation_id;
DROP TABLE llm_calls;
ALTER TABLE llm_calls_new RENAME TO llm_calls;
CREATE INDEX idx_llm_calls_turn ON llm_calls (turn_id, seq);
CREATE INDEX idx_llm_calls_started ON llm_calls (started_at);
CREATE INDEX idx_llm_calls_user ON llm_calls (platform, user_id, started_at);
CREATE INDEX idx_llm_calls_chat ON llm_calls (platform, chat_id, started_at);
CREATE INDEX idx_llm_calls_running ON llm_calls (status) WHERE status = 'running';

-- +goose Down
DELETE FROM llm_calls WHERE turn_id IS NULL;
UPDATE llm_calls SET status = 'error' WHERE status = 'running';
CREATE TABLE llm_calls_old (
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
INSERT INTO llm_calls_old SELECT id, turn_id, seq, round, model, candidate, fallback_reason, status, ttft_ms,
    duration_ms, tokens_in, tokens_out, error, started_at FROM llm_calls;
DROP TABLE llm_calls;
ALTER TABLE llm_calls_old RENAME TO llm_calls;
CREATE INDEX idx_llm_calls_turn ON llm_calls (turn_id, seq);
CREATE INDEX idx_llm_calls_started ON llm_calls (started_at);
