-- +goose Up
-- Reminders and scheduled tasks (package tasks, issue 37). A task is made in one chat (thread or
-- topic) by its owner and keeps its zone; next_run_at is the next run in UTC, NULL once it has
-- none. seq changes with every claim, so a replica moves next_run_at on only from the task it
-- read (a compare-and-set). Each run is a task_runs row unique on (task_id, scheduled_at): a run
-- is claimed once across the replicas, by the replica and epoch that wrote it, and finished only
-- by that registration; a run whose replica was taken over is claimed again by a survivor.
CREATE TABLE tasks (
    id             BIGSERIAL   PRIMARY KEY,
    platform       TEXT        NOT NULL,
    chat_id        TEXT        NOT NULL,
    thread_id      TEXT        NOT NULL DEFAULT '',
    parent_chat_id TEXT        NOT NULL DEFAULT '',
    private        BOOLEAN     NOT NULL DEFAULT FALSE,
    user_id        TEXT        NOT NULL,
    user_name      TEXT        NOT NULL DEFAULT '',
    kind           TEXT        NOT NULL,
    text           TEXT        NOT NULL,
    schedule       TEXT        NOT NULL,
    timezone       TEXT        NOT NULL,
    state          TEXT        NOT NULL,
    next_run_at    TIMESTAMPTZ,
    seq            BIGINT      NOT NULL DEFAULT 0,
    runs           INTEGER     NOT NULL DEFAULT 0,
    failures       INTEGER     NOT NULL DEFAULT 0,
    last_run_at    TIMESTAMPTZ,
    last_status    TEXT        NOT NULL DEFAULT '',
    last_error     TEXT        NOT NULL DEFAULT '',
    created_at     TIMESTAMPTZ NOT NULL
);
CREATE INDEX idx_tasks_due ON tasks (next_run_at) WHERE state = 'active';
CREATE INDEX idx_tasks_owner ON tasks (platform, user_id, state);
CREATE INDEX idx_tasks_chat ON tasks (platform, chat_id);

CREATE TABLE task_runs (
    id           BIGSERIAL   PRIMARY KEY,
    task_id      BIGINT      NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    scheduled_at TIMESTAMPTZ NOT NULL,
    status       TEXT        NOT NULL,
    instance_id  TEXT        NOT NULL DEFAULT '',
    epoch        BIGINT      NOT NULL DEFAULT 0,
    attempts     INTEGER     NOT NULL DEFAULT 0,
    next_try_at  TIMESTAMPTZ,
    error        TEXT        NOT NULL DEFAULT '',
    turn_id      BIGINT      NOT NULL DEFAULT 0,
    claimed_at   TIMESTAMPTZ NOT NULL,
    finished_at  TIMESTAMPTZ,
    UNIQUE (task_id, scheduled_at)
);
CREATE INDEX idx_task_runs_open ON task_runs (status) WHERE status IN ('claimed', 'retry');

-- A person's zone (/timezone), per platform; without a row, [tasks] default_timezone.
CREATE TABLE user_timezones (
    platform   TEXT        NOT NULL,
    user_id    TEXT        NOT NULL,
    timezone   TEXT        NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (platform, user_id)
);

-- +goose Down
DROP TABLE user_timezones;
DROP TABLE task_runs;
DROP TABLE tasks;
