-- +goose Up
-- Full-text search over what members asked and what the bot answered (the admin's conversations
-- search, decision 053): a GIN index on the tsvector of user and assistant messages' text
-- ('simple' configuration: any language, no stemming). It is an expression index, not a column,
-- so PostgreSQL keeps it in step with every insert, update (memory's forget) and delete
-- (retention, cascades) itself; a search names the same expression and role condition.
CREATE INDEX idx_messages_fts ON messages USING gin (to_tsvector('simple', content))
    WHERE role IN ('user', 'assistant');

-- +goose Down
DROP INDEX idx_messages_fts;
