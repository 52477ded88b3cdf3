-- +goose Up
-- The fields a provider sent on an assistant message beyond the ones modelled (a JSON object, or
-- empty), kept so history can send them back unchanged (e.g. the reasoning_details some gateways send).
-- Tool calls keep theirs inside the tool_calls JSON.
ALTER TABLE messages ADD COLUMN extra TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE messages DROP COLUMN extra;
