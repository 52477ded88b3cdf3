package discord

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"

	"relaybot/adapters"
	"relaybot/chat"
)

// inbox receives the messages the gateway delivers: it hands those meant for the bot and
// allowed to the handler, a channel's in the order the gateway sent them, each once across the
// replicas (the ledger), and with a Journal answers again the messages of replicas that died.
type inbox struct {
	opts   Options
	log    *slog.Logger
	http   *http.Client // images users send
	bot    *botIdentity
	access *access
	ledger *ledger
	work   *workers
	// answer is the responder of a message: replies reference it and stream with a Stop button.
	answer func(ref chat.Ref, replyTo, asker string) adapters.Responder
	// threads opens a thread for each conversation started in a channel (Options.Threads) and
	// answers in the threads the bot opened.
	threads *threads

	mu sync.Mutex
	// handedOver holds, per channel, a channel closed when the channel's latest message has been
	// handed to the handler (or dropped): the next message waits for it, so a channel's messages
	// reach the pipeline in the order the gateway sent them.
	handedOver map[string]chan struct{}
}

// onMessage turns a MESSAGE_CREATE into an Inbound when it is meant for the bot and allowed.
func (b *inbox) onMessage(ctx context.Context, h adapters.Handler, m *discordgo.MessageCreate) {
	if m.Author == nil || m.Author.Bot {
		return
	}
	botID := b.bot.userID()
	if botID == "" || m.Author.ID == botID {
		return
	}
	in := adapters.Inbound{
		Chat:      chat.Ref{Platform: chat.Discord, ChatID: m.ChannelID},
		Kind:      adapters.Private,
		MessageID: m.ID,
		UserID:    m.Author.ID,
		UserName:  m.Author.Username,
		Time:      m.Timestamp,
	}
	if in.Time.IsZero() {
		in.Time = time.Now()
	}
	// Events arrive in order on the gateway's reader goroutine (SyncEvents); anything that may
	// block (a channel lookup, the ledger, image downloads, the handler) runs on the message's
	// own goroutine, which hands the message over only after the channel's previous one was.
	prev, mine := b.queueHandover(m.ChannelID)
	if !b.work.spawn(func() { b.handleMessage(ctx, h, m, botID, in, prev, mine) }) {
		b.handOver(m.ChannelID, mine)
	}
}

// queueHandover returns the hand-over of the channel's previous message (nil when none is
// pending) and registers this message's, to be passed to handOver.
func (b *inbox) queueHandover(channelID string) (prev, mine chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.handedOver == nil {
		b.handedOver = map[string]chan struct{}{}
	}
	prev = b.handedOver[channelID]
	mine = make(chan struct{})
	b.handedOver[channelID] = mine
	return prev, mine
}

// handOver marks a message handed to the handler (or dropped), letting the channel's next one go.
func (b *inbox) handOver(channelID string, mine chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	close(mine)
	if b.handedOver[channelID] == mine {
		delete(b.handedOver, channelID)
	}
}

func (b *inbox) handleMessage(ctx context.Context, h adapters.Handler, m *discordgo.MessageCreate, botID string, in adapters.Inbound, prev, mine chan struct{}) {
	handed := false
	defer func() {
		if !handed {
			b.handOver(m.ChannelID, mine)
		}
	}()
	if prev != nil {
		select {
		case <-prev:
		case <-ctx.Done():
			return
		}
	}
	text := m.Content
	if m.GuildID != "" {
		in.Kind = adapters.Group
		var roles []string
		if m.Member != nil {
			roles = m.Member.Roles
		}
		parent, ok := b.access.allowed(ctx, m.GuildID, m.ChannelID, roles)
		if !ok {
			return
		}
		in.ParentChatID = parent
		in.Roles = roles // tool policies and quota overrides match them
		var addressed bool
		text, addressed = b.addressed(m.Message, botID)
		// In a thread the bot opened, every message is for it while the thread is open.
		if !addressed && parent != "" && b.threads != nil && b.ownThread(ctx, m.ChannelID, botID) {
			text, addressed = stripMention(text, botID), true
		}
		if !addressed {
			return
		}
	} else {
		if !b.access.dmAllowed(ctx, in.UserID) {
			b.log.Debug("discord: direct message refused by the guild rules", "user", in.UserID)
			return
		}
		text = stripMention(text, botID)
		if b.opts.TriggerPrefix != "" {
			text, _ = strings.CutPrefix(strings.TrimSpace(text), b.opts.TriggerPrefix)
		}
	}
	in.Text = strings.TrimSpace(text)
	if c, ok := adapters.ParseCommand(in.Text); ok {
		if !c.For(b.bot.userName()) {
			return // "/reset@otherbot": another bot's command, neither run nor answered
		}
		in.Command, in.Args = c.Name, c.Args
	}
	if m.GuildID != "" && in.ParentChatID == "" && (in.Command == "" || in.Command == "new") && b.threads != nil && b.threads.opens(m.ChannelID) {
		// A conversation started in a channel (a question, or /new): the thread opened on the
		// message is its chat.
		in.Chat.ChatID, in.ParentChatID, in.OpensThread = m.ID, m.ChannelID, true
		in.TitlesThread = in.Command == ""
	}
	if !b.takeMessage(ctx, in, m.Message) {
		return // another replica answers it
	}
	defer b.doneMessage(m.ID)
	if b.threads != nil && in.ParentChatID != "" && !in.OpensThread && in.Command == "" {
		in.TitlesThread = b.threads.takeUntitled(in.Chat.ChatID) // the first question in a thread /new opened
	}
	in.Images = b.images(ctx, m.Attachments)
	in.Attachments = b.attachments(m.Message)
	// The pipeline orders messages that reach it within a moment (its settle delay) by their
	// time; handed over in the gateway's order, a channel's messages reach it that way.
	handed = true
	b.handOver(m.ChannelID, mine)
	h.Handle(ctx, in, b.responderFor(in, m.ID))
}

// ownThread reports whether channelID is a thread the bot opened.
func (b *inbox) ownThread(ctx context.Context, channelID, botID string) bool {
	info, err := b.access.threadOf(ctx, channelID)
	return err == nil && info.owner == botID
}

// addressed reports whether a guild message is meant for the bot (it mentions the bot, replies
// to it, or starts with the prefix) and returns its text without the mention or prefix.
func (b *inbox) addressed(m *discordgo.Message, botID string) (string, bool) {
	text := m.Content
	mentioned := slices.ContainsFunc(m.Mentions, func(u *discordgo.User) bool { return u != nil && u.ID == botID }) ||
		strings.Contains(text, "<@"+botID+">") || strings.Contains(text, "<@!"+botID+">")
	repliedTo := m.ReferencedMessage != nil && m.ReferencedMessage.Author != nil && m.ReferencedMessage.Author.ID == botID
	if mentioned {
		return stripMention(text, botID), true
	}
	if b.opts.TriggerPrefix != "" {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(text), b.opts.TriggerPrefix); ok {
			return rest, true
		}
	}
	return text, repliedTo
}

// stripMention removes every mention of the bot, also one that removing another one forms
// ("<@<@id>id>").
func stripMention(text, botID string) string {
	for {
		out := strings.ReplaceAll(text, "<@"+botID+">", "")
		out = strings.ReplaceAll(out, "<@!"+botID+">", "")
		if out == text {
			return out
		}
		text = out
	}
}

// images downloads the pictures attached to a message, skipping ones over MaxImageBytes.
func (b *inbox) images(ctx context.Context, atts []*discordgo.MessageAttachment) []adapters.Image {
	var out []adapters.Image
	for _, at := range atts {
		if at == nil || !strings.HasPrefix(at.ContentType, "image/") {
			continue
		}
		if at.Size > b.opts.MaxImageBytes {
			b.log.Info("discord: image skipped: too large", "file", at.Filename, "bytes", at.Size, "max", b.opts.MaxImageBytes)
			continue
		}
		data, err := b.download(ctx, at.URL)
		if err != nil {
			b.log.Warn("discord: image skipped", "file", at.Filename, "err", err)
			continue
		}
		out = append(out, adapters.Image{MIME: at.ContentType, Data: data})
	}
	return out
}

// attachments lists a message's files other than images (voice messages, audio, documents and
// text pasted as a file), fetched from the CDN when the pipeline reads them.
func (b *inbox) attachments(m *discordgo.Message) []adapters.Attachment {
	voice := m.Flags&discordgo.MessageFlagsIsVoiceMessage != 0
	var out []adapters.Attachment
	for _, at := range m.Attachments {
		if at == nil || strings.HasPrefix(at.ContentType, "image/") {
			continue
		}
		kind := adapters.Document
		switch {
		case voice:
			kind = adapters.Voice
		case strings.HasPrefix(at.ContentType, "audio/"):
			kind = adapters.Audio
		}
		out = append(out, adapters.Attachment{Kind: kind, MIME: at.ContentType, Name: at.Filename, Size: int64(at.Size),
			Duration: time.Duration(at.DurationSecs * float64(time.Second)), Fetch: adapters.HTTPFetch(b.http, at.URL, nil)})
	}
	return out
}

func (b *inbox) download(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("download %s: %w", url, err)
	}
	resp, err := b.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("download attachment: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("download attachment: HTTP %s", resp.Status)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, int64(b.opts.MaxImageBytes)+1))
	if err != nil {
		return nil, fmt.Errorf("download attachment: %w", err)
	}
	if len(data) > b.opts.MaxImageBytes {
		return nil, fmt.Errorf("download attachment: larger than %d bytes", b.opts.MaxImageBytes)
	}
	return data, nil
}
