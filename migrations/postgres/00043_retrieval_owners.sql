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

-- +goose Down
DROP TABLE retrieval_owners;
