-- +goose Up
-- SQLite serves one process (the file lock refuses a second), whose conversations are ordered in
-- its memory; the table is here so both dialects share one schema.
-- One turn at a time per conversation across the replicas of a deployment: every message waiting
-- for its conversation's turn, on any replica, has a row; the one whose row is `running` holds
-- the conversation. Rows of replicas whose lease expired are ignored, then purged.
CREATE TABLE turn_queue (
    seq         INTEGER  PRIMARY KEY AUTOINCREMENT,
    conv_key    TEXT     NOT NULL,
    instance_id TEXT     NOT NULL,
    user_id     TEXT     NOT NULL DEFAULT '',
    message_id  TEXT     NOT NULL DEFAULT '',
    message_num INTEGER  NOT NULL DEFAULT 0,
    sent_at     DATETIME NOT NULL,
    state       TEXT     NOT NULL DEFAULT 'queued',
    entered_at  DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP
);
CREATE INDEX idx_turn_queue_key ON turn_queue (conv_key, state);
CREATE INDEX idx_turn_queue_instance ON turn_queue (instance_id);

-- +goose Down
DROP TABLE turn_queue;
