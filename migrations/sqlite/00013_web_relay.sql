-- +goose Up
-- The web chat's relay between replicas (PostgreSQL's 00013) exists only where several replicas
-- share a database; a single process on SQLite streams to its own pages. This version is kept
-- so both dialects count the same.
SELECT 1;

-- +goose Down
SELECT 1;
