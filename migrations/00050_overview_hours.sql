-- +goose Up
-- The admin overview's hourly roll-up (decision 063): each whole hour's turns, model calls (by
-- model, priced when read), tool calls by status, 429 waits and reply times (counts per value,
-- to two significant digits) as one JSON object, so a month reads some 720 rows instead of
-- every turn. hour is the hour's start in seconds since 1970. overview_rollup is the one row
-- saying how far the hours are rolled (rolled_until) and when a pass last wrote (rolled_at):
-- passes on several replicas take it in turn, and each rolls the last hours again, where late
-- rows (a turn's end, a settled call) land.
CREATE TABLE overview_hours (
    hour BIGINT PRIMARY KEY,
    sums TEXT   NOT NULL
);
CREATE TABLE overview_rollup (
    id           INTEGER PRIMARY KEY,
    rolled_until BIGINT NOT NULL,
    rolled_at    BIGINT NOT NULL
);
INSERT INTO overview_rollup (id, rolled_until, rolled_at) VALUES (1, 0, 0);

-- +goose Down
DROP TABLE overview_rollup;
DROP TABLE overview_hours;
