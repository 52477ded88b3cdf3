package coord

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"relaybot/adapters"
	"relaybot/chat"
	"relaybot/store"
)

// Replies records the message each reply of this replica is streaming into, with the text it
// shows (table reply_messages), so that should the replica die mid-reply a survivor can end
// that message with a note (Interrupted). Showing and Ended only note the newest state; one
// goroutine (Run) writes what changed, a batch per statement, so the delivery path never
// waits for the database and a busy replica writes no more often than the database answers.
// It implements delivery.InFlight for one bot.
type Replies struct {
	db       *sql.DB
	instance string
	bot      Bot
	log      *slog.Logger

	mu      sync.Mutex
	pending map[string]*shownReply // by reply key; nil: the reply ended
	wake    chan struct{}
}

type shownReply struct {
	msg  adapters.MessageRef
	text string
}

// NewReplies returns the record of the replies in flight of bot that replica instance
// delivers. Nothing is written until Run.
func NewReplies(db *sql.DB, instance string, bot Bot, log *slog.Logger) *Replies {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Replies{db: db, instance: instance, bot: bot, log: log,
		pending: map[string]*shownReply{}, wake: make(chan struct{}, 1)}
}

// Showing notes that reply id shows text in msg. It never blocks.
func (r *Replies) Showing(id string, msg adapters.MessageRef, text string) {
	r.note(id, &shownReply{msg: msg, text: text})
}

// Ended notes that reply id is over. It never blocks.
func (r *Replies) Ended(id string) { r.note(id, nil) }

func (r *Replies) note(id string, s *shownReply) {
	r.mu.Lock()
	r.pending[id] = s
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// repliesTry bounds each write of the replies in flight.
const repliesTry = 5 * time.Second

// Run writes what Showing and Ended noted until ctx ends, then writes what is left (with a
// context of its own, as the replica is leaving, within repliesTry). A write that fails is
// tried again (store.Retry: an upsert and a delete may land twice) with what was noted
// meanwhile, until it lands or ctx ends.
func (r *Replies) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), repliesTry)
			err := r.Flush(fctx)
			cancel()
			if err != nil {
				r.log.Warn("replies in flight not recorded at shutdown", "err", err)
			}
			return
		case <-r.wake:
		}
		err := store.Retry(ctx, store.Write{What: "the replies in flight", Attempt: repliesTry, Idempotent: true, Log: r.log}, r.Flush)
		if err != nil && ctx.Err() == nil {
			r.log.Warn("replies in flight not recorded; a survivor may not mark them should this replica die", "err", err)
		}
	}
}

// Flush writes what was noted since the last Flush. What it fails to write is kept for the
// next one unless newer notes replaced it.
func (r *Replies) Flush(ctx context.Context) error {
	r.mu.Lock()
	batch := r.pending
	r.pending = map[string]*shownReply{}
	r.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	var ended, keys, platforms, chats, threads, msgs, texts []string
	for id, s := range batch {
		if s == nil {
			ended = append(ended, r.rowKey(id))
			continue
		}
		keys = append(keys, r.rowKey(id))
		platforms = append(platforms, string(s.msg.Chat.Platform))
		chats = append(chats, s.msg.Chat.ChatID)
		threads = append(threads, s.msg.Chat.ThreadID)
		msgs = append(msgs, s.msg.ID)
		texts = append(texts, s.text)
	}
	err := r.write(ctx, ended, keys, platforms, chats, threads, msgs, texts)
	if err != nil {
		r.mu.Lock()
		for id, s := range batch {
			if _, newer := r.pending[id]; !newer {
				r.pending[id] = s
			}
		}
		r.mu.Unlock()
	}
	return err
}

// rowKey is reply id's key in reply_messages: an engine numbers its replies from 1, and the
// engines of two bots of one replica (Telegram and Discord) must not share a row.
func (r *Replies) rowKey(id string) string { return r.bot.String() + " " + id }

func (r *Replies) write(ctx context.Context, ended, keys, platforms, chats, threads, msgs, texts []string) error {
	if len(keys) > 0 {
		if _, err := r.db.ExecContext(ctx, `INSERT INTO reply_messages
			(instance_id, reply_key, bot, platform, chat_id, thread_id, message_id, text, updated_at)
			SELECT $1, k, $2, p, c, t, m, x, now() FROM unnest($3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[]) AS u(k, p, c, t, m, x)
			ON CONFLICT (instance_id, reply_key) DO UPDATE SET platform = EXCLUDED.platform, chat_id = EXCLUDED.chat_id,
				thread_id = EXCLUDED.thread_id, message_id = EXCLUDED.message_id, text = EXCLUDED.text, updated_at = now()`,
			r.instance, r.bot.String(), keys, platforms, chats, threads, msgs, texts); err != nil {
			return fmt.Errorf("coord: record %d replies in flight: %w", len(keys), err)
		}
	}
	if len(ended) > 0 {
		if _, err := r.db.ExecContext(ctx, `DELETE FROM reply_messages WHERE instance_id = $1 AND reply_key = ANY($2)`,
			r.instance, ended); err != nil {
			return fmt.Errorf("coord: forget %d replies: %w", len(ended), err)
		}
	}
	return nil
}

// InterruptedReply is the message a reply of a replica that is gone was streaming into.
type InterruptedReply = LeftMessage

// LeftMessage is a message a replica that is gone left behind (a reply it was streaming, a
// question it asked), taken by one survivor to end it.
type LeftMessage struct {
	Instance string
	Message  adapters.MessageRef
	// Text is what the message showed when last recorded.
	Text string
}

// Interrupted takes up to limit replies of bot that replicas which are gone (taken over, or left;
// not merely expired: such a replica may come back and finish them) were streaming, and removes them, so that each goes to one survivor.
func Interrupted(ctx context.Context, db *sql.DB, bot Bot, limit int) ([]InterruptedReply, error) {
	return takeLeft(ctx, db, "take interrupted replies of "+bot.String(), `DELETE FROM reply_messages WHERE (instance_id, reply_key) IN (
			SELECT r.instance_id, r.reply_key FROM reply_messages r WHERE r.bot = $1
			AND NOT EXISTS (SELECT 1 FROM instances i WHERE i.id = r.instance_id)
			ORDER BY r.updated_at LIMIT $2 FOR UPDATE SKIP LOCKED)
		RETURNING instance_id, platform, chat_id, thread_id, message_id, text`, bot.String(), limit)
}

// takeLeft runs query, which returns the instance, platform, chat, thread, message id and text
// of each message it takes; what names the step in its errors.
func takeLeft(ctx context.Context, db *sql.DB, what, query string, args ...any) ([]LeftMessage, error) {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("coord: %s: %w", what, err)
	}
	defer rows.Close()
	var out []LeftMessage
	for rows.Next() {
		var m LeftMessage
		var platform string
		if err := rows.Scan(&m.Instance, &platform, &m.Message.Chat.ChatID, &m.Message.Chat.ThreadID, &m.Message.ID, &m.Text); err != nil {
			return nil, fmt.Errorf("coord: %s: %w", what, err)
		}
		m.Message.Chat.Platform = chat.Platform(platform)
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("coord: %s: %w", what, err)
	}
	return out, nil
}
