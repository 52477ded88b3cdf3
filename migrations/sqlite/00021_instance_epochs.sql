-- +goose Up
-- Fencing tokens (PostgreSQL's 00021) matter only where several replicas share a database; a
-- single process on SQLite holds its file alone. This version is kept so both dialects count the
-- same.
SELECT 1;
