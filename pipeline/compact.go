package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"unicode/utf8"

	"relaybot/adapters"
	"relaybot/agent"
	"relaybot/store"
	"relaybot/tools"
)

// CompactedNotice is the line a user sees when older rounds of the conversation were summarised.
const CompactedNotice = "(Earlier messages were summarised to keep this conversation within the model's context window.)"

// summaryInstruction asks the model for the summary that replaces older rounds.
const summaryInstruction = "You write the memory of a chat assistant. Summarise the conversation below so that it can " +
	"go on without the full text: who asked for what, the answers and facts found (tool results " +
	"included), decisions, names, numbers and open questions. Merge the earlier summary in, if " +
	"there is one. Write at most %d words, in the conversation's language, and reply with the " +
	"summary only."

// Caps of what the summariser reads of one message.
const (
	summaryToolChars = 2000
	summaryArgsChars = 300
)

// errNothingToCompact: every round the conversation has fits what compaction would keep.
var errNothingToCompact = errors.New("nothing to summarise yet")

// turnHistory is the history of a turn and what building it cost.
type turnHistory struct {
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

// transcriptFor builds the messages of a turn within the model's budget: the system prompt (with
// the summary of older rounds), whole rounds newest first, and the new message. When the history
// needs more than CompactAt of its room (or force is set), the rounds that do not fit a quarter
// of it (all of them with force) are summarised first.
func (p *Pipeline) transcriptFor(ctx context.Context, th *turnHistory, in adapters.Inbound, specs []tools.Spec, shared, force bool, log *slog.Logger) []agent.Message {
	mb := p.budgetOf(th.conv.Model)
	b := p.budgetFor(mb, th.conv, in, specs, shared)
	limit := b.historyLimit()
	need := chooseHistory(th.rounds, shared, limit, p.opts.ToolResultShare, b.factor, true)
	if force || (p.opts.CompactAt > 0 && float64(need.tokens) > p.opts.CompactAt*float64(limit)) {
		keep := 0
		if !force {
			keep = chooseHistory(th.rounds, shared, limit/4, p.opts.ToolResultShare, b.factor, false).from
			keep = len(th.rounds) - keep
		}
		if err := p.compact(ctx, th, len(th.rounds)-keep, mb, shared, log); err != nil {
			log.Warn("pipeline: history not compacted; older rounds are left out instead", "err", err)
		} else {
			b = p.budgetFor(mb, th.conv, in, specs, shared)
			limit = b.historyLimit()
		}
	}
	sel := chooseHistory(th.rounds, shared, limit, p.opts.ToolResultShare, b.factor, false)
	th.elided = sel.elided
	if sel.from > 0 {
		log.Info("pipeline: older rounds left out to fit the context window", "left_out", sel.from, "window", mb.ContextWindow)
	}
	msgs := make([]agent.Message, 0, len(sel.messages)+2)
	msgs = append(msgs, p.systemMessage(th.conv))
	msgs = append(msgs, sel.messages...)
	msgs = append(msgs, p.userMessage(in, shared))
	th.estimate = estimateMessages(msgs) + estimateTools(specs)
	return msgs
}

// budgetFor measures what a turn of conv spends besides its history.
func (p *Pipeline) budgetFor(mb ModelBudget, conv store.Conversation, in adapters.Inbound, specs []tools.Spec, shared bool) budget {
	factor := p.usage.of(mb.Name)
	fixed := estimateMessage(p.systemMessage(conv)) + estimateMessage(p.userMessage(in, shared)) + estimateTools(specs)
	if len(specs) > 0 && p.opts.ToolResultMaxChars > 0 {
		// Room for one tool result of the turn, at most three quarters of what the answer leaves.
		fixed += min((p.opts.ToolResultMaxChars+3)/4, (mb.ContextWindow-mb.MaxOutputTokens)*3/4)
	}
	return budget{window: mb.ContextWindow, output: mb.MaxOutputTokens, fixed: int(float64(fixed) * factor), factor: factor}
}

// compact summarises the first n rounds of th (with the earlier summary) in one model call and
// stores the summary with the conversation; th then holds the rounds after it.
func (p *Pipeline) compact(ctx context.Context, th *turnHistory, n int, mb ModelBudget, shared bool, log *slog.Logger) error {
	if n <= 0 || n > len(th.rounds) {
		return errNothingToCompact
	}
	words := max(mb.ContextWindow/16, 100)
	instruction := fmt.Sprintf(summaryInstruction, words)
	room := int(float64(mb.ContextWindow-mb.MaxOutputTokens-estimateText(instruction)-64) / p.usage.of(mb.Name))
	text := summaryInput(th.conv.Summary, th.rounds[:n], shared, room)
	req := agent.Request{Model: th.conv.Model, Estimate: p.estimate, Messages: []agent.Message{
		{Role: agent.RoleSystem, Content: instruction},
		{Role: agent.RoleUser, Content: text},
	}}
	if th.meter != nil {
		req.Meter = th.meter.forSummary()
	}
	res := p.runner.Run(ctx, req, nil)
	for _, c := range res.LLMCalls {
		c.Round = 0
		th.calls = append(th.calls, c)
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
	through := th.rounds[n-1].TurnID
	if err := p.store.SaveSummary(ctx, th.conv.ID, summary, through); err != nil {
		return err
	}
	th.conv.Summary, th.conv.SummaryTurnID = summary, through
	th.rounds = th.rounds[n:]
	th.compacted = true
	log.Info("pipeline: older rounds summarised", "rounds", n, "through_turn", through, "summary_chars", utf8.RuneCountInString(summary))
	return nil
}

// summaryInput renders the earlier summary and rounds as text for the summariser, within room
// tokens: the newest messages are kept when they do not all fit, long tool results and
// arguments are cut.
func summaryInput(earlier string, rounds []store.Round, shared bool, room int) string {
	var lines []string
	for _, r := range rounds {
		for _, m := range r.Messages {
			switch m.Role {
			case store.RoleUser:
				lines = append(lines, "User: "+speaker(shared, m.Name, m.Content))
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
	if strings.TrimSpace(earlier) != "" {
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

// cut shortens s to at most n characters, saying how much was left out.
func cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + fmt.Sprintf(" […%d more characters]", len(r)-n)
}
