package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"relaybot/chat"
	"slices"
	"strings"

	"relaybot/adapters"
)

// modelCommand answers /model: without an argument it lists the models this chat may pick, with
// a name it picks that model for the conversation ("default" goes back to the configured order).
func (p *Pipeline) modelCommand(key chat.Key, args string, out adapters.Responder, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), saveTimeout)
	defer cancel()
	conv, err := p.store.Conversation(ctx, key)
	if err != nil {
		log.Error("pipeline: /model failed", "conversation", key.String(), "err", err)
		p.notice(out, p.failureText(err), log)
		return
	}
	names := p.selectableModels()
	current := conv.Model
	if current == "" && len(p.opts.Models) > 0 {
		current = p.opts.Models[0].Name
	}
	want := strings.TrimSpace(args)
	if want == "" {
		if len(names) == 0 {
			p.notice(out, "No model can be picked in this chat.", log)
			return
		}
		list := make([]string, len(names))
		for i, n := range names {
			list[i] = n
			if n == current {
				list[i] += " (current)"
			}
		}
		p.notice(out, "Models: "+strings.Join(list, ", ")+". Send /model NAME to pick one for this conversation, /model default for the configured one.", log)
		return
	}
	if want == "default" {
		want = ""
	} else if !slices.Contains(names, want) {
		p.notice(out, fmt.Sprintf("There is no model %q to pick here. Send /model to list them.", want), log)
		return
	}
	if err := p.store.SetConversationModel(ctx, conv.ID, want); err != nil {
		log.Error("pipeline: /model failed", "conversation_id", conv.ID, "err", err)
		p.notice(out, p.failureText(err), log)
		return
	}
	log.Info("pipeline: model picked", "conversation_id", conv.ID, "model", want)
	if want == "" {
		p.notice(out, "This conversation uses the configured model again.", log)
		return
	}
	p.notice(out, "This conversation now uses "+want+".", log)
}

// selectableModels are the configured models /model may pick, in configured order.
func (p *Pipeline) selectableModels() []string {
	var out []string
	for _, m := range p.opts.Models {
		if len(p.opts.SelectableModels) == 0 || slices.Contains(p.opts.SelectableModels, m.Name) {
			out = append(out, m.Name)
		}
	}
	return out
}

// systemCommand answers /system: without an argument it shows the conversation's system prompt;
// an admin sets it with text, or goes back to the configured one with "default".
func (p *Pipeline) systemCommand(in adapters.Inbound, key chat.Key, args string, out adapters.Responder, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), saveTimeout)
	defer cancel()
	conv, err := p.store.Conversation(ctx, key)
	if err != nil {
		log.Error("pipeline: /system failed", "conversation", key.String(), "err", err)
		p.notice(out, p.failureText(err), log)
		return
	}
	text := strings.TrimSpace(args)
	if text == "" {
		switch {
		case conv.SystemPrompt != "":
			p.notice(out, "System prompt of this conversation: "+conv.SystemPrompt, log)
		default:
			p.notice(out, "This conversation uses the configured system prompt.", log)
		}
		return
	}
	if !p.access.isAdmin(in) {
		log.Info("pipeline: /system refused: not an admin")
		p.notice(out, "Only an admin can set the system prompt.", log)
		return
	}
	if text == "default" {
		text = ""
	}
	if err := p.store.SetConversationSystemPrompt(ctx, conv.ID, text); err != nil {
		log.Error("pipeline: /system failed", "conversation_id", conv.ID, "err", err)
		p.notice(out, p.failureText(err), log)
		return
	}
	log.Info("pipeline: system prompt set", "conversation_id", conv.ID, "custom", text != "")
	if text == "" {
		p.notice(out, "This conversation uses the configured system prompt again.", log)
		return
	}
	p.notice(out, "System prompt set for this conversation.", log)
}

// compactCommand answers /compact: every finished round of the conversation is summarised now.
// Its model call is held to the sender's quotas and counted against them like a turn's.
func (p *Pipeline) compactCommand(ctx context.Context, key chat.Key, in adapters.Inbound, out adapters.Responder, log *slog.Logger) {
	if text, over := p.overQuota(ctx, in, nil, log); over {
		log.Info("pipeline: /compact refused: over quota")
		p.notice(out, text, log)
		return
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), saveTimeout)
	conv, err := p.store.Conversation(sctx, key)
	var th *turnHistory
	if err == nil {
		th = &turnHistory{conv: conv, meter: p.newMeter(in, 0, log)}
		th.rounds, err = p.store.Rounds(sctx, conv.ID, conv.SummaryTurnID, p.opts.HistoryRounds)
	}
	cancel()
	if err != nil {
		log.Error("pipeline: /compact failed", "conversation", key.String(), "err", err)
		p.notice(out, p.failureText(err), log)
		return
	}
	n := len(th.rounds)
	err = p.compact(ctx, th, n, p.budgetOf(conv.Model), key.UserID == "", log)
	for _, c := range th.calls {
		log.Info("pipeline: /compact model call", "model", c.Model, "status", c.Status, "tokens_in", c.TokensIn, "tokens_out", c.TokensOut)
	}
	if lost := th.meter.unsaved(); len(lost) > 0 {
		log.Error("pipeline: /compact model calls not saved", "calls", len(lost))
	}
	q, over := errors.AsType[*quotaError](err)
	switch {
	case errors.Is(err, errNothingToCompact):
		p.notice(out, "Nothing to summarise yet.", log)
	case over:
		log.Info("pipeline: /compact refused: over quota")
		p.notice(out, q.text, log)
	case err != nil:
		log.Error("pipeline: /compact failed", "conversation_id", conv.ID, "err", err)
		p.notice(out, p.failureText(err), log)
	default:
		p.notice(out, fmt.Sprintf("Summarised %d earlier rounds; the conversation goes on from the summary.", n), log)
	}
}
