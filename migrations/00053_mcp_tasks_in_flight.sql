-- +goose Up
-- The MCP tasks of tool calls in flight (decision 068): a row is written when a server makes a
-- call a task and deleted when the bot is done with it (its result taken, or tasks/cancel sent).
-- A row left behind is a task whose process stopped without ending it; the next process to
-- connect the server (on replicas: once the owner's row is gone from instances) takes the row
-- and sends tasks/cancel instead of leaving the task to the server's TTL. owner is the process:
-- the replica's instance id, or a single process's own id.
CREATE TABLE mcp_tasks_in_flight (
    server     TEXT   NOT NULL,
    task_id    TEXT   NOT NULL,
    protocol   TEXT   NOT NULL,
    owner      TEXT   NOT NULL,
    started_ms BIGINT NOT NULL,
    PRIMARY KEY (server, task_id)
);

-- +goose Down
DROP TABLE mcp_tasks_in_flight;
