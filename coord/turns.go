package coord

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"
)

// turnsChannel is the NOTIFY channel on which a replica says that a conversation's turn is free
// (or that its queue changed); the payload is the conversation's key.
const turnsChannel = "relaybot_turns"

// turnsPoll is how often a waiting message looks again without a notification: a notification
// missed while a listener reconnects, or a replica whose lease expired with the turn it held.
const turnsPoll = time.Second

// turnsTry bounds each look at the queue; turnsOutage is how long a message waits through a
// database that does not answer before it is let through unordered.
const (
	turnsTry    = 5 * time.Second
	turnsOutage = 2 * time.Minute
)

// live is the condition "the row's replica is not gone", for turn_queue rows aliased q: a replica
// whose lease expired keeps its place (it may be paused, or back from an outage any moment)
// until a survivor takes its work over (TakeOver), which deletes its rows with it.
const live = `q.instance_id IN (SELECT id FROM instances)`

// Entry is a message that waits for its conversation's turn.
type Entry struct {
	// Key is the conversation's key.
	Key string
	// UserID is who sent the message: a /stop on another replica is allowed or refused by it.
	UserID string
	// MessageID is the platform's id of the message; numeric ids order messages sent within
	// the same second.
	MessageID string
	// Sent is when the user sent the message; the zero time means now.
	Sent time.Time
}

// Turns keeps one turn at a time per conversation across the replicas on one PostgreSQL
// database, in the order the messages were sent, with the deployment's queue limit and its
// interrupt policy. Each message has a row in turn_queue from Enter to Leave; a replica lets its
// earliest message of a conversation contend (Wait), and the earliest contending message runs
// when no live replica runs one. Every decision is taken under a transaction-level advisory lock
// on the conversation, so two replicas never both decide to run; a replica waiting wakes on a
// NOTIFY when a turn ends (Listen) and looks again every second regardless.
type Turns struct {
	db       *sql.DB
	instance string
	log      *slog.Logger

	mu      sync.Mutex
	waiters map[string]map[chan struct{}]struct{}
}

// NewTurns returns the conversation turns of replica instance over db; log receives listener
// failures (nil discards them).
func NewTurns(db *sql.DB, instance string, log *slog.Logger) *Turns {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Turns{db: db, instance: instance, log: log, waiters: map[string]map[chan struct{}]struct{}{}}
}

// Enter records a message waiting for its conversation's turn and returns its ticket. With
// interrupt, the messages sent before it that wait on any replica are dropped (their Wait
// reports it) and a turn running on another replica is asked to stop (a Stop with Interrupt on
// the stop channel). Without it, the message is refused (admitted false) when limit messages
// already wait behind a running turn across the deployment (limit+1 when none runs: one of them
// is about to).
func (t *Turns) Enter(ctx context.Context, e Entry, limit int, interrupt bool) (ticket int64, admitted bool, err error) {
	err = t.locked(ctx, e.Key, func(tx *sql.Tx) error {
		if !interrupt {
			var waiting, running int
			if err := tx.QueryRowContext(ctx, `SELECT
				COUNT(*) FILTER (WHERE q.state <> 'running'), COUNT(*) FILTER (WHERE q.state = 'running')
				FROM turn_queue q WHERE q.conv_key = $1 AND `+live, e.Key).Scan(&waiting, &running); err != nil {
				return err
			}
			room := limit
			if running == 0 {
				room++
			}
			if waiting >= room {
				return nil
			}
		}
		sent := e.Sent
		if sent.IsZero() {
			sent = time.Now()
		}
		num, _ := strconv.ParseInt(e.MessageID, 10, 64)
		if err := tx.QueryRowContext(ctx, `INSERT INTO turn_queue (conv_key, instance_id, user_id, message_id, message_num, sent_at)
			VALUES ($1, $2, $3, $4, $5, $6) RETURNING seq`, e.Key, t.instance, e.UserID, e.MessageID, num, sent).Scan(&ticket); err != nil {
			return err
		}
		admitted = true
		if !interrupt {
			return nil
		}
		// Only the latest message is answered: the ones it supersedes go, wherever they wait.
		if _, err := tx.ExecContext(ctx, `DELETE FROM turn_queue q WHERE q.conv_key = $1 AND q.state <> 'running'
			AND (q.sent_at, q.message_num, q.seq) < ($2, $3, $4)`, e.Key, sent, num, ticket); err != nil {
			return err
		}
		var elsewhere bool
		if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM turn_queue q WHERE q.conv_key = $1
			AND q.state = 'running' AND q.instance_id <> $2 AND `+live+`)`, e.Key, t.instance).Scan(&elsewhere); err != nil {
			return err
		}
		if !elsewhere {
			return nil
		}
		b, err := json.Marshal(Stop{Key: e.Key, Interrupt: true})
		if err != nil {
			return err
		}
		// Stored for the running turn (so its replica reads it should its listener be
		// reconnecting) and delivered when the transaction commits.
		_, err = tx.ExecContext(ctx, `WITH kept AS (
				INSERT INTO stop_requests (ticket, conv_key, interrupt)
				SELECT q.seq, q.conv_key, TRUE FROM turn_queue q WHERE q.conv_key = $1
				  AND q.state = 'running' AND q.instance_id <> $2 AND `+live+`)
			SELECT pg_notify(`+channelSQL("$3")+`, $4)`, e.Key, t.instance, stopChannel, string(b))
		return err
	})
	if err != nil {
		return 0, false, fmt.Errorf("coord: enter conversation %s: %w", e.Key, err)
	}
	return ticket, admitted, nil
}

// Wait returns once the message with ticket may run its conversation's turn (run true), or when
// it was dropped by a newer message under the interrupt policy (run false). Until then the
// message contends for the turn: it runs when no live replica runs one of the conversation and
// no contending message was sent before it. The caller lets only its earliest message of a
// conversation wait at a time. ctx ending returns its error.
func (t *Turns) Wait(ctx context.Context, key string, ticket int64) (run bool, err error) {
	wake := t.watch(key)
	defer t.unwatch(key, wake)
	poll := time.NewTicker(turnsPoll)
	defer poll.Stop()
	var failing time.Time // since when every try failed; zero while they answer
	for {
		cctx, cancel := context.WithTimeout(ctx, turnsTry)
		gone, got, err := t.try(cctx, key, ticket)
		cancel()
		switch {
		case err != nil && ctx.Err() != nil:
			return false, ctx.Err()
		case err != nil:
			// The database may be away for a failover: the message waits for it, paused, for
			// up to turnsOutage before it is let through unordered.
			if failing.IsZero() {
				failing = time.Now()
			}
			if time.Since(failing) >= turnsOutage {
				return false, fmt.Errorf("coord: wait for the turn of %s: %w", key, err)
			}
			t.log.Debug("coord: the turn queue is not answering; trying again", "conversation", key, "err", err)
		case gone:
			return false, nil
		case got:
			return true, nil
		default:
			failing = time.Time{}
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-wake:
		case <-poll.C:
		}
	}
}

// try takes the conversation for ticket when it may; gone reports the ticket's row was removed.
func (t *Turns) try(ctx context.Context, key string, ticket int64) (gone, got bool, err error) {
	err = t.locked(ctx, key, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `UPDATE turn_queue SET state = 'waiting' WHERE seq = $1 AND state = 'queued'`, ticket); err != nil {
			return err
		}
		var state string
		if err := tx.QueryRowContext(ctx, `SELECT state FROM turn_queue WHERE seq = $1`, ticket).Scan(&state); errors.Is(err, sql.ErrNoRows) {
			gone = true
			return nil
		} else if err != nil {
			return err
		}
		if state == "running" {
			got = true
			return nil
		}
		// Held back by a turn running anywhere, by an earlier message contending, and by an
		// earlier message another replica is about to let contend (it has none contending yet: it
		// settles, or has just entered). Earlier messages queued behind a replica's contending one
		// (they reached it late) wait their turn there, as they would in one process.
		res, err := tx.ExecContext(ctx, `UPDATE turn_queue m SET state = 'running' WHERE m.seq = $1
			AND NOT EXISTS (SELECT 1 FROM turn_queue q WHERE q.conv_key = m.conv_key AND q.seq <> m.seq AND `+live+`
				AND (q.state = 'running'
					OR (q.state = 'waiting' AND (q.sent_at, q.message_num, q.seq) < (m.sent_at, m.message_num, m.seq))
					OR (q.state = 'queued' AND q.instance_id <> m.instance_id
						AND (q.sent_at, q.message_num, q.seq) < (m.sent_at, m.message_num, m.seq)
						AND NOT EXISTS (SELECT 1 FROM turn_queue r WHERE r.conv_key = q.conv_key
							AND r.instance_id = q.instance_id AND r.state <> 'queued'))))`, ticket)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		got = n == 1
		return err
	})
	return gone, got, err
}

// Leave removes the message with ticket, whether it ran, was refused or dropped, and wakes the
// replicas waiting for the conversation.
func (t *Turns) Leave(ctx context.Context, key string, ticket int64) error {
	if _, err := t.db.ExecContext(ctx, `WITH gone AS (DELETE FROM turn_queue WHERE seq = $1)
		SELECT pg_notify(`+channelSQL("$2")+`, $3)`, ticket, turnsChannel, key); err != nil {
		return fmt.Errorf("coord: leave conversation %s: %w", key, err)
	}
	return nil
}

// Running reports whether a live replica runs a turn of conversation key, who asked for it,
// and whether it is this replica.
func (t *Turns) Running(ctx context.Context, key string) (userID string, here, running bool, err error) {
	var instance string
	err = t.db.QueryRowContext(ctx, `SELECT q.user_id, q.instance_id FROM turn_queue q
		WHERE q.conv_key = $1 AND q.state = 'running' AND `+live+` ORDER BY q.seq LIMIT 1`, key).Scan(&userID, &instance)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, false, nil
	}
	if err != nil {
		return "", false, false, fmt.Errorf("coord: who runs conversation %s: %w", key, err)
	}
	return userID, instance == t.instance, true, nil
}

// Purge removes the rows of replicas that are gone (they are ignored already) and returns how
// many it removed.
func (t *Turns) Purge(ctx context.Context) (int64, error) {
	res, err := t.db.ExecContext(ctx, `DELETE FROM turn_queue q WHERE NOT (`+live+`)`)
	if err != nil {
		return 0, fmt.Errorf("coord: purge the turn queue: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("coord: purge the turn queue: %w", err)
	}
	return n, nil
}

// Listen wakes this replica's waiting messages when another replica frees their conversation,
// until ctx ends. Without it, waiting messages look again every second.
func (t *Turns) Listen(ctx context.Context) error {
	return listenLoop(ctx, t.db, turnsChannel, "free conversations", t.log, func(payload string) { t.wake(payload) })
}

// locked runs fn in a transaction holding the conversation's advisory lock.
func (t *Turns) locked(ctx context.Context, key string, fn func(*sql.Tx) error) error {
	tx, err := t.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('turn ' || $1, 0))`, key); err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit()
}

// watch registers a waiter for key; the channel receives (without blocking) on every wake.
func (t *Turns) watch(key string) chan struct{} {
	ch := make(chan struct{}, 1)
	t.mu.Lock()
	defer t.mu.Unlock()
	m := t.waiters[key]
	if m == nil {
		m = map[chan struct{}]struct{}{}
		t.waiters[key] = m
	}
	m[ch] = struct{}{}
	return ch
}

func (t *Turns) unwatch(key string, ch chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.waiters[key], ch)
	if len(t.waiters[key]) == 0 {
		delete(t.waiters, key)
	}
}

func (t *Turns) wake(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for ch := range t.waiters[key] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}
