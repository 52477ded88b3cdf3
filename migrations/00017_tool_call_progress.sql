-- +goose Up
-- Tool rounds you can watch and steer: the last progress message a call reported while it ran,
-- and the questions its tool asked the user (MCP elicitation) with their answers (redacted) and
-- who gave them, as a JSON array.
ALTER TABLE tool_calls ADD COLUMN progress TEXT NOT NULL DEFAULT '';
ALTER TABLE tool_calls ADD COLUMN elicitation TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE tool_calls DROP COLUMN elicitation;
ALTER TABLE tool_calls DROP COLUMN progress;
