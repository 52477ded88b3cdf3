-- +goose Up
-- SQLite serves one process (the file lock refuses a second); the table is here so both dialects
-- share one schema.
-- Replicas of `bot serve` on one database: each registers a row and renews its lease (expires_at,
-- on the database's clock) every few seconds. A running turn belongs to the instance that started
-- it; start-up recovery reclaims only the turns of instances whose lease has expired or that left.
CREATE TABLE instances (
    id           TEXT PRIMARY KEY,
    host         TEXT        NOT NULL DEFAULT '',
    pid          INTEGER     NOT NULL DEFAULT 0,
    started_at   DATETIME    NOT NULL,
    heartbeat_at DATETIME    NOT NULL,
    expires_at   DATETIME    NOT NULL
);
ALTER TABLE turns ADD COLUMN instance_id TEXT NOT NULL DEFAULT '';

-- The inbound ledger: every message a platform delivers (a Telegram update id, a Discord message
-- id) is recorded once, whichever replica hears it, so a retry or a second replica never starts
-- a second turn. Old entries are purged once the platform no longer resends them.
CREATE TABLE inbound_ledger (
    platform    TEXT NOT NULL,
    inbound_key TEXT NOT NULL,
    instance_id TEXT NOT NULL DEFAULT '',
    -- The message as the platform sent it, and whether its turn ended: a survivor takes over the
    -- unanswered messages of a replica that died.
    payload     TEXT NOT NULL DEFAULT '',
    done        INTEGER NOT NULL DEFAULT 0,
    taken_at    DATETIME NOT NULL,
    PRIMARY KEY (platform, inbound_key)
);
CREATE INDEX idx_inbound_ledger_taken ON inbound_ledger (taken_at);

-- +goose Down
DROP TABLE inbound_ledger;
ALTER TABLE turns DROP COLUMN instance_id;
DROP TABLE instances;
