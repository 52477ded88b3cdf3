-- +goose Up
-- The chat whose chat quota a model call counts against: the parent channel of a Discord thread
-- or forum post (whose own chat id is the thread's), else the call's chat itself.
ALTER TABLE llm_calls ADD COLUMN quota_chat_id TEXT NOT NULL DEFAULT '';
UPDATE llm_calls SET quota_chat_id = chat_id;
CREATE INDEX llm_calls_quota_chat ON llm_calls (platform, quota_chat_id, started_at);

-- +goose Down
DROP INDEX llm_calls_quota_chat;
ALTER TABLE llm_calls DROP COLUMN quota_chat_id;
