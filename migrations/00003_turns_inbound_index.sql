-- +goose Up
-- A message an adapter hands over again after a crash is looked up by its id (Store.TurnByInbound)
-- before it is answered, in every conversation of its chat (a reset ends one and starts another).
-- Find the chat's conversations, then each one's turns of the message, by index: Telegram message
-- ids repeat across chats, so the message id alone would still visit one turn per chat.
CREATE INDEX idx_conversations_chat ON conversations (platform, chat_id);
CREATE INDEX idx_turns_inbound ON turns (inbound_message_id, conversation_id);

-- +goose Down
DROP INDEX idx_turns_inbound;
DROP INDEX idx_conversations_chat;
