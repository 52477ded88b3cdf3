-- +goose Up
-- What the web chat showed, message by message, so that a page shows the same transcript after
-- a restart: the user's message as shown (what they typed and their attachments' names, never
-- what the bot added for the model), the bot's messages as last rendered in Markdown (folded
-- reasoning, tool lines, questions with their answers, stopped markers, failure lines), and the
-- files the bot sent (JSON: name, type and bytes, the bytes left out above a cap). pos orders a
-- chat's messages: microseconds since 1970 when the message appeared, made to grow within a
-- chat, so it also dates the row for retention. state is 'question' for a question the bot
-- asked (shown as plain text), 'asking' while it waits for its answer.
CREATE TABLE web_messages (
    chat_id TEXT   NOT NULL,
    id      TEXT   NOT NULL,
    pos     BIGINT NOT NULL,
    role    TEXT   NOT NULL,
    text    TEXT   NOT NULL DEFAULT '',
    state   TEXT   NOT NULL DEFAULT '',
    files   TEXT   NOT NULL DEFAULT '',
    PRIMARY KEY (chat_id, id)
);
CREATE INDEX idx_web_messages_chat_pos ON web_messages (chat_id, pos);
CREATE INDEX idx_web_messages_pos ON web_messages (pos);

-- +goose Down
DROP TABLE web_messages;
