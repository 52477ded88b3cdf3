-- +goose Up
-- Traces and the turn timeline: the OpenTelemetry trace id of each turn and tool call (empty when
-- tracing is off), and each turn's deliveries (its reply's platform requests: sends, edits,
-- drafts, 429 waits, with their times) as one JSON list written when the turn ends.
ALTER TABLE turns ADD COLUMN trace_id TEXT NOT NULL DEFAULT '';
ALTER TABLE turns ADD COLUMN deliveries TEXT NOT NULL DEFAULT '';
ALTER TABLE tool_calls ADD COLUMN trace_id TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE tool_calls DROP COLUMN trace_id;
ALTER TABLE turns DROP COLUMN deliveries;
ALTER TABLE turns DROP COLUMN trace_id;
