-- +goose Up
-- The web chat's live stream across replicas (coord.WebRelay). web_watchers says which replica
-- holds an open page (an event stream) of which web chat, so a replica running a turn notifies
-- only when a page of the chat is open elsewhere. web_relay_events holds an event too large for
-- a NOTIFY payload (8000 bytes) for a minute or so: the notification carries its id.
CREATE TABLE web_watchers (
    chat_id     TEXT        NOT NULL,
    instance_id TEXT        NOT NULL,
    since       TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (chat_id, instance_id)
);
CREATE INDEX idx_web_watchers_instance ON web_watchers (instance_id);
CREATE TABLE web_relay_events (
    id         BIGSERIAL   PRIMARY KEY,
    payload    TEXT        NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX idx_web_relay_events_created ON web_relay_events (created_at);

-- +goose Down
DROP TABLE web_relay_events;
DROP TABLE web_watchers;
