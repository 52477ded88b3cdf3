-- +goose Up
-- What the admin overview charts of a turn's reply, kept apart from its deliveries' JSON so the
-- database can sum and rank them over a month of turns: when the reply first showed text (its
-- first send, draft or edit), when the final text was delivered, and the 429s the platform
-- asked the reply to wait out (how many, how long in all). NULL times: the reply showed no text
-- (a failed or stopped turn, or one finished before this migration).
ALTER TABLE turns ADD COLUMN first_text_at DATETIME;
ALTER TABLE turns ADD COLUMN final_at DATETIME;
ALTER TABLE turns ADD COLUMN waits_429 INTEGER NOT NULL DEFAULT 0;
ALTER TABLE turns ADD COLUMN waited_429_ms BIGINT NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE turns DROP COLUMN waited_429_ms;
ALTER TABLE turns DROP COLUMN waits_429;
ALTER TABLE turns DROP COLUMN final_at;
ALTER TABLE turns DROP COLUMN first_text_at;
