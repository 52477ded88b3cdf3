-- +goose Up
-- Why a failed turn got no answer from the model (chat.Failure: refused, unavailable,
-- misconfigured, quota); empty for every other turn. A turn with a failure stays in the audit
-- trail but leaves the history later turns are sent, so a refused message no longer poisons its
-- conversation.
ALTER TABLE turns ADD COLUMN failure TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE turns DROP COLUMN failure;
