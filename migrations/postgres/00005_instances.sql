-- +goose Up
-- Replicas of `bot serve` on one database: each registers a row and renews its lease (expires_at,
-- on the database's clock) every few seconds. A running turn belongs to the instance that started
-- it; start-up recovery reclaims only the turns of instances whose lease has expired or that left.
CREATE TABLE instances (
    id           TEXT PRIMARY KEY,
    host         TEXT        NOT NULL DEFAULT '',
    pid          INTEGER     NOT NULL DEFAULT 0,
    started_at   TIMESTAMPTZ NOT NULL,
    heartbeat_at TIMESTAMPTZ NOT NULL,
    expires_at   TIMESTAMPTZ NOT NULL
);
ALTER TABLE turns ADD COLUMN instance_id TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE turns DROP COLUMN instance_id;
DROP TABLE instances;
