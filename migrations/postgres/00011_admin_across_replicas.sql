-- +goose Up
-- The admins' login sessions, kept here so that a login is valid on every replica and a logout
-- ends it on every replica. The row holds the SHA-256 of the session cookie, never the cookie;
-- the CSRF token the session's forms carry; and when the session ends (12 hours after login).
CREATE TABLE admin_sessions (
    id_hash    TEXT NOT NULL PRIMARY KEY,
    csrf       TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX idx_admin_sessions_expires ON admin_sessions (expires_at);

-- Who holds each named lease (the Telegram poller, Discord shards), for the admin pages: the
-- lease itself is a PostgreSQL advisory lock, which says nothing about its holder. A row is
-- replaced by the next holder and deleted on release; a holder that died is no live instance,
-- so its row is not shown.
CREATE TABLE lease_holders (
    name        TEXT NOT NULL PRIMARY KEY,
    instance_id TEXT NOT NULL
);

-- +goose Down
DROP TABLE lease_holders;
DROP TABLE admin_sessions;
