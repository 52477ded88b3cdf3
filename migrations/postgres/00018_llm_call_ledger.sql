-- +goose Up
-- Model calls are written when they start, with the tokens they reserve against the quotas
-- (status running), and completed when they end, so concurrent turns (and replicas) see each
-- other's calls and a call is never lost with its turn's final write. platform, chat_id and
-- user_id name whom a call is counted against (a /compact call has no turn: turn_id NULL);
-- estimated marks tokens the bot estimated because the provider reported none (a stopped, cut
-- or failed stream, or a call still running); instance_id is the replica that made it, for the
-- recovery of a crashed one's calls.
ALTER TABLE llm_calls ALTER COLUMN turn_id DROP NOT NULL;
ALTER TABLE llm_calls ADD COLUMN platform TEXT NOT NULL DEFAULT '';
ALTER TABLE llm_calls ADD COLUMN chat_id TEXT NOT NULL DEFAULT '';
ALTER TABLE llm_calls ADD COLUMN user_id TEXT NOT NULL DEFAULT '';
ALTER TABLE llm_calls ADD COLUMN estimated BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE llm_calls ADD COLUMN instance_id TEXT NOT NULL DEFAULT '';
UPDATE llm_calls l SET platform = c.platform, chat_id = c.chat_id, user_id = t.user_id
    FROM turns t JOIN conversations c ON c.id = t.conversation_id WHERE t.id = l.turn_id;
CREATE INDEX idx_llm_calls_user ON llm_calls (platform, user_id, started_at);
CREATE INDEX idx_llm_calls_chat ON llm_calls (platform, chat_id, started_at);
CREATE INDEX idx_llm_calls_running ON llm_calls (status) WHERE status = 'running';

-- +goose Down
DROP INDEX idx_llm_calls_running;
DROP INDEX idx_llm_calls_chat;
DROP INDEX idx_llm_calls_user;
DELETE FROM llm_calls WHERE turn_id IS NULL;
UPDATE llm_calls SET status = 'error' WHERE status = 'running';
ALTER TABLE llm_calls DROP COLUMN instance_id;
ALTER TABLE llm_calls DROP COLUMN estimated;
ALTER TABLE llm_calls DROP COLUMN user_id;
ALTER TABLE llm_calls DROP COLUMN chat_id;
ALTER TABLE llm_calls DROP COLUMN platform;
ALTER TABLE llm_calls ALTER COLUMN turn_id SET NOT NULL;
