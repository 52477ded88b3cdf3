-- +goose Up
-- Each owner's generation in a collection (package retrieval, decision 059): moved by every
-- write that changes the owner's codes, so a replica that keeps an owner's codes in memory reads
-- them again once they changed, on whichever replica.
CREATE TABLE retrieval_owners (
    collection TEXT   NOT NULL,
    owner      TEXT   NOT NULL,
    gen        BIGINT NOT NULL,
    PRIMARY KEY (collection, owner)
);
-- How many texts hold each word: the keyword index's words are prefixed with their owner's key,
-- so a word's count here is one owner's, and a search of a heavy owner leaves out a word most of
-- their texts hold.
CREATE VIRTUAL TABLE retrieval_docs_terms USING fts4aux(retrieval_docs_fts);

-- +goose Down
DROP TABLE retrieval_docs_terms;
DROP TABLE retrieval_owners;
