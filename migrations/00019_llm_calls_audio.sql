-- +goose Up
-- audio_ms: the length of the audio a speech call transcribed (0 for chat model calls), which
-- usage prices per minute (speech price_per_minute).
ALTER TABLE llm_calls ADD COLUMN audio_ms BIGINT NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE llm_calls DROP COLUMN audio_ms;
