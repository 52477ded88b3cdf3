package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"relaybot/adapters"
	"relaybot/chat"
	"relaybot/pipeline/history"
	"relaybot/pipeline/memory"
	"relaybot/pipeline/quota"
	"relaybot/store"
)

// Bounds of memory's work in a turn: the recall before the model is called, the extraction
// after the answer is delivered.
const (
	recallTimeout = 10 * time.Second
	learnTimeout  = 3 * time.Minute
)

// speakerOf is whose facts a message's turn reads and writes; placeOf where it happens.
func speakerOf(in adapters.Inbound) chat.User {
	return chat.User{Platform: in.Chat.Platform, ID: in.UserID}
}

func placeOf(in adapters.Inbound) memory.Place {
	return memory.Place{Chat: in.Chat, Private: in.Kind == adapters.Private}
}

// withMemory returns msgs with the speaker's remembered facts in one system message right
// before the new user message: after the system prompt and the history, so the prefix a
// provider caches stays the same from turn to turn. The facts are looked up once a turn.
func (t *turn) withMemory(msgs []chat.Message) []chat.Message {
	m := t.parts.opts.Memory
	if m == nil || len(msgs) == 0 {
		return msgs
	}
	last := len(msgs) - 1
	if !t.recalled {
		t.recalled = true
		ctx, cancel := context.WithTimeout(t.ctx, recallTimeout)
		block, err := m.Recall(ctx, speakerOf(t.in), placeOf(t.in), msgs[last].Content, t.meter)
		cancel()
		if err != nil {
			t.log.Warn("pipeline: memory not recalled", "err", err)
		}
		t.remembered = block
	}
	if t.remembered == "" {
		return msgs
	}
	t.hist.Estimate += history.EstimateText(t.remembered)
	return slices.Insert(slices.Clone(msgs), last, chat.Message{Role: chat.RoleSystem, Content: t.remembered})
}

// learn extracts facts from the person's own message after the answer was delivered (an
// answer that failed teaches nothing); its model call counts toward the person's usage and
// quotas, and a person whose quota is used up gets none.
func (t *turn) learn(status chat.Status) {
	m := t.parts.opts.Memory
	if m == nil || status != store.TurnOK || strings.TrimSpace(t.in.Text) == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(t.ctx), learnTimeout)
	defer cancel()
	meter := t.parts.quotas.Meter(t.in, 0, t.log)
	said := []memory.Said{{Text: t.in.Text, Turn: t.id, Message: t.in.MessageID}}
	ch, err := m.Extract(ctx, speakerOf(t.in), placeOf(t.in), said, meter)
	if err != nil {
		t.log.Warn("pipeline: nothing learned from the message", "err", err)
		return
	}
	if n := len(ch.Added) + len(ch.Updated) + len(ch.Deleted); n > 0 {
		t.log.Info("pipeline: memory updated", "added", len(ch.Added), "updated", len(ch.Updated), "deleted", len(ch.Deleted))
	}
}

// learnRounds returns compaction's BeforeCompact for a conversation of in (nil when memory is
// off): the facts of each person's messages in the rounds about to be summarised are extracted
// first, each on that person's quotas, so nothing said is lost to the summary.
func (p *turnParts) learnRounds(in adapters.Inbound, log *slog.Logger) func(context.Context, []store.Round) {
	return learnRoundsWith(p.opts.Memory, p.quotas, in, log)
}

func (c *commands) learnRounds(in adapters.Inbound, log *slog.Logger) func(context.Context, []store.Round) {
	return learnRoundsWith(c.opts.Memory, c.quotas, in, log)
}

func learnRoundsWith(m *memory.Memory, quotas *quota.Guard, in adapters.Inbound, log *slog.Logger) func(context.Context, []store.Round) {
	if m == nil {
		return nil
	}
	return func(ctx context.Context, rounds []store.Round) {
		said := map[string][]memory.Said{}
		var order []string
		for _, r := range rounds {
			if r.UserID == "" {
				continue
			}
			for _, msg := range r.Messages {
				if msg.Role == chat.RoleUser && strings.TrimSpace(msg.Content) != "" {
					if _, ok := said[r.UserID]; !ok {
						order = append(order, r.UserID)
					}
					said[r.UserID] = append(said[r.UserID], memory.Said{Text: msg.Content, Turn: r.TurnID})
				}
			}
		}
		for _, user := range order {
			whose := in
			whose.UserID, whose.UserName = user, ""
			ch, err := m.Extract(ctx, speakerOf(whose), placeOf(whose), said[user], quotas.Meter(whose, 0, log))
			if err != nil {
				log.Warn("pipeline: facts of compacted rounds not extracted", "user", user, "err", err)
				continue
			}
			log.Info("pipeline: facts extracted before compaction", "user", user, "rounds", len(said[user]), "added", len(ch.Added))
		}
	}
}

// visibleFacts are the speaker's facts a chat may show: all of them in a private chat; in a
// group only those learned there (the others would be read by the whole group).
func (c *commands) visibleFacts(ctx context.Context, in adapters.Inbound) ([]memory.Fact, error) {
	all, err := c.opts.Memory.List(ctx, speakerOf(in))
	if err != nil || in.Kind == adapters.Private {
		return all, err
	}
	here := in.Chat.Chat().String()
	return slices.DeleteFunc(all, func(f memory.Fact) bool { return f.Scope != here }), nil
}

// memory answers /memory: the speaker's facts, numbered, with where and when each was learned.
func (c *commands) memory(r *request) {
	if c.opts.Memory == nil {
		c.say(r.out, "Memory is off in this bot.", r.log)
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), saveTimeout)
	defer cancel()
	facts, err := c.visibleFacts(ctx, r.in)
	if err != nil {
		c.failed(r, "/memory", err)
		return
	}
	var b strings.Builder
	switch {
	case len(facts) == 0:
		b.WriteString("I remember nothing about you here.")
	default:
		b.WriteString("What I remember about you:\n")
		for i, f := range facts {
			fmt.Fprintf(&b, "%d. %s (%s)\n", i+1, f.Text, learnedWhere(f))
		}
		b.WriteString("/forget N forgets one, /forget all every one.")
	}
	if r.in.Kind != adapters.Private {
		b.WriteString("\nWhat you told me in private is listed only in a private chat.")
	}
	c.say(r.out, b.String(), r.log)
}

// learnedWhere says where and when a fact was learned, and how.
func learnedWhere(f memory.Fact) string {
	where := "in a private chat"
	if f.Scope != "private" {
		where = "in this group"
	}
	how := ""
	switch f.Path {
	case memory.PathTool:
		how = ", when you asked"
	case memory.PathAdmin:
		how = ", by an admin"
	}
	return fmt.Sprintf("learned %s on %s%s", where, f.CreatedAt.UTC().Format("2006-01-02"), how)
}

// forget answers /forget N (a number /memory shows) and /forget all.
func (c *commands) forget(r *request) {
	if c.opts.Memory == nil {
		c.say(r.out, "Memory is off in this bot.", r.log)
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), saveTimeout)
	defer cancel()
	who, arg := speakerOf(r.in), strings.TrimSpace(r.in.Args)
	if strings.EqualFold(arg, "all") {
		n, err := c.opts.Memory.ForgetAll(ctx, who, memory.PathCommand, who.String())
		if err != nil {
			c.failed(r, "/forget all", err)
			return
		}
		c.say(r.out, fmt.Sprintf("Forgotten: %d facts. Nothing about you is kept.", n), r.log)
		return
	}
	n, err := strconv.Atoi(arg)
	if err != nil || n < 1 {
		c.say(r.out, "Usage: /forget N (a number /memory shows) or /forget all.", r.log)
		return
	}
	facts, err := c.visibleFacts(ctx, r.in)
	if err != nil {
		c.failed(r, "/forget", err)
		return
	}
	if n > len(facts) {
		c.say(r.out, fmt.Sprintf("There is no fact %d: /memory lists %d.", n, len(facts)), r.log)
		return
	}
	err = c.opts.Memory.Forget(ctx, who, facts[n-1].ID, memory.PathCommand, who.String())
	if err != nil && !errors.Is(err, memory.ErrNotFound) {
		c.failed(r, "/forget", err)
		return
	}
	c.say(r.out, fmt.Sprintf("Forgotten: %s", facts[n-1].Text), r.log)
}
