-- +goose Up
-- Per-chat budgets across replicas (coord.ChatBudgets). chat_budgets keeps, per chat of a bot,
-- the recent requests made to the platform in it (on the database's clock) by replicas that
-- shared the chat or handed it over; chat_deliveries says which replicas deliver to a chat now
-- and whether each already takes its requests from chat_budgets (sharing) or still paces them in
-- its own memory. A chat one replica delivers to costs two statements per stretch of activity
-- (enter, leave), none per request.
CREATE TABLE chat_budgets (
    chat_key      TEXT PRIMARY KEY,
    sent          TIMESTAMPTZ[] NOT NULL DEFAULT '{}',
    blocked_until TIMESTAMPTZ   NOT NULL DEFAULT '-infinity',
    updated_at    TIMESTAMPTZ   NOT NULL
);
CREATE INDEX idx_chat_budgets_updated ON chat_budgets (updated_at);
CREATE TABLE chat_deliveries (
    chat_key    TEXT    NOT NULL,
    instance_id TEXT    NOT NULL,
    sharing     BOOLEAN NOT NULL DEFAULT FALSE,
    PRIMARY KEY (chat_key, instance_id)
);
CREATE INDEX idx_chat_deliveries_instance ON chat_deliveries (instance_id);

-- relaybot_chat_enter records that p_instance delivers to p_key and returns how long ago (in
-- seconds; negative for slots reserved ahead) each recent request in the chat was, and whether
-- another live replica delivers to it (then p_instance shares the chat from the start). The row
-- lock on chat_budgets orders replicas entering the same chat at once.
-- +goose StatementBegin
CREATE FUNCTION relaybot_chat_enter(p_key TEXT, p_instance TEXT, p_keep DOUBLE PRECISION,
    OUT ages DOUBLE PRECISION[], OUT shared BOOLEAN) AS $$
DECLARE
    v_sent TIMESTAMPTZ[];
    v_now  TIMESTAMPTZ;
BEGIN
    INSERT INTO chat_budgets AS b (chat_key, updated_at) VALUES (p_key, clock_timestamp())
        ON CONFLICT (chat_key) DO UPDATE SET updated_at = clock_timestamp()
        RETURNING b.sent INTO v_sent;
    v_now := clock_timestamp();
    DELETE FROM chat_deliveries d WHERE d.chat_key = p_key AND d.instance_id <> p_instance
        AND NOT EXISTS (SELECT 1 FROM instances i WHERE i.id = d.instance_id AND i.expires_at > v_now);
    shared := EXISTS (SELECT 1 FROM chat_deliveries d WHERE d.chat_key = p_key AND d.instance_id <> p_instance);
    INSERT INTO chat_deliveries (chat_key, instance_id, sharing) VALUES (p_key, p_instance, shared)
        ON CONFLICT (chat_key, instance_id) DO UPDATE SET sharing = EXCLUDED.sharing;
    ages := ARRAY(SELECT EXTRACT(EPOCH FROM v_now - s)::DOUBLE PRECISION FROM unnest(v_sent) s
        WHERE s > v_now - make_interval(secs => p_keep) ORDER BY s);
END
$$ LANGUAGE plpgsql;
-- +goose StatementEnd

-- relaybot_chat_publish adds the requests p_instance made in p_key from its own memory (p_ages:
-- seconds ago) to the chat's history, then either marks it sharing (the other replicas waiting
-- for its history may go on) or, with p_leave, removes it from the chat's deliverers.
-- +goose StatementBegin
CREATE FUNCTION relaybot_chat_publish(p_key TEXT, p_instance TEXT, p_ages DOUBLE PRECISION[],
    p_leave BOOLEAN, p_keep DOUBLE PRECISION) RETURNS VOID AS $$
DECLARE
    v_now TIMESTAMPTZ;
BEGIN
    INSERT INTO chat_budgets (chat_key, updated_at) VALUES (p_key, clock_timestamp())
        ON CONFLICT (chat_key) DO UPDATE SET updated_at = clock_timestamp();
    v_now := clock_timestamp();
    UPDATE chat_budgets SET sent = ARRAY(
            SELECT s FROM unnest(sent || ARRAY(SELECT v_now - make_interval(secs => a) FROM unnest(p_ages) a)) s
            WHERE s > v_now - make_interval(secs => p_keep) ORDER BY s),
        updated_at = v_now
        WHERE chat_key = p_key;
    IF p_leave THEN
        DELETE FROM chat_deliveries WHERE chat_key = p_key AND instance_id = p_instance;
    ELSE
        INSERT INTO chat_deliveries (chat_key, instance_id, sharing) VALUES (p_key, p_instance, TRUE)
            ON CONFLICT (chat_key, instance_id) DO UPDATE SET sharing = TRUE;
    END IF;
END
$$ LANGUAGE plpgsql;
-- +goose StatementEnd

-- relaybot_chat_reserve reserves the next request in a shared chat: the earliest moment, not
-- before p_not_before seconds from now, the last reservation or a 429's block, at which every
-- window (p_counts[i] requests per p_pers[i] seconds) still has room, counted from the chat's
-- history. It returns the seconds to wait for it, or NULL while another live replica delivering
-- to the chat has not yet handed its own history over (ask again shortly).
-- +goose StatementBegin
CREATE FUNCTION relaybot_chat_reserve(p_key TEXT, p_instance TEXT, p_counts INTEGER[],
    p_pers DOUBLE PRECISION[], p_not_before DOUBLE PRECISION) RETURNS DOUBLE PRECISION AS $$
DECLARE
    v_sent    TIMESTAMPTZ[];
    v_blocked TIMESTAMPTZ;
    v_now     TIMESTAMPTZ;
    v_t       TIMESTAMPTZ;
    v_keep    DOUBLE PRECISION := 0;
    n         INTEGER;
BEGIN
    INSERT INTO chat_budgets AS b (chat_key, updated_at) VALUES (p_key, clock_timestamp())
        ON CONFLICT (chat_key) DO UPDATE SET updated_at = clock_timestamp()
        RETURNING b.sent, b.blocked_until INTO v_sent, v_blocked;
    v_now := clock_timestamp();
    IF EXISTS (SELECT 1 FROM chat_deliveries d JOIN instances i ON i.id = d.instance_id
            WHERE d.chat_key = p_key AND d.instance_id <> p_instance AND NOT d.sharing AND i.expires_at > v_now) THEN
        RETURN NULL;
    END IF;
    v_t := GREATEST(v_now + make_interval(secs => GREATEST(p_not_before, 0)), v_blocked);
    n := COALESCE(array_length(v_sent, 1), 0);
    IF n > 0 THEN
        v_t := GREATEST(v_t, v_sent[n]);
    END IF;
    FOR i IN 1 .. COALESCE(array_length(p_counts, 1), 0) LOOP
        v_keep := GREATEST(v_keep, p_pers[i]);
        IF p_counts[i] > 0 AND n >= p_counts[i] THEN
            v_t := GREATEST(v_t, v_sent[n - p_counts[i] + 1] + make_interval(secs => p_pers[i]));
        END IF;
    END LOOP;
    UPDATE chat_budgets SET
        sent = ARRAY(SELECT s FROM unnest(v_sent || v_t) s WHERE s > v_now - make_interval(secs => v_keep) ORDER BY s),
        blocked_until = GREATEST(blocked_until, v_now + make_interval(secs => GREATEST(p_not_before, 0))),
        updated_at = v_now
        WHERE chat_key = p_key;
    RETURN EXTRACT(EPOCH FROM v_t - v_now)::DOUBLE PRECISION;
END
$$ LANGUAGE plpgsql;
-- +goose StatementEnd

-- reply_messages: the message each reply in flight is streaming into, with the text it shows, so
-- that when a replica dies mid-reply a survivor can edit its partial message to say it was
-- interrupted. Written off the delivery path, coalesced; a row goes when its reply ends.
CREATE TABLE reply_messages (
    instance_id TEXT        NOT NULL,
    reply_key   TEXT        NOT NULL,
    bot         TEXT        NOT NULL, -- the platform and a digest of the bot's token
    platform    TEXT        NOT NULL,
    chat_id     TEXT        NOT NULL,
    thread_id   TEXT        NOT NULL DEFAULT '',
    message_id  TEXT        NOT NULL,
    text        TEXT        NOT NULL,
    updated_at  TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (instance_id, reply_key)
);

-- +goose Down
DROP TABLE reply_messages;
DROP FUNCTION relaybot_chat_reserve(TEXT, TEXT, INTEGER[], DOUBLE PRECISION[], DOUBLE PRECISION);
DROP FUNCTION relaybot_chat_publish(TEXT, TEXT, DOUBLE PRECISION[], BOOLEAN, DOUBLE PRECISION);
DROP FUNCTION relaybot_chat_enter(TEXT, TEXT, DOUBLE PRECISION);
DROP TABLE chat_deliveries;
DROP TABLE chat_budgets;
