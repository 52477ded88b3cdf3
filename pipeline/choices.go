package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"relaybot/pipeline/history"
	"relaybot/pipeline/quota"
)

// model answers /model: without an argument it lists the models this chat may pick, with
// a name it picks that model for the conversation ("default" goes back to the configured order).
func (c *commands) model(r *request) {
	key, args, out, log := r.key, r.in.Args, r.out, r.log
	ctx, cancel := context.WithTimeout(context.Background(), saveTimeout)
	defer cancel()
	conv, err := c.store.Conversations.Conversation(ctx, key)
	if err != nil {
		c.failed(r, "/model", err, "conversation", key.String())
		return
	}
	names := c.selectableModels()
	current := conv.Model
	if current == "" && len(c.opts.Models.Budgets) > 0 {
		current = c.opts.Models.Budgets[0].Name
	}
	want := strings.TrimSpace(args)
	if want == "" {
		if len(names) == 0 {
			c.say(out, "No model can be picked in this chat.", log)
			return
		}
		list := make([]string, len(names))
		for i, n := range names {
			list[i] = n
			if n == current {
				list[i] += " (current)"
			}
		}
		c.say(out, "Models: "+strings.Join(list, ", ")+". Send /model NAME to pick one for this conversation, /model default for the configured one.", log)
		return
	}
	if want == "default" {
		want = ""
	} else if !slices.Contains(names, want) {
		c.say(out, fmt.Sprintf("There is no model %q to pick here. Send /model to list them.", want), log)
		return
	}
	if err := c.store.Conversations.SetConversationModel(ctx, conv.ID, want); err != nil {
		c.failed(r, "/model", err, "conversation_id", conv.ID)
		return
	}
	log.Info("pipeline: model picked", "conversation_id", conv.ID, "model", want)
	if want == "" {
		c.say(out, "This conversation uses the configured model again.", log)
		return
	}
	c.say(out, "This conversation now uses "+want+".", log)
}

// selectableModels are the configured models /model may pick, in configured order.
func (c *commands) selectableModels() []string {
	var out []string
	for _, m := range c.opts.Models.Budgets {
		if len(c.opts.Models.Selectable) == 0 || slices.Contains(c.opts.Models.Selectable, m.Name) {
			out = append(out, m.Name)
		}
	}
	return out
}

// system answers /system: without an argument it shows the conversation's system prompt;
// an admin sets it with text, or goes back to the configured one with "default".
func (c *commands) system(r *request) {
	in, key, args, out, log := r.in, r.key, r.in.Args, r.out, r.log
	ctx, cancel := context.WithTimeout(context.Background(), saveTimeout)
	defer cancel()
	conv, err := c.store.Conversations.Conversation(ctx, key)
	if err != nil {
		c.failed(r, "/system", err, "conversation", key.String())
		return
	}
	text := strings.TrimSpace(args)
	if text == "" {
		switch {
		case conv.SystemPrompt != "":
			c.say(out, "System prompt of this conversation: "+conv.SystemPrompt, log)
		default:
			c.say(out, "This conversation uses the configured system prompt.", log)
		}
		return
	}
	if !c.access.IsAdmin(in) {
		log.Info("pipeline: /system refused: not an admin")
		c.say(out, "Only an admin can set the system prompt.", log)
		return
	}
	if text == "default" {
		text = ""
	}
	if err := c.store.Conversations.SetConversationSystemPrompt(ctx, conv.ID, text); err != nil {
		c.failed(r, "/system", err, "conversation_id", conv.ID)
		return
	}
	log.Info("pipeline: system prompt set", "conversation_id", conv.ID, "custom", text != "")
	if text == "" {
		c.say(out, "This conversation uses the configured system prompt again.", log)
		return
	}
	c.say(out, "System prompt set for this conversation.", log)
}

// compact answers /compact, in the conversation's turn like a message: every finished round of
// the conversation is summarised now. Its model call is held to the sender's quotas and
// counted against them like a turn's.
func (c *commands) compact(ctx context.Context, r *request) {
	key, out, log := r.key, r.out, r.log
	if text, over := c.quotas.Over(ctx, r.in, nil, log); over {
		log.Info("pipeline: /compact refused: over quota")
		c.say(out, text, log)
		return
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), saveTimeout)
	h, err := c.history.Read(sctx, key)
	cancel()
	if err != nil {
		c.failed(r, "/compact", err, "conversation", key.String())
		return
	}
	m := c.quotas.Meter(r.in, 0, log)
	h.Meter = m.ForSummary()
	h.BeforeCompact = c.learnRounds(r.in, log)
	n := len(h.Rounds)
	err = c.history.Compact(ctx, h, n, log)
	for _, call := range h.Calls {
		log.Info("pipeline: /compact model call", "model", call.Model, "status", call.Status, "tokens_in", call.TokensIn, "tokens_out", call.TokensOut)
	}
	if lost := m.Unsaved(); len(lost) > 0 {
		log.Error("pipeline: /compact model calls not saved", "calls", len(lost))
	}
	q, over := errors.AsType[*quota.Error](err)
	switch {
	case errors.Is(err, history.ErrNothingToCompact):
		c.say(out, "Nothing to summarise yet.", log)
	case over:
		log.Info("pipeline: /compact refused: over quota")
		c.say(out, q.Text, log)
	case err != nil:
		c.failed(r, "/compact", err, "conversation_id", h.Conv.ID)
	default:
		c.say(out, fmt.Sprintf("Summarised %d earlier rounds; the conversation goes on from the summary.", n), log)
	}
}
