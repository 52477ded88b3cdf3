-- +goose Up
-- The digest of the configuration each replica runs with (config.Config.Digest), written at
-- its start, after each reload and with each heartbeat: the Replicas page shows which replicas
-- run which configuration after a reload was announced to them (decision 054).
ALTER TABLE instances ADD COLUMN config_digest TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE instances DROP COLUMN config_digest;
