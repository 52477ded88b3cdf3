-- +goose Up
-- Per-chat budgets across replicas and the messages of replies in flight (PostgreSQL's 00012)
-- exist only where several replicas share a database; a single process on SQLite keeps its
-- chats' budgets in memory. This version is kept so both dialects count the same.
SELECT 1;

-- +goose Down
SELECT 1;
