package pipeline

import (
	"context"
	"slices"

	"relaybot/chat"
	"relaybot/pipeline/history"
)

// AttachedResources gives the resources an admin attached to a chat (MCP resources, read from
// their servers now) as one block of data for a turn there; "" when none is attached. refs are
// the chat as its rules see it, most specific first. It reads within ctx and never fails: a
// resource that cannot be read is named in the block.
type AttachedResources interface {
	AttachedContext(ctx context.Context, refs []chat.Ref) string
}

// withAttached returns msgs with the chat's attached resources in one system message right
// before the new user message (with the knowledge and the remembered facts after the history,
// so the prefix a provider caches stays: decision 049). They are read once a turn.
func (t *turn) withAttached(msgs []chat.Message) []chat.Message {
	a := t.parts.opts.Resources
	if a == nil || len(msgs) == 0 {
		return msgs
	}
	if !t.attachedRead {
		t.attachedRead = true
		ctx, cancel := context.WithTimeout(t.ctx, recallTimeout)
		t.attached = a.AttachedContext(ctx, t.in.RuleChats())
		cancel()
		if t.attached != "" {
			t.log.Info("pipeline: attached resources put into the turn", "chars", len(t.attached))
		}
	}
	if t.attached == "" {
		return msgs
	}
	last := len(msgs) - 1
	t.hist.Estimate += history.EstimateText(t.attached)
	return slices.Insert(slices.Clone(msgs), last, chat.Message{Role: chat.RoleSystem, Content: t.attached})
}
