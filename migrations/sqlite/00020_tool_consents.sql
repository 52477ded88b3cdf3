-- +goose Up
-- "Always allow" answers of approval questions, so that every replica honours them and they
-- survive a restart: one chat, one person (user_id; '' for everyone in the chat, which only an
-- approver who answers for others gives), one tool on one MCP server (server '' for the other
-- sources), under the policy rule that asked. A row past expires_at is not honoured; revoking
-- deletes it (the audit log keeps every decision).
CREATE TABLE tool_consents (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    platform    TEXT NOT NULL,
    chat_id     TEXT NOT NULL,
    user_id     TEXT NOT NULL DEFAULT '',
    tool        TEXT NOT NULL,
    server      TEXT NOT NULL DEFAULT '',
    rule        TEXT NOT NULL DEFAULT '',
    given_by    TEXT NOT NULL DEFAULT '',
    given_by_id TEXT NOT NULL DEFAULT '',
    created_at  DATETIME NOT NULL,
    expires_at  DATETIME NOT NULL
);
CREATE INDEX idx_tool_consents_chat ON tool_consents (platform, chat_id, tool, expires_at);

-- The approver's platform id beside the display name (approver), which anyone can change.
ALTER TABLE tool_calls ADD COLUMN approver_id TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE tool_calls DROP COLUMN approver_id;
DROP INDEX idx_tool_consents_chat;
DROP TABLE tool_consents;
