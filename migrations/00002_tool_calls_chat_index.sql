-- +goose Up
-- Audit queries filter by chat id alone more often than by platform and chat: index the chat id
-- first so that `bot audit --chat ID` is an index search too.
DROP INDEX idx_tool_calls_chat;
CREATE INDEX idx_tool_calls_chat ON tool_calls (chat_id, started_at, id);

-- +goose Down
DROP INDEX idx_tool_calls_chat;
CREATE INDEX idx_tool_calls_chat ON tool_calls (platform, chat_id, started_at, id);
