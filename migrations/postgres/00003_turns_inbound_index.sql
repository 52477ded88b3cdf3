-- +goose Up
-- A message an adapter hands over again after a crash is looked up by its id (Store.TurnByInbound)
-- before it is answered: index the turns by inbound message id, newest last, so that the lookup
-- is an index search and not a scan of every turn.
CREATE INDEX idx_turns_inbound ON turns (inbound_message_id, id);

-- +goose Down
DROP INDEX idx_turns_inbound;
