-- +goose Up
-- The retrieval layer (package retrieval): texts of every collection (memory's facts, knowledge
-- bases' chunks), each owned by one owner (a person, a base) within a scope, a tsvector keyword
-- index over them, and their vectors, each stored with the model and dimension that made it.
-- With pgvector available the vectors are pgvector's type (created in schema public, so dropping
-- a schema never drops the extension) and each space gets an HNSW index when first used; without
-- it they are little-endian float32s compared in Go (decision 047).
CREATE TABLE retrieval_docs (
    id         BIGSERIAL PRIMARY KEY,
    collection TEXT      NOT NULL,
    item_id    BIGINT    NOT NULL,
    owner      TEXT      NOT NULL,
    scope      TEXT      NOT NULL DEFAULT '',
    body       TEXT      NOT NULL,
    body_tsv   tsvector  GENERATED ALWAYS AS (to_tsvector('simple', body)) STORED,
    UNIQUE (collection, item_id)
);
CREATE INDEX idx_retrieval_docs_owner ON retrieval_docs (collection, owner, scope);
CREATE INDEX idx_retrieval_docs_tsv ON retrieval_docs USING gin (body_tsv);
CREATE TABLE retrieval_vectors (
    doc_id    BIGINT  NOT NULL REFERENCES retrieval_docs (id) ON DELETE CASCADE,
    model     TEXT    NOT NULL,
    dims      INTEGER NOT NULL,
    embedding BYTEA   NOT NULL,
    PRIMARY KEY (doc_id, model, dims)
);
CREATE INDEX idx_retrieval_vectors_space ON retrieval_vectors (model, dims);
-- +goose StatementBegin
DO $$
DECLARE
    vec_schema TEXT;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector') THEN
        RETURN;
    END IF;
    BEGIN
        CREATE EXTENSION IF NOT EXISTS vector SCHEMA public;
    EXCEPTION WHEN OTHERS THEN
        -- No right to create it (or another migration created it meanwhile): use it if it is
        -- there, else keep the float32s.
        RAISE NOTICE 'pgvector: %', SQLERRM;
    END;
    SELECT n.nspname INTO vec_schema FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
    WHERE e.extname = 'vector';
    IF vec_schema IS NULL THEN
        RETURN;
    END IF;
    EXECUTE format('ALTER TABLE retrieval_vectors ALTER COLUMN embedding TYPE %I.vector USING NULL', vec_schema);
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP TABLE retrieval_vectors;
DROP TABLE retrieval_docs;
