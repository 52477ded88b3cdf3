-- +goose Up
-- Each vector's code (package retrieval, decision 059): two bits a number (above a threshold,
-- below minus it, near zero), sixteen times smaller than the float32s. A vector search reads the
-- codes of one owner in one space, then compares the vectors of the best few hundred exactly.
-- The table is clustered by (collection, owner, space), without rowid, and repeats the doc's
-- item and scope: an owner's codes lie side by side, read in one range scan with no lookup per
-- row. The codes of vectors stored before this version are written by the bot when it opens the
-- index.
CREATE TABLE retrieval_codes (
    collection TEXT    NOT NULL,
    owner      TEXT    NOT NULL,
    model      TEXT    NOT NULL,
    dims       INTEGER NOT NULL,
    doc_id     INTEGER NOT NULL REFERENCES retrieval_docs (id) ON DELETE CASCADE,
    item_id    INTEGER NOT NULL,
    scope      TEXT    NOT NULL,
    code       BLOB    NOT NULL,
    PRIMARY KEY (collection, owner, model, dims, doc_id)
) WITHOUT ROWID;
CREATE INDEX idx_retrieval_codes_doc ON retrieval_codes (doc_id);

-- +goose Down
DROP TABLE retrieval_codes;
