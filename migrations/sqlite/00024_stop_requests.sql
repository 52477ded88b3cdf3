-- +goose Up
-- Stored stops (PostgreSQL's 00024) matter only where several replicas share a database; a
-- single process on SQLite stops its turns in memory. The table is here so both dialects share
-- one schema.
CREATE TABLE stop_requests (
    id         INTEGER  PRIMARY KEY AUTOINCREMENT,
    ticket     INTEGER  NOT NULL,
    conv_key   TEXT     NOT NULL,
    user_id    TEXT     NOT NULL DEFAULT '',
    admin      BOOLEAN  NOT NULL DEFAULT FALSE,
    interrupt  BOOLEAN  NOT NULL DEFAULT FALSE,
    created_at DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP
);
CREATE INDEX idx_stop_requests_ticket ON stop_requests (ticket);
CREATE INDEX idx_stop_requests_created ON stop_requests (created_at);

-- +goose Down
DROP TABLE stop_requests;
