package admin

import (
	"cmp"
	"context"
	"slices"
	"strings"

	"relaybot/audit"
	"relaybot/chat"
	"relaybot/store"
	"relaybot/tools"
)

// longText is the length past which the turn page folds a text.
const longText = 600

// foldable is a text the turn page shows whole when short and folded behind its start when long.
type foldable struct {
	Text  string
	Long  bool
	Start string // the first runes, the fold's summary
}

func fold(text string) foldable {
	f := foldable{Text: text, Long: len(text) > longText}
	if f.Long {
		f.Start = cutLabel(strings.Join(strings.Fields(text), " "), 160)
	}
	return f
}

// toolStep is one tool call of the turn in its own row: what it was asked, what it answered,
// and why it failed.
type toolStep struct {
	audit.Record
	Args, Result foldable
}

// turnStory is what a turn's page tells: what was asked, what the model thought (folded), which
// tools it called with what, what it answered, and what it cost. Every text is redacted as the
// audit log is; the tools' arguments and results are the audit rows', redacted when written.
type turnStory struct {
	Asked     foldable
	Reasoning []foldable
	Answer    foldable
	Tools     []toolStep
	// CachedIn and CacheWriteIn are the prompt tokens the providers' caches served and took;
	// Cost is the model calls' at the configured prices (Priced: some model has a price).
	CachedIn, CacheWriteIn int
	Cost                   float64
	Priced                 bool
	// HasMessages: the turn's messages could be read (a running turn has only its question).
	HasMessages bool
}

// storyOf tells a turn's story from its messages, model calls and audit rows.
func storyOf(msgs []chat.Message, llm []chat.ModelCall, calls []audit.Record, prices map[string]chat.Price) turnStory {
	st := turnStory{HasMessages: len(msgs) > 0}
	for _, m := range msgs {
		switch m.Role {
		case store.RoleUser:
			if st.Asked.Text == "" {
				st.Asked = fold(tools.RedactText(m.Content))
			}
		case store.RoleAssistant:
			if r := strings.TrimSpace(m.Reasoning); r != "" {
				st.Reasoning = append(st.Reasoning, fold(tools.RedactText(r)))
			}
			if strings.TrimSpace(m.Content) != "" {
				st.Answer = fold(tools.RedactText(m.Content)) // the last one is the final answer
			}
		}
	}
	calls = slices.Clone(calls)
	slices.SortStableFunc(calls, func(a, b audit.Record) int {
		return cmp.Or(a.StartedAt.Compare(b.StartedAt), cmp.Compare(a.ID, b.ID))
	})
	for _, c := range calls {
		st.Tools = append(st.Tools, toolStep{Record: c, Args: fold(prettyJSON(c.Arguments)), Result: fold(prettyJSON(c.Result))})
	}
	for _, c := range llm {
		st.CachedIn += c.CachedIn
		st.CacheWriteIn += c.CacheWriteIn
		if p, ok := prices[c.Model]; ok {
			st.Priced = true
			st.Cost += p.Bill(int64(c.TokensIn), int64(c.CachedIn), int64(c.CacheWriteIn), int64(c.TokensOut))
		}
	}
	return st
}

// turnStoryOf reads what storyOf needs beyond the timeline: the turn's messages (a failure to
// read them is logged, and the page shows the rest).
func (s *Server) turnStoryOf(ctx context.Context, tl store.Timeline, calls []audit.Record) turnStory {
	msgs, err := s.opts.Store.Messages.TurnMessages(ctx, tl.Turn.ID)
	if err != nil {
		s.log.Warn("admin: read messages of turn", "turn", tl.Turn.ID, "err", err)
	}
	return storyOf(msgs, tl.LLMCalls, calls, s.prices())
}
