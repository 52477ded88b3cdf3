-- +goose Up
-- Tool policies: a call a policy asks about records whether approval was required, how it was
-- decided (approved | always | denied | timeout | cancelled), by whom and when. server_tool keeps
-- an MCP server's own name of a tool that its tool_prefix renamed for the model.
ALTER TABLE tool_calls ADD COLUMN approval_required BOOLEAN NOT NULL DEFAULT false;
ALTER TABLE tool_calls ADD COLUMN decision TEXT NOT NULL DEFAULT '';
ALTER TABLE tool_calls ADD COLUMN approver TEXT NOT NULL DEFAULT '';
ALTER TABLE tool_calls ADD COLUMN decided_at TIMESTAMPTZ;
ALTER TABLE tool_calls ADD COLUMN server_tool TEXT NOT NULL DEFAULT '';
CREATE INDEX idx_tool_calls_decision ON tool_calls (decision, started_at, id);

-- +goose Down
DROP INDEX idx_tool_calls_decision;
ALTER TABLE tool_calls DROP COLUMN server_tool;
ALTER TABLE tool_calls DROP COLUMN decided_at;
ALTER TABLE tool_calls DROP COLUMN approver;
ALTER TABLE tool_calls DROP COLUMN decision;
ALTER TABLE tool_calls DROP COLUMN approval_required;
