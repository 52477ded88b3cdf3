-- +goose Up
-- extra: the fields a provider sent on an assistant message beyond the ones modelled (a JSON
-- object, or empty), kept so history can send them back unchanged (e.g. the reasoning_details
-- some gateways send). Tool calls keep theirs inside the tool_calls JSON.
-- reasoning_field: the wire field the reasoning arrived in. Only reasoning that came as
-- reasoning_content (DeepSeek-style) goes back upstream; Groq and others reject it. Earlier rows
-- sent their reasoning back on tool-call messages, which this keeps.
ALTER TABLE messages ADD COLUMN extra TEXT NOT NULL DEFAULT '';
ALTER TABLE messages ADD COLUMN reasoning_field TEXT NOT NULL DEFAULT '';
UPDATE messages SET reasoning_field = 'reasoning_content' WHERE reasoning <> '' AND tool_calls <> '';

-- +goose Down
ALTER TABLE messages DROP COLUMN reasoning_field;
ALTER TABLE messages DROP COLUMN extra;
