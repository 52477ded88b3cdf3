-- +goose Up
-- A conversation's own choices and its compacted past:
-- model: the configured model (its name) picked with /model; empty: the configured order.
-- system_prompt: the prompt set with /system by the chat's admins; empty: the configured one.
-- summary: the model's summary of the rounds up to summary_turn_id (compaction); those rounds stay
-- stored whole but are no longer sent to the model.
ALTER TABLE conversations ADD COLUMN model TEXT NOT NULL DEFAULT '';
ALTER TABLE conversations ADD COLUMN system_prompt TEXT NOT NULL DEFAULT '';
ALTER TABLE conversations ADD COLUMN summary TEXT NOT NULL DEFAULT '';
ALTER TABLE conversations ADD COLUMN summary_turn_id BIGINT NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE conversations DROP COLUMN summary_turn_id;
ALTER TABLE conversations DROP COLUMN summary;
ALTER TABLE conversations DROP COLUMN system_prompt;
ALTER TABLE conversations DROP COLUMN model;
