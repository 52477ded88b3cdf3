package discord

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"sync"

	"github.com/bwmarrin/discordgo"

	"relaybot/adapters"
	"relaybot/adapters/markdown"
	"relaybot/chat"
)

// maxFilesPerMessage is Discord's limit on attachments in one message.
const maxFilesPerMessage = 10

// channelOf is the Discord channel a chat reference posts into: the thread when one is given.
func channelOf(chat chat.Ref) string {
	if chat.ThreadID != "" {
		return chat.ThreadID
	}
	return chat.ChatID
}

// noMentions lets nothing in the text ping anyone: no @everyone/@here, roles, users, and not
// the author of the message replied to.
func noMentions() *discordgo.MessageAllowedMentions {
	return &discordgo.MessageAllowedMentions{Parse: []discordgo.AllowedMentionType{}}
}

// v2Components is a Components V2 message: one container with the text (a text display) and,
// while the reply streams, its Stop button.
func v2Components(text string, stop bool) []discordgo.MessageComponent {
	inner := []discordgo.MessageComponent{discordgo.TextDisplay{Content: text}}
	if stop {
		inner = append(inner, stopButton()...)
	}
	return []discordgo.MessageComponent{discordgo.Container{Components: inner}}
}

func stopButton() []discordgo.MessageComponent {
	return []discordgo.MessageComponent{discordgo.ActionsRow{Components: []discordgo.MessageComponent{
		discordgo.Button{Label: "Stop", Style: discordgo.DangerButton, CustomID: StopButtonID},
	}}}
}

func reference(channelID, messageID string) *discordgo.MessageReference {
	// A thread started from a message has the message's id, and the message stays in the
	// parent channel: an answer in that thread cannot reply to it.
	if messageID == "" || messageID == channelID {
		return nil
	}
	no := false // the user may have deleted their message: reply without the reference then
	return &discordgo.MessageReference{MessageID: messageID, ChannelID: channelID, FailIfNotExists: &no}
}

// messenger is the adapter's adapters.Messenger, which the delivery engine sends, edits,
// attaches and types through: each method is one REST request, made when the engine gives it
// its place (the engine owns pacing, 429s and retries). It keeps which messages of a streaming
// reply carry a Stop button, so the final edit removes it.
type messenger struct {
	session *discordgo.Session
	stops   *stopTracker
	v2      bool // Options.ComponentsV2
}

var (
	_ adapters.Messenger    = (*messenger)(nil)
	_ adapters.FileAttacher = (*messenger)(nil)
	_ adapters.StreamEditor = (*messenger)(nil)
)

// plainMessenger is the messenger without FileAttacher: a Components V2 message shows no
// attachment that no component exposes, so files go in messages of their own.
type plainMessenger struct{ m *messenger }

func (p plainMessenger) Send(ctx context.Context, chat chat.Ref, text string, opts adapters.SendOptions) (adapters.MessageRef, error) {
	return p.m.Send(ctx, chat, text, opts)
}

func (p plainMessenger) Edit(ctx context.Context, msg adapters.MessageRef, text string) error {
	return p.m.Edit(ctx, msg, text)
}

func (p plainMessenger) EditStreaming(ctx context.Context, msg adapters.MessageRef, text string) error {
	return p.m.EditStreaming(ctx, msg, text)
}

func (p plainMessenger) SendFiles(ctx context.Context, chat chat.Ref, files []chat.File, caption string, opts adapters.SendOptions) (adapters.MessageRef, error) {
	return p.m.SendFiles(ctx, chat, files, caption, opts)
}

func (p plainMessenger) Typing(ctx context.Context, chat chat.Ref) error {
	return p.m.Typing(ctx, chat)
}

// Send posts a new message (one REST request). With opts.Stoppable, a reply that is still
// streaming gets a Stop button.
func (m *messenger) Send(ctx context.Context, chat chat.Ref, text string, opts adapters.SendOptions) (adapters.MessageRef, error) {
	text = markdown.Discord(text)
	ch := channelOf(chat)
	ms := &discordgo.MessageSend{Content: text, AllowedMentions: noMentions(), Reference: reference(ch, opts.ReplyTo)}
	var sr *stopReply
	if opts.Stoppable {
		answers := opts.ReplyTo
		if answers == "" {
			answers = opts.Answers
		}
		if sr = m.stops.streaming(chat, answers); sr != nil {
			ms.Components = stopButton()
		}
	}
	if m.v2 {
		ms.Components = v2Components(text, sr != nil)
		ms.Content, ms.Flags = "", discordgo.MessageFlagsIsComponentsV2
	}
	sent, err := m.session.ChannelMessageSendComplex(ch, ms, reqOpts(ctx)...)
	if err != nil {
		return adapters.MessageRef{}, classify("send message in channel "+ch, err)
	}
	if sr != nil {
		m.stops.addButton(sr, sent.ID)
	}
	return adapters.MessageRef{Chat: chat, ID: sent.ID}, nil
}

// Edit replaces a message's text (one REST request) and makes it final: a Stop button on it
// goes.
func (m *messenger) Edit(ctx context.Context, msg adapters.MessageRef, text string) error {
	return m.edit(ctx, msg, text, m.stops.shows(msg.ID))
}

// EditStreaming replaces the text of a message that is still streaming (one REST request); its
// Stop button stays, unless the reply is already delivering its final text.
func (m *messenger) EditStreaming(ctx context.Context, msg adapters.MessageRef, text string) error {
	return m.edit(ctx, msg, text, m.stops.finalEditOf(msg.ID))
}

func (m *messenger) edit(ctx context.Context, msg adapters.MessageRef, text string, clear bool) error {
	text = markdown.Discord(text)
	ch := channelOf(msg.Chat)
	me := &discordgo.MessageEdit{ID: msg.ID, Channel: ch, Content: &text, AllowedMentions: noMentions()}
	if clear {
		none := []discordgo.MessageComponent{}
		me.Components = &none
	}
	if m.v2 {
		// The container is sent whole with every edit; the Stop button stays while it shows.
		comps := v2Components(text, m.stops.shows(msg.ID) && !clear)
		me.Content, me.Components, me.Flags = nil, &comps, discordgo.MessageFlagsIsComponentsV2
	}
	if _, err := m.session.ChannelMessageEditComplex(me, reqOpts(ctx)...); err != nil {
		return classify(fmt.Sprintf("edit message %s in channel %s", msg.ID, ch), err)
	}
	if clear {
		m.stops.buttonGone(msg.ID)
	}
	return nil
}

// EditWithFiles sets a message's text and attaches files to it (one multipart REST request);
// up to 10 files, the message's earlier attachments are kept. Like Edit, the final edit of a
// reply also removes its Stop button.
func (m *messenger) EditWithFiles(ctx context.Context, msg adapters.MessageRef, text string, files []chat.File) error {
	text = markdown.Discord(text)
	ch := channelOf(msg.Chat)
	if len(files) == 0 || len(files) > maxFilesPerMessage {
		return fmt.Errorf("discord: attach files to message %s in channel %s: %d files, want 1 to %d per message", msg.ID, ch, len(files), maxFilesPerMessage)
	}
	me := &discordgo.MessageEdit{ID: msg.ID, Channel: ch, Content: &text, AllowedMentions: noMentions()}
	// API v10 keeps only the attachments listed in the edit, new uploads included: each
	// files[n] part is listed by its index n. The bot's text messages have none to keep.
	atts := make([]*discordgo.MessageAttachment, 0, len(files))
	for i, f := range files {
		me.Files = append(me.Files, &discordgo.File{Name: f.Name, ContentType: f.MIME, Reader: bytes.NewReader(f.Data)})
		atts = append(atts, &discordgo.MessageAttachment{ID: strconv.Itoa(i), Filename: f.Name})
	}
	me.Attachments = &atts
	clear := m.stops.shows(msg.ID)
	if clear {
		none := []discordgo.MessageComponent{}
		me.Components = &none
	}
	if _, err := m.session.ChannelMessageEditComplex(me, reqOpts(ctx)...); err != nil {
		return classify(fmt.Sprintf("attach %d files to message %s in channel %s", len(files), msg.ID, ch), err)
	}
	if clear {
		m.stops.buttonGone(msg.ID)
	}
	return nil
}

// SendFiles posts up to 10 files with an optional caption of up to 2,000 characters in one
// message (one REST request).
func (m *messenger) SendFiles(ctx context.Context, chat chat.Ref, files []chat.File, caption string, opts adapters.SendOptions) (adapters.MessageRef, error) {
	caption = markdown.Discord(caption)
	ch := channelOf(chat)
	if len(files) == 0 || len(files) > maxFilesPerMessage {
		return adapters.MessageRef{}, fmt.Errorf("discord: send files in channel %s: %d files, want 1 to %d per message", ch, len(files), maxFilesPerMessage)
	}
	ms := &discordgo.MessageSend{Content: caption, AllowedMentions: noMentions(), Reference: reference(ch, opts.ReplyTo)}
	for _, f := range files {
		ms.Files = append(ms.Files, &discordgo.File{Name: f.Name, ContentType: f.MIME, Reader: bytes.NewReader(f.Data)})
	}
	sent, err := m.session.ChannelMessageSendComplex(ch, ms, reqOpts(ctx)...)
	if err != nil {
		return adapters.MessageRef{}, classify(fmt.Sprintf("send %d files in channel %s", len(files), ch), err)
	}
	return adapters.MessageRef{Chat: chat, ID: sent.ID}, nil
}

// Typing shows "bot is typing…" in the chat for about 10 seconds (one REST request).
func (m *messenger) Typing(ctx context.Context, chat chat.Ref) error {
	ch := channelOf(chat)
	return classify("typing in channel "+ch, m.session.ChannelTyping(ch, reqOpts(ctx)...))
}

// stopTracker remembers which messages of which streaming replies carry a Stop button, so the
// final edit can remove it. A reply is keyed by its chat and the user message it answers (the
// first message of a reply references it).
type stopTracker struct {
	mu      sync.Mutex
	replies map[replyKey]*stopReply
	msgs    map[string]*stopReply // message id → reply
}

type stopReply struct {
	key       replyKey
	asker     string // user id of the message the reply answers
	refs      int
	finishing bool
	buttons   map[string]bool // message id → shows the button
}

func newStopTracker() *stopTracker {
	return &stopTracker{replies: map[replyKey]*stopReply{}, msgs: map[string]*stopReply{}}
}

// replyKey names one stoppable reply: the chat it is in and the message it answers.
type replyKey struct {
	chat    chat.Ref
	replyTo string
}

func stopKey(ref chat.Ref, replyTo string) replyKey { return replyKey{chat: ref, replyTo: replyTo} }

// begin registers a streaming reply to asker's message replyTo.
func (t *stopTracker) begin(chat chat.Ref, replyTo, asker string) *stopReply {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := stopKey(chat, replyTo)
	sr := t.replies[k]
	if sr == nil {
		sr = &stopReply{key: k, buttons: map[string]bool{}}
		t.replies[k] = sr
	}
	sr.refs++
	sr.finishing = false
	sr.asker = asker
	return sr
}

// askedBy reports whether the streaming reply in chat to message replyTo answers userID, or
// is a reply the tracker does not know (then nothing says otherwise).
func (t *stopTracker) askedBy(chat chat.Ref, replyTo, userID string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	sr := t.replies[stopKey(chat, replyTo)]
	return sr == nil || sr.asker == "" || sr.asker == userID
}

// streaming returns the reply a new message belongs to while it still streams, else nil.
func (t *stopTracker) streaming(chat chat.Ref, replyTo string) *stopReply {
	t.mu.Lock()
	defer t.mu.Unlock()
	sr := t.replies[stopKey(chat, replyTo)]
	if sr == nil || sr.finishing {
		return nil
	}
	return sr
}

func (t *stopTracker) addButton(sr *stopReply, msgID string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	sr.buttons[msgID] = true
	t.msgs[msgID] = sr
}

// finish marks a reply as delivering its final text: edits from now on remove the button.
func (t *stopTracker) finish(sr *stopReply) {
	t.mu.Lock()
	defer t.mu.Unlock()
	sr.finishing = true
}

// finalEditOf reports whether an edit of msgID should remove its button.
func (t *stopTracker) finalEditOf(msgID string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	sr := t.msgs[msgID]
	return sr != nil && sr.finishing && sr.buttons[msgID]
}

// shows reports whether msgID shows a Stop button.
func (t *stopTracker) shows(msgID string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	sr := t.msgs[msgID]
	return sr != nil && sr.buttons[msgID]
}

// buttonGone records that msgID no longer shows the button.
func (t *stopTracker) buttonGone(msgID string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if sr := t.msgs[msgID]; sr != nil {
		sr.buttons[msgID] = false
	}
}

// end forgets a reply once it is delivered.
func (t *stopTracker) end(sr *stopReply) {
	t.mu.Lock()
	defer t.mu.Unlock()
	sr.refs--
	if sr.refs > 0 {
		return
	}
	for id := range sr.buttons {
		delete(t.msgs, id)
	}
	if t.replies[sr.key] == sr {
		delete(t.replies, sr.key)
	}
}
