package pipeline

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"unicode/utf8"

	"relaybot/adapters"
	"relaybot/agent"
	"relaybot/audit"
	"relaybot/chat"
	"relaybot/store"
	"relaybot/tools"
)

// history is what a turn of one conversation is given of its past, and what building it cost.
// It holds the conversation's key: whether a group shares the conversation, and so whether user
// messages carry their sender's name for the model, follows from the key alone.
type history struct {
	key    chat.Key
	conv   store.Conversation
	rounds []store.Round
	// calls are the model calls compaction made (Round 0).
	calls []agent.LLMCall
	// compacted reports that a summary replaced older rounds.
	compacted bool
	elided    int
	// estimate is the corrected token estimate of the transcript built, tools included.
	estimate int
	// meter accounts for the model calls of the turn (compaction's among them); nil: none.
	meter *meter
}

// shared reports whether the members of a group share the conversation (its key names no user).
func (h *history) shared() bool { return h.key.UserID == "" }

// speaker prefixes a group member's message with their name.
func (h *history) speaker(name, text string) string {
	if !h.shared() || name == "" {
		return text
	}
	return "[" + name + "] " + text
}

// toAgent converts stored history into transcript messages. In a conversation shared by a
// group, user messages carry their sender's name in the text, so the model knows who said what
// (the name field of the API cannot hold arbitrary names). Images are not stored: a message that
// had some says so.
func (h *history) toAgent(ms []store.Message) []agent.Message {
	out := make([]agent.Message, 0, len(ms))
	for _, m := range ms {
		am := agent.Message{
			Role:             m.Role,
			Content:          m.Content,
			ToolCallID:       m.ToolCallID,
			ReasoningContent: m.Reasoning,
			ReasoningField:   m.ReasoningField,
		}
		am.Extra = rawOrNil(m.Extra)
		if m.Role == store.RoleUser {
			am.Content = h.speaker(m.Name, m.Content)
			if m.Images > 0 {
				am.Content = imagesNote(m.Images) + am.Content
			}
		}
		for _, c := range m.ToolCalls {
			am.ToolCalls = append(am.ToolCalls, agent.ToolCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments, Extra: rawOrNil(c.Extra)})
		}
		out = append(out, am)
	}
	return out
}

// choose picks rounds newest first, whole rounds only, while they fit limit tokens; tool
// results beyond toolShare of limit (counted newest first) are replaced by an elision note.
// With all set, every round is taken whatever limit says (to measure what a turn would need).
func (h *history) choose(limit int, toolShare, factor float64, all bool) selection {
	rounds := h.rounds
	sel := selection{from: len(rounds)}
	toolRoom := int(float64(limit) * toolShare)
	toolUsed := 0
	var picked [][]agent.Message
	for i := len(rounds) - 1; i >= 0; i-- {
		ms := h.toAgent(rounds[i].Messages)
		cost := 0
		for j, m := range ms {
			t := int(float64(estimateMessage(m)) * factor)
			if m.Role == agent.RoleTool {
				if toolUsed+t > toolRoom {
					ms[j].Content = elisionNote(toolName(rounds[i].Messages, m.ToolCallID), utf8.RuneCountInString(m.Content))
					sel.elided++
					t = int(float64(estimateMessage(ms[j])) * factor)
				} else {
					toolUsed += t
				}
			}
			cost += t
		}
		if !all && sel.tokens+cost > limit {
			break
		}
		sel.tokens += cost
		sel.from = i
		picked = append(picked, ms)
	}
	for i := len(picked) - 1; i >= 0; i-- {
		sel.messages = append(sel.messages, picked[i]...)
	}
	return sel
}

// summaryInput renders the earlier summary and the first n rounds as text for the summariser,
// within room tokens: the newest messages are kept when they do not all fit, long tool results
// and arguments are cut.
func (h *history) summaryInput(n, room int) string {
	var lines []string
	for _, r := range h.rounds[:n] {
		for _, m := range r.Messages {
			switch m.Role {
			case store.RoleUser:
				lines = append(lines, "User: "+h.speaker(m.Name, m.Content))
			case store.RoleAssistant:
				if strings.TrimSpace(m.Content) != "" {
					lines = append(lines, "Assistant: "+m.Content)
				}
				for _, c := range m.ToolCalls {
					lines = append(lines, fmt.Sprintf("Assistant called %s(%s)", c.Name, cut(c.Arguments, summaryArgsChars)))
				}
			case store.RoleTool:
				lines = append(lines, fmt.Sprintf("Result of %s: %s", m.Name, cut(m.Content, summaryToolChars)))
			}
		}
	}
	head := ""
	if earlier := h.conv.Summary; strings.TrimSpace(earlier) != "" {
		head = "Earlier summary:\n" + earlier + "\n\n"
	}
	room -= estimateText(head)
	start := len(lines)
	for start > 0 && room-estimateText(lines[start-1])-1 >= 0 {
		room -= estimateText(lines[start-1]) + 1
		start--
	}
	body := strings.Join(lines[start:], "\n")
	if start > 0 {
		body = fmt.Sprintf("[%d older lines left out]\n", start) + body
	}
	return head + "Conversation:\n" + body
}

// memory gives each turn its history: it reads it from the store, keeps it within the model's
// budget (estimating tokens, corrected by what the providers report, and summarising older
// rounds when they grow past CompactAt of it), and converts it for the model.
type memory struct {
	runner Runner
	store  Store
	opts   *Options
	// usage corrects the token estimate by what providers report.
	usage *usageCorrection
}

// read returns the conversation of key with the rounds after its summary.
func (m *memory) read(ctx context.Context, key chat.Key) (*history, error) {
	conv, err := m.store.Conversations.Conversation(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("conversation %s: %w", key, err)
	}
	return m.rounds(ctx, &history{key: key, conv: conv})
}

// rounds reads the rounds after h's summary, up to HistoryOptions.Rounds.
func (m *memory) rounds(ctx context.Context, h *history) (*history, error) {
	if m.opts.History.Rounds <= 0 {
		return h, nil
	}
	var err error
	if h.rounds, err = m.store.Messages.Rounds(ctx, h.conv.ID, h.conv.SummaryTurnID, m.opts.History.Rounds); err != nil {
		return nil, fmt.Errorf("history of conversation %d: %w", h.conv.ID, err)
	}
	return h, nil
}

// resetIfIdle starts a fresh conversation when h's last round is older than IdleReset.
func (m *memory) resetIfIdle(ctx context.Context, h *history) error {
	idle := m.opts.History.IdleReset
	if idle <= 0 || len(h.rounds) == 0 || m.opts.Now().Sub(h.rounds[len(h.rounds)-1].StartedAt) <= idle {
		return nil
	}
	conv, err := m.store.Conversations.ResetConversation(ctx, h.key)
	if err != nil {
		return fmt.Errorf("idle reset of conversation %d: %w", h.conv.ID, err)
	}
	h.conv, h.rounds = conv, nil
	return nil
}

// transcript builds the messages of a turn within the model's budget: the system prompt (with
// the summary of older rounds), whole rounds newest first, and the new message. When the history
// needs more than CompactAt of its room (or force is set), the rounds that do not fit a quarter
// of it (all of them with force) are summarised first.
func (m *memory) transcript(ctx context.Context, h *history, in adapters.Inbound, specs []tools.Spec, force bool, log *slog.Logger) []agent.Message {
	mb := m.budgetOf(h.conv.Model)
	b := m.budget(mb, h, in, specs)
	limit := b.historyLimit()
	share, at := m.opts.History.ToolResultShare, m.opts.History.CompactAt
	need := h.choose(limit, share, b.factor, true)
	if force || (at > 0 && float64(need.tokens) > at*float64(limit)) {
		keep := 0
		if !force {
			keep = len(h.rounds) - h.choose(limit/4, share, b.factor, false).from
		}
		if err := m.compact(ctx, h, len(h.rounds)-keep, log); err != nil {
			log.Warn("pipeline: history not compacted; older rounds are left out instead", "err", err)
		} else {
			b = m.budget(mb, h, in, specs)
			limit = b.historyLimit()
		}
	}
	sel := h.choose(limit, share, b.factor, false)
	h.elided = sel.elided
	if sel.from > 0 {
		log.Info("pipeline: older rounds left out to fit the context window", "left_out", sel.from, "window", mb.ContextWindow)
	}
	msgs := make([]agent.Message, 0, len(sel.messages)+2)
	msgs = append(msgs, m.systemMessage(h.conv))
	msgs = append(msgs, sel.messages...)
	msgs = append(msgs, m.userMessage(h, in))
	h.estimate = estimateMessages(msgs) + estimateTools(specs)
	return msgs
}

// budget measures what a turn of h spends besides its history.
func (m *memory) budget(mb ModelBudget, h *history, in adapters.Inbound, specs []tools.Spec) budget {
	factor := m.usage.of(mb.Name)
	fixed := estimateMessage(m.systemMessage(h.conv)) + estimateMessage(m.userMessage(h, in)) + estimateTools(specs)
	if maxChars := m.opts.History.ToolResultMaxChars; len(specs) > 0 && maxChars > 0 {
		// Room for one tool result of the turn, at most three quarters of what the answer leaves.
		fixed += min((maxChars+3)/4, (mb.ContextWindow-mb.MaxOutputTokens)*3/4)
	}
	return budget{window: mb.ContextWindow, output: mb.MaxOutputTokens, fixed: int(float64(fixed) * factor), factor: factor}
}

// budgetOf returns the budget of a model by its configured name; the first configured model's
// when name is empty or unknown.
func (m *memory) budgetOf(name string) ModelBudget {
	models := m.opts.Models.Budgets
	for _, mb := range models {
		if mb.Name == name {
			return mb
		}
	}
	if len(models) > 0 {
		return models[0]
	}
	return ModelBudget{ContextWindow: DefaultContextWindow, MaxOutputTokens: DefaultContextWindow / 4}
}

// compact summarises the first n rounds of h (with the earlier summary) in one model call and
// stores the summary with the conversation; h then holds the rounds after it.
func (m *memory) compact(ctx context.Context, h *history, n int, log *slog.Logger) error {
	if n <= 0 || n > len(h.rounds) {
		return errNothingToCompact
	}
	mb := m.budgetOf(h.conv.Model)
	words := max(mb.ContextWindow/16, 100)
	instruction := fmt.Sprintf(summaryInstruction, words)
	room := int(float64(mb.ContextWindow-mb.MaxOutputTokens-estimateText(instruction)-64) / m.usage.of(mb.Name))
	req := agent.Request{Model: h.conv.Model, Estimate: m.estimate, Messages: []agent.Message{
		{Role: agent.RoleSystem, Content: instruction},
		{Role: agent.RoleUser, Content: h.summaryInput(n, room)},
	}}
	if h.meter != nil {
		req.Meter = h.meter.forSummary()
	}
	res := m.runner.Run(ctx, req, nil)
	for _, c := range res.LLMCalls {
		c.Round = 0
		h.calls = append(h.calls, c)
	}
	if res.Status != agent.StatusOK {
		return fmt.Errorf("summary of %d rounds: %w", n, res.Err)
	}
	summary := ""
	if len(res.Messages) > 0 {
		summary = strings.TrimSpace(res.Messages[len(res.Messages)-1].Content)
	}
	if summary == "" {
		return fmt.Errorf("summary of %d rounds: the model answered with no text", n)
	}
	through := h.rounds[n-1].TurnID
	if err := m.store.Conversations.SaveSummary(ctx, h.conv.ID, summary, through); err != nil {
		return err
	}
	h.conv.Summary, h.conv.SummaryTurnID = summary, through
	h.rounds = h.rounds[n:]
	h.compacted = true
	log.Info("pipeline: older rounds summarised", "rounds", n, "through_turn", through, "summary_chars", utf8.RuneCountInString(summary))
	return nil
}

// systemMessage is the system prompt of a conversation's turn: its own prompt (/system) or the
// configured one, the extra text, the date, and the summary of older rounds.
func (m *memory) systemMessage(conv store.Conversation) agent.Message {
	prompt := m.opts.History.SystemPrompt
	if strings.TrimSpace(conv.SystemPrompt) != "" {
		prompt = conv.SystemPrompt
	}
	if m.opts.SystemPromptExtra != nil {
		if extra := strings.TrimSpace(m.opts.SystemPromptExtra()); extra != "" {
			prompt = strings.TrimSpace(prompt + "\n\n" + extra)
		}
	}
	now := m.opts.Now().UTC()
	prompt = strings.TrimSpace(prompt + "\n\n" + fmt.Sprintf("Current date: %s (%s), UTC.", now.Format("2006-01-02"), now.Weekday()))
	return agent.Message{Role: agent.RoleSystem, Content: withSummary(prompt, conv.Summary)}
}

// userMessage is the new message of a turn of h.
func (m *memory) userMessage(h *history, in adapters.Inbound) agent.Message {
	return agent.Message{
		Role:    agent.RoleUser,
		Content: h.speaker(in.UserName, in.Text),
		Images:  m.images(in),
	}
}

// images returns the user's images that fit MaxImageBytes.
func (m *memory) images(in adapters.Inbound) []agent.Image {
	var out []agent.Image
	for _, im := range in.Images {
		if limit := m.opts.History.MaxImageBytes; limit > 0 && len(im.Data) > limit {
			continue
		}
		out = append(out, agent.Image{MIME: im.MIME, Data: im.Data})
	}
	return out
}

// CutCalls reads the audit rows of the tool calls that finished in a cut turn, so that a
// message answered again does not run them again.
type CutCalls interface {
	ToolCalls(ctx context.Context, f audit.Filter) ([]audit.Record, string, error)
}

// finishedCalls returns the tool calls that finished (ok or error) in the cut turn turnID as
// the transcript has them: per round, the assistant's message asking for them and a tool
// message with each one's result (the audit row's, redacted and capped). A call that never
// finished (running, interrupted, cancelled, denied, timed out) is left out: it may not have
// happened, so the model may ask for it again.
func finishedCalls(ctx context.Context, st CutCalls, turnID int64) ([]agent.Message, error) {
	recs, _, err := st.ToolCalls(ctx, audit.Filter{TurnID: turnID, Statuses: []audit.Status{audit.StatusOK, audit.StatusError},
		Order: audit.Newest, Limit: audit.MaxLimit})
	if err != nil {
		return nil, fmt.Errorf("the finished tool calls of turn %d: %w", turnID, err)
	}
	slices.SortFunc(recs, func(a, b audit.Record) int { return cmp.Or(cmp.Compare(a.Round, b.Round), cmp.Compare(a.ID, b.ID)) })
	var out []agent.Message
	for i := 0; i < len(recs); {
		j := i
		ask := agent.Message{Role: agent.RoleAssistant}
		var results []agent.Message
		for ; j < len(recs) && recs[j].Round == recs[i].Round; j++ {
			r := recs[j]
			ask.ToolCalls = append(ask.ToolCalls, agent.ToolCall{ID: r.ToolCallID, Name: r.ToolName, Arguments: r.Arguments})
			content := r.Result
			if r.Status == audit.StatusError && content == "" {
				content = "error: " + r.Error
			}
			results = append(results, agent.Message{Role: agent.RoleTool, Content: content, ToolCallID: r.ToolCallID})
		}
		out = append(append(out, ask), results...)
		i = j
	}
	return out, nil
}
