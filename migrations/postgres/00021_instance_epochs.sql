-- +goose Up
-- Fencing tokens (docs/replicas.md): every registration of a replica takes a new epoch from one
-- sequence. A replica renews its lease only for the epoch it holds; a survivor that takes a
-- replica's work over deletes its row under the row's lock, so the replica learns at its next
-- renewal that the work it held under that epoch is no longer its own, and registers again with a
-- new epoch.
CREATE SEQUENCE instance_epochs;
ALTER TABLE instances ADD COLUMN epoch BIGINT NOT NULL DEFAULT nextval('instance_epochs');

-- +goose Down
ALTER TABLE instances DROP COLUMN epoch;
DROP SEQUENCE instance_epochs;
