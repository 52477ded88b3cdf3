package pipeline

import (
	"context"
	"slices"

	"relaybot/chat"
	"relaybot/pipeline/history"
	"relaybot/pipeline/knowledge"
)

// withKnowledge returns msgs with the chunks of the "auto" knowledge bases that serve the chat
// in one system message right before the new user message (after the remembered facts): the
// system prompt and the history before it stay the prefix a provider caches (decision 049).
// The chunks are looked up once a turn, by the user's message.
func (t *turn) withKnowledge(msgs []chat.Message) []chat.Message {
	k := t.parts.opts.Knowledge
	if k == nil || len(msgs) == 0 {
		return msgs
	}
	last := len(msgs) - 1
	if !t.looked {
		t.looked = true
		ctx, cancel := context.WithTimeout(t.ctx, recallTimeout)
		block, hits, err := k.Recall(ctx, t.in.RuleChats(), msgs[last].Content, history.EstimateText, t.meter)
		cancel()
		if err != nil {
			t.log.Warn("pipeline: knowledge not recalled", "err", err)
		}
		if len(hits) > 0 {
			t.log.Info("pipeline: knowledge put into the turn", "chunks", len(hits))
		}
		t.known, t.knownSources = block, knowledge.Sources(hits)
	}
	if t.known == "" {
		return msgs
	}
	t.hist.Estimate += history.EstimateText(t.known)
	return slices.Insert(slices.Clone(msgs), last, chat.Message{Role: chat.RoleSystem, Content: t.known})
}
