-- +goose Up
-- The web chat's browsers: the SHA-256 of a browser's session cookie (never the cookie itself)
-- and the chat id its conversations are kept under, so the chat survives a restart.
CREATE TABLE web_sessions (
    secret_hash TEXT NOT NULL PRIMARY KEY,
    chat_id     TEXT NOT NULL
);

-- +goose Down
DROP TABLE web_sessions;
