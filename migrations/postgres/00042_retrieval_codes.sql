-- +goose Up
-- Each vector's code (package retrieval, decision 059): two bits a number (above a threshold,
-- below minus it, near zero), sixteen times smaller than the float32s. A vector search reads the
-- codes of one owner in one space through the primary key, then compares the vectors of the best
-- few hundred exactly (pgvector's distance where the server has it). The row repeats the doc's
-- item and scope, so no doc is read per code. The codes of vectors stored before this version
-- are written by the bot when it opens the index.
CREATE TABLE retrieval_codes (
    collection TEXT    NOT NULL,
    owner      TEXT    NOT NULL,
    model      TEXT    NOT NULL,
    dims       INTEGER NOT NULL,
    doc_id     BIGINT  NOT NULL REFERENCES retrieval_docs (id) ON DELETE CASCADE,
    item_id    BIGINT  NOT NULL,
    scope      TEXT    NOT NULL,
    code       BYTEA   NOT NULL,
    PRIMARY KEY (collection, owner, model, dims, doc_id)
);
CREATE INDEX idx_retrieval_codes_doc ON retrieval_codes (doc_id);

-- +goose Down
DROP TABLE retrieval_codes;
