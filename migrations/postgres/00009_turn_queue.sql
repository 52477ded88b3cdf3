-- +goose Up
-- One turn at a time per conversation across the replicas of a deployment: every message waiting
-- for its conversation's turn, on any replica, has a row; the one whose row is `running` holds
-- the conversation. A replica lets its earliest message of a conversation contend (`waiting`);
-- the earliest waiting row (by the time the message was sent, then its platform id) runs when no
-- live replica runs one. Rows of replicas whose lease expired are ignored, then purged.
CREATE TABLE turn_queue (
    seq         BIGSERIAL PRIMARY KEY,
    conv_key    TEXT        NOT NULL,
    instance_id TEXT        NOT NULL,
    user_id     TEXT        NOT NULL DEFAULT '',
    message_id  TEXT        NOT NULL DEFAULT '',
    -- message_id as a number when it is one (Telegram, Discord), for ordering.
    message_num BIGINT      NOT NULL DEFAULT 0,
    sent_at     TIMESTAMPTZ NOT NULL,
    -- queued: waits on its replica; waiting: contends for the conversation; running: holds it.
    state       TEXT        NOT NULL DEFAULT 'queued',
    entered_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX idx_turn_queue_key ON turn_queue (conv_key, state);
CREATE INDEX idx_turn_queue_instance ON turn_queue (instance_id);

-- +goose Down
DROP TABLE turn_queue;
