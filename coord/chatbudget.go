package coord

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Window is a platform's budget for one chat: at most N requests in any Per.
type Window struct {
	N   int
	Per time.Duration
}

// ChatBudgetOptions configure NewChatBudgets.
type ChatBudgetOptions struct {
	// Bot is the bot the chats belong to: two bots on one database keep apart budgets for chats
	// with the same id.
	Bot Bot
	// Chat is every chat's budget; Group is a group chat's extra one (zero: none).
	Chat, Group Window
	// Slack widens every window: a shared chat counts a request from the moment it was reserved,
	// not from its answer as one process does, so the slack covers the request's way to the
	// platform. Default 500ms.
	Slack time.Duration
	// Poll is how often Reserve asks again while another replica hands its history over;
	// default 200ms.
	Poll time.Duration
}

// ChatBudgets share the per-chat budgets of one bot among the replicas delivering to the same
// chat (tables chat_budgets and chat_deliveries, migration 00012). A replica that is the only
// one delivering to a chat paces it in its own memory, as one process does; when a second
// replica enters the chat both reserve every request in the database (Reserve), after the
// first one has handed over the requests it made from memory (Publish). It implements
// delivery.SharedChats.
type ChatBudgets struct {
	db       *sql.DB
	instance string
	opts     ChatBudgetOptions
}

// NewChatBudgets returns the budgets of the chats of opts.Bot over db, for replica instance.
func NewChatBudgets(db *sql.DB, instance string, opts ChatBudgetOptions) *ChatBudgets {
	if opts.Slack <= 0 {
		opts.Slack = 500 * time.Millisecond
	}
	if opts.Poll <= 0 {
		opts.Poll = 200 * time.Millisecond
	}
	return &ChatBudgets{db: db, instance: instance, opts: opts}
}

// budgetKey is one chat of one bot as the tables chat_budgets and chat_deliveries name it:
// the bot, a bar, the chat.
type budgetKey struct {
	bot  Bot
	chat string
}

// String renders the key as the tables store it.
func (k budgetKey) String() string { return budgetPrefix(k.bot) + k.chat }

// budgetPrefix starts the keys of every chat of bot.
func budgetPrefix(bot Bot) string { return bot.String() + "|" }

// chatOf is the chat of a key of bot, as the tables store it.
func chatOf(bot Bot, key string) string { return strings.TrimPrefix(key, budgetPrefix(bot)) }

func (c *ChatBudgets) key(chat string) string { return budgetKey{bot: c.opts.Bot, chat: chat}.String() }

// keep is how long a request stays in a chat's history: its longest window.
func (c *ChatBudgets) keep() float64 {
	return (max(c.opts.Chat.Per, c.opts.Group.Per) + c.opts.Slack).Seconds()
}

// Enter records that this replica delivers to chat. It returns how long ago each request any
// replica made in the chat within its longest window was (negative for one reserved ahead),
// and whether another live replica delivers to the chat too: then this one shares it from the
// start.
func (c *ChatBudgets) Enter(ctx context.Context, chat string) (ago []time.Duration, shared bool, err error) {
	var ages string
	err = c.db.QueryRowContext(ctx, `SELECT array_to_string(ages, ' '), shared FROM relaybot_chat_enter($1, $2, $3)`,
		c.key(chat), c.instance, c.keep()).Scan(&ages, &shared)
	if err != nil {
		return nil, false, fmt.Errorf("coord: enter chat %s: %w", chat, err)
	}
	for _, f := range strings.Fields(ages) {
		s, err := strconv.ParseFloat(f, 64)
		if err != nil {
			return nil, false, fmt.Errorf("coord: enter chat %s: request age %q: %w", chat, f, err)
		}
		ago = append(ago, time.Duration(s*float64(time.Second)))
	}
	return ago, shared, nil
}

// Contended lists the chats this replica entered and paces in its own memory that another
// live replica now delivers to as well: this replica should Publish each and share it.
func (c *ChatBudgets) Contended(ctx context.Context) ([]string, error) {
	rows, err := c.db.QueryContext(ctx, `SELECT d.chat_key FROM chat_deliveries d
		WHERE d.instance_id = $1 AND NOT d.sharing AND starts_with(d.chat_key, $2)
		AND EXISTS (SELECT 1 FROM chat_deliveries o JOIN instances i ON i.id = o.instance_id
			WHERE o.chat_key = d.chat_key AND o.instance_id <> d.instance_id AND i.expires_at > now())`,
		c.instance, budgetPrefix(c.opts.Bot))
	if err != nil {
		return nil, fmt.Errorf("coord: contended chats: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return nil, fmt.Errorf("coord: contended chats: %w", err)
		}
		out = append(out, chatOf(c.opts.Bot, k))
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("coord: contended chats: %w", err)
	}
	return out, nil
}

// Publish adds the requests this replica made in chat from its own memory (how long ago each
// was) to the chat's history. With leave it then stops delivering to the chat; without, it
// shares the chat from now on (the other replicas waiting in Reserve go on).
func (c *ChatBudgets) Publish(ctx context.Context, chat string, ago []time.Duration, leave bool) error {
	ages := make([]float64, len(ago))
	for i, d := range ago {
		ages[i] = d.Seconds()
	}
	if _, err := c.db.ExecContext(ctx, `SELECT relaybot_chat_publish($1, $2, $3, $4, $5)`,
		c.key(chat), c.instance, ages, leave, c.keep()); err != nil {
		return fmt.Errorf("coord: hand over chat %s: %w", chat, err)
	}
	return nil
}

// Reserve takes the next request's place in a shared chat, not before notBefore from now (a
// 429 this replica was answered, which then holds every replica), and returns how long to wait
// for it. While another live replica delivering to the chat has not yet handed its history
// over, it waits and asks again, until ctx ends.
func (c *ChatBudgets) Reserve(ctx context.Context, chat string, group bool, notBefore time.Duration) (time.Duration, error) {
	counts, pers := []int64{int64(c.opts.Chat.N)}, []float64{(c.opts.Chat.Per + c.opts.Slack).Seconds()}
	if group && c.opts.Group.N > 0 {
		counts = append(counts, int64(c.opts.Group.N))
		pers = append(pers, (c.opts.Group.Per + c.opts.Slack).Seconds())
	}
	for {
		var wait sql.NullFloat64
		err := c.db.QueryRowContext(ctx, `SELECT relaybot_chat_reserve($1, $2, $3, $4, $5)`,
			c.key(chat), c.instance, counts, pers, notBefore.Seconds()).Scan(&wait)
		if err != nil {
			return 0, fmt.Errorf("coord: reserve a request in chat %s: %w", chat, err)
		}
		if wait.Valid {
			return time.Duration(wait.Float64 * float64(time.Second)), nil
		}
		t := time.NewTimer(c.opts.Poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, fmt.Errorf("coord: reserve a request in chat %s: %w", chat, ctx.Err())
		case <-t.C:
		}
	}
}

// PurgeChatBudgets forgets the histories of chats nobody delivered to for longer than keep.
func PurgeChatBudgets(ctx context.Context, db *sql.DB, keep time.Duration) (int64, error) {
	res, err := db.ExecContext(ctx, `DELETE FROM chat_budgets b WHERE b.updated_at < now() - make_interval(secs => $1)
		AND NOT EXISTS (SELECT 1 FROM chat_deliveries d WHERE d.chat_key = b.chat_key)`, keep.Seconds())
	if err != nil {
		return 0, fmt.Errorf("coord: purge chat budgets: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("coord: purge chat budgets: %w", err)
	}
	return n, nil
}
