package web

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"relaybot/adapters"
	"relaybot/adapters/markdown"
	"relaybot/chat"
)

// Limits are the web chat's length and pacing rules: a browser takes long messages, and an
// edit costs no platform budget (it changes the conversation in memory and wakes the page's
// event stream), so previews have no rate: each goes once the one before it is applied, and a
// page that reads slower than the answer grows gets everything new in one event (the stream
// sends the conversation's changes since it last wrote, not one event per edit).
func Limits() adapters.Limits {
	return adapters.Limits{MaxLen: 32000, Unit: adapters.Runes}
}

const (
	// maxMessages is how many messages a conversation keeps for reloads of the page.
	maxMessages = 200
	// maxConversations caps the browser conversations held in memory; the least recently used
	// one is dropped first.
	maxConversations = 256
	// typingFor is how long one Typing call shows the indicator.
	typingFor = 5 * time.Second
)

// message is one message shown in the web chat.
type message struct {
	ID    string
	Role  string // "user" or "bot"
	Text  string
	HTML  string // a bot message's Markdown rendered and sanitised; empty for the user's
	Files []chat.File
	rev   uint64 // conversation revision of the last change
	// Question and Choices are set on an open approval question: its id and buttons.
	Question string
	Choices  []adapters.Choice
	// Form is set on an open question that is a form (AskForm): its fields, shown with Submit
	// and Decline.
	Form *adapters.Form
	// Stop: the message is still streaming and shows a Stop button, which posts /stop.
	Stop bool
	// pub is the revision last sent to the other replicas (Relay); again marks it for sending
	// once more to a page opened elsewhere; stored says it was loaded from the store.
	pub    uint64
	again  bool
	stored bool
	// Pos orders the chat's messages in the store (chat.Line.Pos); kept is the revision last
	// written there (Sessions), or the revision it had when read from there or taken from
	// another replica, which keeps it itself.
	Pos  int64
	kept uint64
}

// conversation is one browser's chat: its messages and the streams watching them.
type conversation struct {
	id     string // public chat id, the chat.Ref.ChatID of its messages
	secret string // the cookie value that selects it
	csrf   string // token the page sends with every post

	mu       sync.Mutex
	msgs     []*message
	nextID   int
	rev      uint64
	typing   time.Time // the indicator shows until then
	typingRv uint64    // revision of the last typing change
	used     time.Time
	watchers map[chan struct{}]struct{}
	// questions are the open approval questions, by id (Ask).
	questions map[string]*question
	// running counts the turns of this conversation running in this process; stored is how
	// far the store had its chat when msgs last matched it.
	running int
	stored  storedMark
	// tag makes this process's message ids differ from other replicas' (Relay); out, when set,
	// publishes the conversation's changes to them; typingPub is the typing revision last sent;
	// aliases maps ids of other replicas' messages to the ids this process loaded them under.
	tag       string
	out       *outbox
	typingPub uint64
	aliases   map[string]string
	// keep, when set, writes the conversation's changed messages to Sessions; lastPos is the
	// Pos of its newest message; now is the chat's clock.
	keep    *outbox
	lastPos int64
	now     func() time.Time
}

// idle reports whether no page of c is open here and no turn of it runs here.
func (c *conversation) idle() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.running == 0 && len(c.watchers) == 0
}

// notifyLocked wakes every stream watching the conversation, and its publisher to the other
// replicas. c.mu must be held.
func (c *conversation) notifyLocked() {
	if c.out != nil {
		c.out.mark(c)
	}
	if c.keep != nil {
		c.keep.mark(c)
	}
	for ch := range c.watchers {
		select {
		case ch <- struct{}{}:
		default: // a wake-up is already pending; the stream sends everything new at once
		}
	}
}

// add appends a message and returns it. c.mu must be held.
func (c *conversation) addLocked(role, text string, files []chat.File) *message {
	c.nextID++
	c.rev++
	m := &message{ID: "m" + c.tag + strconv.Itoa(c.nextID), Role: role, Text: text, Files: files, rev: c.rev, Pos: c.nextPosLocked()}
	c.appendLocked(m)
	c.notifyLocked()
	return m
}

// appendLocked adds m after the conversation's messages, dropping the oldest beyond
// maxMessages. c.mu must be held.
func (c *conversation) appendLocked(m *message) {
	c.msgs = append(c.msgs, m)
	if len(c.msgs) > maxMessages {
		c.msgs = append(c.msgs[:0:0], c.msgs[len(c.msgs)-maxMessages:]...)
	}
}

// nextPosLocked is the Pos of a message appearing now: the time in microseconds, or one more
// than the last message's when the clock has not moved past it. c.mu must be held.
func (c *conversation) nextPosLocked() int64 {
	p := c.now().UnixMicro()
	if p <= c.lastPos {
		p = c.lastPos + 1
	}
	c.lastPos = p
	return p
}

func (c *conversation) find(id string) *message {
	for _, m := range c.msgs {
		if m.ID == id {
			return m
		}
	}
	return nil
}

// messenger delivers the bot's messages to the browser conversations: adapters.Messenger for
// the web. Each call changes the conversation's state and wakes its event streams.
type messenger struct {
	chat *Chat
}

func (m messenger) conversation(ref chat.Ref) (*conversation, error) {
	if ref.Platform != chat.Web {
		return nil, fmt.Errorf("web chat cannot deliver to %s: %w", ref, adapters.ErrMessageGone)
	}
	c := m.chat.byID(ref.ChatID)
	if c == nil {
		return nil, fmt.Errorf("web chat %s is closed: %w", ref.ChatID, adapters.ErrMessageGone)
	}
	return c, nil
}

// Send shows a new bot message.
func (m messenger) Send(ctx context.Context, chat chat.Ref, text string, opts adapters.SendOptions) (adapters.MessageRef, error) {
	if err := ctx.Err(); err != nil {
		return adapters.MessageRef{}, fmt.Errorf("web send: %w", err)
	}
	if utf8.RuneCountInString(text) > Limits().MaxLen {
		return adapters.MessageRef{}, fmt.Errorf("web send of %d characters: %w", utf8.RuneCountInString(text), adapters.ErrTooLong)
	}
	c, err := m.conversation(chat)
	if err != nil {
		return adapters.MessageRef{}, err
	}
	html := markdown.HTML(text)
	c.mu.Lock()
	msg := c.addLocked("bot", text, nil)
	msg.HTML, msg.Stop = html, opts.Stoppable
	c.mu.Unlock()
	return adapters.MessageRef{Chat: chat, ID: msg.ID}, nil
}

var _ adapters.StreamEditor = messenger{}

// Edit replaces the text of a bot message and makes it final: its Stop button goes.
func (m messenger) Edit(ctx context.Context, ref adapters.MessageRef, text string) error {
	return m.edit(ctx, ref, text, false)
}

// EditStreaming replaces the text of a bot message still streaming; its Stop button stays.
func (m messenger) EditStreaming(ctx context.Context, ref adapters.MessageRef, text string) error {
	return m.edit(ctx, ref, text, true)
}

func (m messenger) edit(ctx context.Context, ref adapters.MessageRef, text string, streaming bool) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("web edit: %w", err)
	}
	if utf8.RuneCountInString(text) > Limits().MaxLen {
		return fmt.Errorf("web edit of %d characters: %w", utf8.RuneCountInString(text), adapters.ErrTooLong)
	}
	c, err := m.conversation(ref.Chat)
	if err != nil {
		return err
	}
	html := markdown.HTML(text)
	c.mu.Lock()
	defer c.mu.Unlock()
	msg := c.find(ref.ID)
	if msg == nil || msg.Role != "bot" {
		return fmt.Errorf("web edit of message %s: %w", ref.ID, adapters.ErrMessageGone)
	}
	stop := msg.Stop && streaming
	if msg.Text == text && msg.Stop == stop {
		return fmt.Errorf("web edit of message %s: %w", ref.ID, adapters.ErrNotModified)
	}
	c.rev++
	msg.Text, msg.HTML, msg.Stop, msg.rev = text, html, stop, c.rev
	c.notifyLocked()
	return nil
}

// SendFiles shows a bot message with files; images are shown inline, other files as links.
func (m messenger) SendFiles(ctx context.Context, chat chat.Ref, files []chat.File, caption string, opts adapters.SendOptions) (adapters.MessageRef, error) {
	if err := ctx.Err(); err != nil {
		return adapters.MessageRef{}, fmt.Errorf("web send files: %w", err)
	}
	c, err := m.conversation(chat)
	if err != nil {
		return adapters.MessageRef{}, err
	}
	html := markdown.HTML(caption)
	c.mu.Lock()
	msg := c.addLocked("bot", caption, files)
	msg.HTML = html
	c.mu.Unlock()
	return adapters.MessageRef{Chat: chat, ID: msg.ID}, nil
}

// Typing shows the "working" indicator for a few seconds.
func (m messenger) Typing(ctx context.Context, chat chat.Ref) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("web typing: %w", err)
	}
	c, err := m.conversation(chat)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.typing = m.chat.now().Add(typingFor)
	c.rev++
	c.typingRv = c.rev
	c.notifyLocked()
	c.mu.Unlock()
	return nil
}
