-- +goose Up
-- The files of a turn, as the admin's conversation page names them (decision 063): those the
-- member sent (images, voice notes, audio, documents) and those the bot sent with its answer
-- (a generated image, a spoken answer, a tool's file). Name, kind, type and size for every one;
-- the bytes only of a picture the bot sent, up to a cap (what members send is not kept, as
-- messages keep an image count and not the image). They go with their turn (retention, a
-- conversation deleted).
CREATE TABLE turn_files (
    turn_id BIGINT  NOT NULL REFERENCES turns (id) ON DELETE CASCADE,
    seq     INTEGER NOT NULL,
    sender  TEXT    NOT NULL,
    kind    TEXT    NOT NULL DEFAULT '',
    name    TEXT    NOT NULL DEFAULT '',
    mime    TEXT    NOT NULL DEFAULT '',
    size    BIGINT  NOT NULL DEFAULT 0,
    data    BYTEA,
    PRIMARY KEY (turn_id, seq)
);

-- +goose Down
DROP TABLE turn_files;
