package web

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"relaybot/adapters"
	"relaybot/chat"
)

// Relay carries a chat's live events between replicas (coord.WebRelay), so that every open
// page of a chat sees a turn whichever replica runs it. Events are JSON. With no Relay (a single
// process) a chat's pages are all in this process.
type Relay interface {
	// Watch says this process has a page of chatID open (its event stream is connected) until
	// unwatch is called.
	Watch(ctx context.Context, chatID string) (unwatch func(), err error)
	// Publish sends event to the other replicas with a page of chatID open; it should cost
	// nothing noticeable when there are none.
	Publish(ctx context.Context, chatID string, event []byte) error
	// Listen calls fn with the events other replicas publish for the chats this process has a
	// page of open, in the order sent, until ctx ends; with a nil event
	// when another replica opens a page of a chat. fn must not block.
	Listen(ctx context.Context, fn func(chatID string, event []byte)) error
}

// relayEvent is one change of a chat, as the replicas send it to each other.
type relayEvent struct {
	// Msg is a message's whole state, new or changed.
	Msg *relayMessage `json:"m,omitempty"`
	// Again marks a message sent once more because a page opened elsewhere: that page may show
	// it already, loaded from the store under another id.
	Again bool `json:"again,omitempty"`
	// TypingMS shows the typing indicator for that long.
	TypingMS int64 `json:"typing,omitempty"`
}

type relayMessage struct {
	ID       string            `json:"id"`
	Role     string            `json:"role"`
	Text     string            `json:"text"`
	HTML     string            `json:"html,omitempty"`
	Files    []chat.File       `json:"files,omitempty"`
	Stop     bool              `json:"stop,omitempty"`
	Question string            `json:"question,omitempty"`
	Choices  []adapters.Choice `json:"choices,omitempty"`
	Form     *adapters.Form    `json:"form,omitempty"`
	Pos      int64             `json:"pos,omitempty"`
}

// outbox holds the conversations changed since their changes were last published. Changes that
// pile up while the database is slow coalesce: each event carries a message's whole state.
type outbox struct {
	mu    sync.Mutex
	dirty map[*conversation]struct{}
	wake  chan struct{}
	done  chan struct{} // closed when the publisher has sent the last changes and returned
	quit  chan struct{} // closed to make the publisher send what is left and return
}

func newOutbox() *outbox {
	return &outbox{dirty: map[*conversation]struct{}{}, wake: make(chan struct{}, 1), done: make(chan struct{}), quit: make(chan struct{})}
}

// mark notes that conv changed; conv.mu may be held.
func (o *outbox) mark(conv *conversation) {
	o.mu.Lock()
	o.dirty[conv] = struct{}{}
	o.mu.Unlock()
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

func (o *outbox) take() []*conversation {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make([]*conversation, 0, len(o.dirty))
	for conv := range o.dirty {
		out = append(out, conv)
	}
	clear(o.dirty)
	return out
}

// publishChanges sends the changes of this process's conversations to the other replicas, one
// conversation's changes in order, until the outbox is told to quit; then it sends what is left.
func (c *Chat) publishChanges(ctx context.Context) {
	o := c.out
	defer close(o.done)
	for {
		select {
		case <-o.wake:
		case <-o.quit:
			for _, conv := range o.take() {
				c.publishConversation(ctx, conv)
			}
			return
		}
		for _, conv := range o.take() {
			c.publishConversation(ctx, conv)
		}
	}
}

// publishConversation publishes what changed in conv here since its last publication: the
// messages whose revision moved (changes taken from other replicas count as published) and
// the typing indicator.
func (c *Chat) publishConversation(ctx context.Context, conv *conversation) {
	var events []relayEvent
	conv.mu.Lock()
	for _, m := range conv.msgs {
		if m.rev <= m.pub {
			continue
		}
		m.pub = m.rev
		events = append(events, relayEvent{Again: m.again, Msg: &relayMessage{ID: m.ID, Role: m.Role, Text: m.Text, HTML: m.HTML,
			Files: m.Files, Stop: m.Stop, Question: m.Question, Choices: m.Choices, Form: m.Form, Pos: m.Pos}})
		m.again = false
	}
	if conv.typingRv > conv.typingPub {
		conv.typingPub = conv.typingRv
		if left := conv.typing.Sub(c.now()); left > 0 {
			events = append(events, relayEvent{TypingMS: left.Milliseconds()})
		}
	}
	conv.mu.Unlock()
	for _, ev := range events {
		b, err := json.Marshal(ev)
		if err == nil {
			pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err = c.opts.Relay.Publish(pctx, conv.id, b)
			cancel()
		}
		if err != nil {
			c.log.Warn("web chat: change not sent to the other replicas", "chat", conv.id, "err", err)
		}
	}
}

// fromRelay applies an event another replica sent (see Relay.Listen).
func (c *Chat) fromRelay(chatID string, event []byte) {
	conv := c.byID(chatID)
	if event == nil {
		if conv != nil {
			conv.sendRunningAgain()
		}
		return
	}
	var ev relayEvent
	if err := json.Unmarshal(event, &ev); err != nil {
		c.log.Warn("web chat: undecodable event from another replica skipped", "chat", chatID, "err", err)
		return
	}
	if conv == nil {
		return
	}
	conv.mu.Lock()
	defer conv.mu.Unlock()
	if ev.Msg != nil {
		conv.applyLocked(ev.Msg, ev.Again)
	}
	if ev.TypingMS > 0 {
		conv.typing = c.now().Add(time.Duration(ev.TypingMS) * time.Millisecond)
		conv.rev++
		conv.typingRv, conv.typingPub = conv.rev, conv.rev
		conv.notifyLocked()
	}
}

// applyLocked shows a message another replica sent: a change of one shown, or a new one. A
// message sent again after a page opened (again) whose text this process loaded from the store
// under an id of its own is taken to be that one. c.mu must be held.
func (c *conversation) applyLocked(rm *relayMessage, again bool) {
	id := rm.ID
	if local, ok := c.aliases[id]; ok {
		id = local
	}
	m := c.find(id)
	if m == nil && again {
		m = c.adoptLocked(rm)
	}
	if m == nil {
		c.rev++
		m = &message{ID: rm.ID, rev: c.rev}
		c.appendLocked(m)
	} else if m.Text == rm.Text && m.HTML == rm.HTML && m.Stop == rm.Stop && m.Question == rm.Question && m.Pos == rm.Pos &&
		len(m.Choices) == len(rm.Choices) && len(m.Files) == len(rm.Files) && (m.Form == nil) == (rm.Form == nil) {
		return
	} else {
		c.rev++
		m.rev = c.rev
	}
	m.Role, m.Text, m.HTML, m.Files, m.Stop = rm.Role, rm.Text, rm.HTML, rm.Files, rm.Stop
	m.Question, m.Choices, m.Form = rm.Question, rm.Choices, rm.Form
	if rm.Pos != 0 {
		m.Pos = rm.Pos
		c.lastPos = max(c.lastPos, m.Pos)
	}
	m.pub = m.rev  // another replica's change: not sent on again from here,
	m.kept = m.rev // and kept in the store by that replica
	c.notifyLocked()
}

// adoptLocked finds among the last messages one loaded from the store with rm's role and text
// and not yet taken for another replica's, and takes it for rm. c.mu must be held.
func (c *conversation) adoptLocked(rm *relayMessage) *message {
	for i := len(c.msgs) - 1; i >= 0 && i >= len(c.msgs)-8; i-- {
		m := c.msgs[i]
		if !m.stored || m.Role != rm.Role || m.Text != rm.Text {
			continue
		}
		if c.aliases == nil {
			c.aliases = map[string]string{}
		}
		m.stored = false
		c.aliases[rm.ID] = m.ID
		return m
	}
	return nil
}

// sendRunningAgain publishes again the messages of the turns running here, from the last user
// message on, for a page another replica just opened: it may have missed them.
func (c *conversation) sendRunningAgain() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.running == 0 || c.out == nil {
		return
	}
	from := -1
	for i := len(c.msgs) - 1; i >= 0; i-- {
		if c.msgs[i].Role == "user" {
			from = i
			break
		}
	}
	if from < 0 {
		return
	}
	for _, m := range c.msgs[from:] {
		m.pub, m.again = 0, true
	}
	c.out.mark(c)
}
