-- +goose Up
-- OAuth logins of remote MCP servers (auth = "oauth"). The bot holds these so that every replica
-- calls the server with the same token and one of them at a time refreshes it: a refresh token
-- may be good for one use only. `sealed` is the token record encrypted with AES-GCM under
-- BOT_SECRET_KEY (base64): the database never holds a token, client secret or verifier in clear.
-- `version` grows by one on every write; a write names the version it read and fails when
-- another replica wrote first (compare-and-set).
CREATE TABLE mcp_oauth_tokens (
    server     TEXT NOT NULL PRIMARY KEY,
    version    BIGINT NOT NULL,
    sealed     TEXT NOT NULL,
    updated_ms BIGINT NOT NULL
);

-- Logins under way: the state sent to the authorization server (kept as its SHA-256) and, sealed,
-- the PKCE verifier and client registration, so that the callback may reach any replica. A row
-- is taken (deleted) by its callback; rows past expires_ms are deleted by the next login.
CREATE TABLE mcp_oauth_states (
    state_hash TEXT NOT NULL PRIMARY KEY,
    server     TEXT NOT NULL,
    sealed     TEXT NOT NULL,
    expires_ms BIGINT NOT NULL
);

-- +goose Down
DROP TABLE mcp_oauth_states;
DROP TABLE mcp_oauth_tokens;
