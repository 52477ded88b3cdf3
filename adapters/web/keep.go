package web

import (
	"context"
	"strings"
	"time"

	"relaybot/adapters"
	"relaybot/adapters/markdown"
	"relaybot/chat"
)

const (
	// keepEvery spaces the writes of a process's changed messages to the store: a streaming
	// answer changes up to 20 times a second, and its changes coalesce meanwhile.
	keepEvery = 250 * time.Millisecond
	// maxKeptFile is the largest file of a bot message the store keeps the bytes of; a larger
	// one is kept by name only.
	maxKeptFile = 4 << 20
	// keepTimeout bounds one write of a conversation's messages.
	keepTimeout = 10 * time.Second
)

// keepChanges writes the messages that changed in this process's conversations to Sessions, so
// that a page shows the same transcript after a restart, until the keeper is told to quit; then
// it writes what is left, a message still streaming included.
func (c *Chat) keepChanges(ctx context.Context) {
	k := c.keep
	defer close(k.done)
	pause := time.NewTimer(0)
	defer pause.Stop()
	for {
		select {
		case <-k.quit:
			c.keepAll(ctx)
			return
		case <-k.wake:
		}
		for _, conv := range k.take() {
			c.keepConversation(ctx, conv, false)
		}
		pause.Reset(keepEvery)
		select {
		case <-k.quit:
		case <-pause.C:
		}
	}
}

// keepAll writes what changed in every conversation, those with changes waiting and those in
// memory, streaming messages included.
func (c *Chat) keepAll(ctx context.Context) {
	seen := map[*conversation]bool{}
	for _, conv := range c.keep.take() {
		seen[conv] = true
		c.keepConversation(ctx, conv, true)
	}
	c.mu.Lock()
	var convs []*conversation
	for _, conv := range c.ids {
		if !seen[conv] {
			convs = append(convs, conv)
		}
	}
	c.mu.Unlock()
	for _, conv := range convs {
		c.keepConversation(ctx, conv, true)
	}
}

// keepConversation writes conv's messages changed since they were last kept. A message still
// streaming is written when it appears and when it is final (or with all, now): its text in
// between is the page's business.
func (c *Chat) keepConversation(ctx context.Context, conv *conversation, all bool) {
	conv.mu.Lock()
	var lines []chat.Line
	for _, m := range conv.msgs {
		if m.rev <= m.kept || m.Stop && m.kept != 0 && !all {
			continue
		}
		m.kept = m.rev
		lines = append(lines, lineOf(m))
	}
	conv.mu.Unlock()
	if len(lines) == 0 {
		return
	}
	kctx, cancel := context.WithTimeout(ctx, keepTimeout)
	defer cancel()
	if err := c.opts.Sessions.KeepWebMessages(kctx, conv.id, lines); err != nil {
		c.log.Warn("web chat: messages not kept; a restart will not show them as they are", "chat", conv.id, "messages", len(lines), "err", err)
	}
}

// lineOf is what the store keeps of m: what the page shows of it, files up to maxKeptFile.
func lineOf(m *message) chat.Line {
	l := chat.Line{ID: m.ID, Pos: m.Pos, FromUser: m.Role == "user", Text: m.Text,
		Question: m.Question != "", Asking: m.Question != "" && (len(m.Choices) > 0 || m.Form != nil)}
	for _, f := range m.Files {
		if len(f.Data) > maxKeptFile {
			f.Data = nil
		}
		l.Files = append(l.Files, f)
	}
	return l
}

// restoredMessage is a message kept in the store as the page will show it again: a bot's
// Markdown rendered, a question as plain text without its buttons (its turn is over; a question
// left open says it closed unanswered), and a file kept without its bytes named in the text.
func restoredMessage(l chat.Line) *message {
	m := &message{ID: l.ID, Pos: l.Pos, Role: "bot", Text: l.Text, stored: true}
	for _, f := range l.Files {
		if f.Data == nil {
			m.Text = strings.TrimSpace(m.Text + "\n📎 " + f.Name + " (too large to keep)")
			continue
		}
		m.Files = append(m.Files, f)
	}
	switch {
	case l.FromUser:
		m.Role = "user"
	case l.Asking:
		m.Text += adapters.ClosedText
	case !l.Question:
		m.HTML = markdown.HTML(m.Text)
	}
	return m
}
