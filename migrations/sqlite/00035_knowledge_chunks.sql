-- +goose Up
-- Where each chunk of a knowledge base's document stands: its document and base, its place in
-- the document (ordinal), its page (PDF; 0 when none), its heading path (Markdown, HTML: the
-- headings joined by U+001F) and its character offsets in the document's text. The chunk's text,
-- keyword postings and vectors (with their model and dimension) are the retrieval layer's, under
-- the chunk's id as item id.
CREATE TABLE knowledge_chunks (
    id           INTEGER  PRIMARY KEY AUTOINCREMENT,
    document_id  INTEGER NOT NULL,
    base         TEXT    NOT NULL,
    ordinal      INTEGER NOT NULL,
    page         INTEGER NOT NULL DEFAULT 0,
    headings     TEXT    NOT NULL DEFAULT '',
    start_offset INTEGER NOT NULL DEFAULT 0,
    end_offset   INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX idx_knowledge_chunks_document ON knowledge_chunks (document_id, ordinal);

-- +goose Down
DROP TABLE knowledge_chunks;
