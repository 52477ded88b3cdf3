-- +goose Up
-- Stops are stored as well as notified (docs/replicas.md, "Fencing"): a /stop, a Stop press or
-- an interrupt by a newer message is a row naming the turn it stops (the turn_queue ticket of the
-- running turn) beside its NOTIFY on relaybot_stop, so a replica whose stop listener was
-- reconnecting when it was sent reads it when it listens again. Rows live a minute.
CREATE TABLE stop_requests (
    id         BIGSERIAL   PRIMARY KEY,
    ticket     BIGINT      NOT NULL,
    conv_key   TEXT        NOT NULL,
    user_id    TEXT        NOT NULL DEFAULT '',
    admin      BOOLEAN     NOT NULL DEFAULT FALSE,
    interrupt  BOOLEAN     NOT NULL DEFAULT FALSE,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX idx_stop_requests_ticket ON stop_requests (ticket);
CREATE INDEX idx_stop_requests_created ON stop_requests (created_at);

-- +goose Down
DROP TABLE stop_requests;
