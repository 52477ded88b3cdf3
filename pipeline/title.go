package pipeline

import (
	"context"
	"strings"

	"relaybot/adapters"
	"relaybot/agent"
	"relaybot/chat"
	"relaybot/internal/ellipsis"
	"relaybot/store"
)

// titleInstruction asks the model for the title of a thread or topic the bot opened.
const titleInstruction = "Give the conversation below a title of at most six words, in its language, " +
	"that says what it is about. Reply with the title only: no quotes, no trailing punctuation."

// Caps of what the title's model call reads of the question and of the answer, in characters.
const (
	titleQuestionChars = 1000
	titleAnswerChars   = 1000
	maxTitleChars      = 100
)

// title renames the thread or topic the turn's message titles (Inbound.TitlesThread) to a short
// title the model gives, once, after the answer is delivered: one short completion on the
// default model, metered and saved with the turn's other model calls (round 0, as compaction's),
// its tokens counted in the turn's usage. A failure is logged and the thread keeps the name of
// the question.
func (t *turn) title(res *agent.Result, status chat.Status) {
	titler, ok := t.r.out.(adapters.ThreadTitler)
	if !ok || !t.in.TitlesThread || status != store.TurnOK || !titler.ThreadOpened() || t.ctx.Err() != nil {
		return
	}
	answer := lastAnswer(res.Messages)
	if strings.TrimSpace(answer) == "" {
		return
	}
	input := "Question: " + ellipsis.Cut(t.in.Text, titleQuestionChars) + "\n\nAnswer: " + ellipsis.Cut(answer, titleAnswerChars)
	req := agent.Request{Estimate: t.parts.history.Estimate, Meter: t.meter.ForSummary(), Messages: []chat.Message{
		{Role: chat.RoleSystem, Content: titleInstruction},
		{Role: chat.RoleUser, Content: input},
	}}
	tr := t.parts.runner.Run(t.ctx, req, nil)
	res.Usage.TokensIn += tr.Usage.TokensIn
	res.Usage.TokensOut += tr.Usage.TokensOut
	if tr.Status != chat.StatusOK {
		t.log.Warn("pipeline: no title for the conversation's thread: the model call failed", "err", tr.Err)
		return
	}
	name := cleanTitle(lastAnswer(tr.Messages))
	if name == "" {
		t.log.Warn("pipeline: no title for the conversation's thread: the model gave none")
		return
	}
	ctx, cancel := context.WithTimeout(t.ctx, saveTimeout)
	defer cancel()
	if err := titler.TitleThread(ctx, name); err != nil {
		t.log.Warn("pipeline: the conversation's thread keeps the question's name", "err", err)
		return
	}
	t.log.Info("pipeline: conversation's thread titled", "title", name)
}

// cleanTitle is the first line of what the model gave, without the quotes, markup and trailing
// full stop models add, within the platforms' longest thread name.
func cleanTitle(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	s = strings.TrimSpace(strings.Trim(strings.TrimSpace(s), "\"'`*_#“”«»"))
	s = strings.TrimRight(s, ".。")
	s = strings.TrimPrefix(s, "Title: ")
	return ellipsis.Cut(strings.Join(strings.Fields(s), " "), maxTitleChars)
}
