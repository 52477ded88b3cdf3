-- +goose Up
-- Knowledge bases (package pipeline/knowledge): the documents an admin added to a base, with
-- what was read of them (format, pages, bytes, chunks), who added them and when, and the state of
-- their import (importing with progress, ready, failed with why). Their chunks' words and
-- vectors are the retrieval layer's "knowledge" collection (owner: the base); where each chunk
-- stands in its document is knowledge_chunks (00035).
CREATE TABLE knowledge_documents (
    id             BIGSERIAL PRIMARY KEY,
    base           TEXT    NOT NULL,
    name           TEXT    NOT NULL,
    format         TEXT    NOT NULL,
    pages          BIGINT NOT NULL DEFAULT 0,
    bytes          BIGINT NOT NULL DEFAULT 0,
    chunks         BIGINT NOT NULL DEFAULT 0,
    added_by       TEXT    NOT NULL DEFAULT '',
    added_at       TIMESTAMPTZ NOT NULL,
    state          TEXT    NOT NULL,
    progress_done  BIGINT NOT NULL DEFAULT 0,
    progress_total BIGINT NOT NULL DEFAULT 0,
    error          TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX idx_knowledge_documents_base ON knowledge_documents (base, id);

-- +goose Down
DROP TABLE knowledge_documents;
