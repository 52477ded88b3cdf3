-- +goose Up
-- Buttons on any replica (coord.Questions). questions holds each question with buttons a turn
-- posted (an approval, a tool's question): the replica and the epoch whose turn asked, its chat
-- and message, and whether it is open, answered or closed unanswered. question_presses carries a
-- press another replica received to the replica that asked, and its verdict back: pending until
-- the asker takes it (deciding), then accepted, refused or closed; expired when the receiver
-- stopped waiting first. A reply prompt (a tool's question answered by typing, kind 'prompt')
-- is a question without buttons: a message landing on another replica in its chat is carried to
-- it as a press whose answer is the message. Rows that are over are purged after an hour.
CREATE TABLE questions (
    id          TEXT        PRIMARY KEY,
    kind        TEXT        NOT NULL DEFAULT 'buttons',
    instance_id TEXT        NOT NULL,
    epoch       BIGINT      NOT NULL,
    bot         TEXT        NOT NULL,
    platform    TEXT        NOT NULL,
    chat_id     TEXT        NOT NULL,
    thread_id   TEXT        NOT NULL DEFAULT '',
    message_id  TEXT        NOT NULL DEFAULT '',
    text        TEXT        NOT NULL,
    status      TEXT        NOT NULL DEFAULT 'open',
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    closed_at   TIMESTAMPTZ
);
CREATE INDEX idx_questions_open ON questions (bot, instance_id) WHERE status = 'open';
CREATE INDEX idx_questions_prompts ON questions (platform, chat_id, thread_id) WHERE kind = 'prompt' AND status = 'open';
CREATE INDEX idx_questions_closed ON questions (closed_at) WHERE status <> 'open';
CREATE TABLE question_presses (
    id          BIGSERIAL   PRIMARY KEY,
    question_id TEXT        NOT NULL REFERENCES questions (id) ON DELETE CASCADE,
    received_by TEXT        NOT NULL,
    choice      TEXT        NOT NULL,
    message_id  TEXT        NOT NULL DEFAULT '',
    answer      TEXT        NOT NULL,
    status      TEXT        NOT NULL DEFAULT 'pending',
    verdict     TEXT        NOT NULL DEFAULT '',
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    decided_at  TIMESTAMPTZ
);
CREATE INDEX idx_question_presses_pending ON question_presses (question_id) WHERE status = 'pending';

-- +goose Down
DROP TABLE question_presses;
DROP TABLE questions;
