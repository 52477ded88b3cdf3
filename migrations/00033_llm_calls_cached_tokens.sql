-- +goose Up
-- The part of a model call's prompt tokens the provider served from its prompt cache, and the
-- part it wrote to the cache (providers that bill cache writes): both are inside tokens_in and
-- priced apart (price_cached_in, price_cache_write).
ALTER TABLE llm_calls ADD COLUMN cached_in INTEGER NOT NULL DEFAULT 0;
ALTER TABLE llm_calls ADD COLUMN cache_write_in INTEGER NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE llm_calls DROP COLUMN cache_write_in;
ALTER TABLE llm_calls DROP COLUMN cached_in;
