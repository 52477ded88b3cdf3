-- +goose Up
-- The retrieval layer (package retrieval): texts of every collection (memory's facts, knowledge
-- bases' chunks), each owned by one owner (a person, a base) within a scope, a keyword index over
-- them (FTS4: mattn/go-sqlite3 compiles it in without build tags; FTS5 would need one), and their
-- vectors, each stored with the model and dimension that made it (little-endian float32s,
-- compared in Go: decision 047). owner_key is a token standing for (collection, owner), so a
-- keyword search reads only its owner's postings.
CREATE TABLE retrieval_docs (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    collection TEXT    NOT NULL,
    item_id    INTEGER NOT NULL,
    owner      TEXT    NOT NULL,
    scope      TEXT    NOT NULL DEFAULT '',
    body       TEXT    NOT NULL,
    UNIQUE (collection, item_id)
);
CREATE INDEX idx_retrieval_docs_owner ON retrieval_docs (collection, owner, scope);
CREATE VIRTUAL TABLE retrieval_docs_fts USING fts4(owner_key, body, tokenize=unicode61);
CREATE TABLE retrieval_vectors (
    doc_id    INTEGER NOT NULL REFERENCES retrieval_docs (id) ON DELETE CASCADE,
    model     TEXT    NOT NULL,
    dims      INTEGER NOT NULL,
    embedding BLOB    NOT NULL,
    PRIMARY KEY (doc_id, model, dims)
);
CREATE INDEX idx_retrieval_vectors_space ON retrieval_vectors (model, dims);

-- +goose Down
DROP TABLE retrieval_vectors;
DROP TABLE retrieval_docs_fts;
DROP TABLE retrieval_docs;
