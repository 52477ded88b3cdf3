-- +goose Up
-- Memory (package pipeline/memory): facts about one person each (platform, user_id), learned in a
-- scope ("private", or the group chat's reference), with the message they came from and who
-- wrote them (the extraction model, or a tool, a command, an admin). Their text is indexed by the
-- retrieval layer's "memory" collection. memory_audit records every write and delete without the
-- fact's text, so forgetting leaves nothing behind.
CREATE TABLE memory_facts (
    id             BIGSERIAL PRIMARY KEY,
    platform       TEXT     NOT NULL,
    user_id        TEXT     NOT NULL,
    scope          TEXT     NOT NULL,
    chat           TEXT     NOT NULL DEFAULT '',
    body           TEXT     NOT NULL,
    source_turn_id BIGINT,
    source_message TEXT     NOT NULL DEFAULT '',
    written_by     TEXT     NOT NULL DEFAULT '',
    path           TEXT     NOT NULL,
    created_at     TIMESTAMPTZ NOT NULL,
    updated_at     TIMESTAMPTZ NOT NULL
);
CREATE INDEX idx_memory_facts_user ON memory_facts (platform, user_id, id);
CREATE TABLE memory_audit (
    id             BIGSERIAL PRIMARY KEY,
    at             TIMESTAMPTZ NOT NULL,
    platform       TEXT     NOT NULL,
    user_id        TEXT     NOT NULL,
    fact_id        BIGINT   NOT NULL,
    action         TEXT     NOT NULL,
    path           TEXT     NOT NULL,
    actor          TEXT     NOT NULL DEFAULT '',
    source_turn_id BIGINT,
    source_message TEXT     NOT NULL DEFAULT ''
);
CREATE INDEX idx_memory_audit_user ON memory_audit (platform, user_id, at);

-- +goose Down
DROP TABLE memory_audit;
DROP TABLE memory_facts;
