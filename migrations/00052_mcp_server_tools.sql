-- +goose Up
-- The tool names each MCP server listed last (its own names, before tool_prefix; a JSON array),
-- written by whichever replica connected it, so that before the server is connected again (before
-- the first login after a restart, or while it is down) a call to one of its tools is answered
-- with why the server is unavailable and recorded under its server (decision 065).
CREATE TABLE mcp_server_tools (
    server     TEXT   NOT NULL PRIMARY KEY,
    names      TEXT   NOT NULL,
    updated_ms BIGINT NOT NULL
);

-- +goose Down
DROP TABLE mcp_server_tools;
