-- +goose Up
-- Full-text search over what members asked and what the bot answered (the admin's conversations
-- search, decision 053): the text of user and assistant messages in an FTS4 index. mattn's
-- go-sqlite3 compiles FTS3/4 in; FTS5 would need a build tag on every build, as retrieval's index
-- found (decision 047). The index keeps no copy of the text (content="messages": it reads the
-- messages table), and triggers keep it in step with every write: a message deleted (retention,
-- a turn's or conversation's cascade) or whose text is replaced (memory's forget) leaves the
-- index in the same statement. The delete runs BEFORE the row changes, while FTS4 can still read
-- the words it has to remove.
CREATE VIRTUAL TABLE messages_fts USING fts4(content="messages", content, tokenize=unicode61);
INSERT INTO messages_fts (docid, content)
    SELECT id, content FROM messages WHERE role IN ('user', 'assistant') AND content <> '';
-- +goose StatementBegin
CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages
WHEN new.role IN ('user', 'assistant') AND new.content <> '' BEGIN
    INSERT INTO messages_fts (docid, content) VALUES (new.id, new.content);
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER messages_fts_delete BEFORE DELETE ON messages
WHEN old.role IN ('user', 'assistant') AND old.content <> '' BEGIN
    DELETE FROM messages_fts WHERE docid = old.id;
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER messages_fts_before_update BEFORE UPDATE OF content, role ON messages
WHEN old.role IN ('user', 'assistant') AND old.content <> '' BEGIN
    DELETE FROM messages_fts WHERE docid = old.id;
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER messages_fts_after_update AFTER UPDATE OF content, role ON messages
WHEN new.role IN ('user', 'assistant') AND new.content <> '' BEGIN
    INSERT INTO messages_fts (docid, content) VALUES (new.id, new.content);
END;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER messages_fts_after_update;
DROP TRIGGER messages_fts_before_update;
DROP TRIGGER messages_fts_delete;
DROP TRIGGER messages_fts_insert;
DROP TABLE messages_fts;
