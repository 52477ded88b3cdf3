package discord

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/bwmarrin/discordgo"

	"relaybot/adapters"
	"relaybot/chat"
)

// onMessage turns a MESSAGE_CREATE into an Inbound when it is meant for the bot and allowed.
func (a *Adapter) onMessage(ctx context.Context, h adapters.Handler, m *discordgo.MessageCreate) {
	if m.Author == nil || m.Author.Bot {
		return
	}
	botID := a.botUserID()
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
	prev, mine := a.queueHandover(m.ChannelID)
	if !a.spawn(func() { a.handleMessage(ctx, h, m, botID, in, prev, mine) }) {
		a.handOver(m.ChannelID, mine)
	}
}

// queueHandover returns the hand-over of the channel's previous message (nil when none is
// pending) and registers this message's, to be passed to handOver.
func (a *Adapter) queueHandover(channelID string) (prev, mine chan struct{}) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.handedOver == nil {
		a.handedOver = map[string]chan struct{}{}
	}
	prev = a.handedOver[channelID]
	mine = make(chan struct{})
	a.handedOver[channelID] = mine
	return prev, mine
}

// handOver marks a message handed to the handler (or dropped), letting the channel's next one go.
func (a *Adapter) handOver(channelID string, mine chan struct{}) {
	a.mu.Lock()
	defer a.mu.Unlock()
	close(mine)
	if a.handedOver[channelID] == mine {
		delete(a.handedOver, channelID)
	}
}

func (a *Adapter) handleMessage(ctx context.Context, h adapters.Handler, m *discordgo.MessageCreate, botID string, in adapters.Inbound, prev, mine chan struct{}) {
	handed := false
	defer func() {
		if !handed {
			a.handOver(m.ChannelID, mine)
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
		parent, ok := a.allowed(ctx, m.GuildID, m.ChannelID, roles)
		if !ok {
			return
		}
		in.ParentChatID = parent
		in.Roles = roles // tool policies and quota overrides match them
		var addressed bool
		text, addressed = a.addressed(m.Message, botID)
		if !addressed {
			return
		}
	} else {
		if !a.dmAllowed(ctx, in.UserID) {
			a.log.Debug("discord: direct message refused by the guild rules", "user", in.UserID)
			return
		}
		text = stripMention(text, botID)
		if a.opts.TriggerPrefix != "" {
			text, _ = strings.CutPrefix(strings.TrimSpace(text), a.opts.TriggerPrefix)
		}
	}
	in.Text = strings.TrimSpace(text)
	if c, ok := adapters.ParseCommand(in.Text); ok {
		if !c.For(a.botUserName()) {
			return // "/reset@otherbot": another bot's command, neither run nor answered
		}
		in.Command, in.Args = c.Name, c.Args
	}
	if !a.takeMessage(ctx, in, m.Message) {
		return // another replica answers it
	}
	defer a.doneMessage(m.ID)
	in.Images = a.images(ctx, m.Attachments)
	in.Attachments = a.attachments(m.Message)
	// The pipeline orders messages that reach it within a moment (its settle delay) by their
	// time; handed over in the gateway's order, a channel's messages reach it that way.
	handed = true
	a.handOver(m.ChannelID, mine)
	h.Handle(ctx, in, msgResponder{a: a, chat: in.Chat, replyTo: m.ID, asker: in.UserID})
}

// addressed reports whether a guild message is meant for the bot (it mentions the bot, replies
// to it, or starts with the prefix) and returns its text without the mention or prefix.
func (a *Adapter) addressed(m *discordgo.Message, botID string) (string, bool) {
	text := m.Content
	mentioned := slices.ContainsFunc(m.Mentions, func(u *discordgo.User) bool { return u != nil && u.ID == botID }) ||
		strings.Contains(text, "<@"+botID+">") || strings.Contains(text, "<@!"+botID+">")
	repliedTo := m.ReferencedMessage != nil && m.ReferencedMessage.Author != nil && m.ReferencedMessage.Author.ID == botID
	if mentioned {
		return stripMention(text, botID), true
	}
	if a.opts.TriggerPrefix != "" {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(text), a.opts.TriggerPrefix); ok {
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

// allowed applies AllowedGuilds, AllowedChannels (a thread counts as its parent too) and
// AllowedRoles to a guild message or interaction, and returns the channel's parent when it is a
// thread or forum post: the pipeline's chat rules for the parent apply to it too. A channel
// whose parent cannot be learnt is not answered, so no thread escapes its parent's rules.
func (a *Adapter) allowed(ctx context.Context, guildID, channelID string, roles []string) (parent string, ok bool) {
	o := a.opts
	if len(o.AllowedGuilds) > 0 && !slices.Contains(o.AllowedGuilds, guildID) {
		return "", false
	}
	if len(o.AllowedRoles) > 0 && !slices.ContainsFunc(roles, func(r string) bool { return slices.Contains(o.AllowedRoles, r) }) {
		return "", false
	}
	parent, err := a.parentOf(ctx, channelID)
	if err != nil {
		a.log.Warn("discord: cannot tell whether the channel is a thread, whose parent's rules apply; ignoring the message",
			"channel", channelID, "err", err)
		return "", false
	}
	if len(o.AllowedChannels) > 0 && !slices.Contains(o.AllowedChannels, channelID) {
		return parent, parent != "" && slices.Contains(o.AllowedChannels, parent)
	}
	return parent, true
}

// parentOf returns a thread's parent channel id ("" for other channels): from the gateway's
// state when known, else asked once over REST and remembered.
func (a *Adapter) parentOf(ctx context.Context, channelID string) (string, error) {
	if c := a.stateChannel(channelID); c != nil {
		if c.IsThread() {
			return c.ParentID, nil
		}
		return "", nil
	}
	a.mu.Lock()
	p, ok := a.parents[channelID]
	a.mu.Unlock()
	if ok {
		return p, nil
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := a.channel(cctx, channelID)
	if err != nil {
		return "", err
	}
	p = ""
	if c.IsThread() {
		p = c.ParentID
	}
	a.mu.Lock()
	a.parents[channelID] = p
	a.mu.Unlock()
	return p, nil
}

// images downloads the pictures attached to a message, skipping ones over MaxImageBytes.
func (a *Adapter) images(ctx context.Context, atts []*discordgo.MessageAttachment) []adapters.Image {
	var out []adapters.Image
	for _, at := range atts {
		if at == nil || !strings.HasPrefix(at.ContentType, "image/") {
			continue
		}
		if at.Size > a.opts.MaxImageBytes {
			a.log.Info("discord: image skipped: too large", "file", at.Filename, "bytes", at.Size, "max", a.opts.MaxImageBytes)
			continue
		}
		data, err := a.download(ctx, at.URL)
		if err != nil {
			a.log.Warn("discord: image skipped", "file", at.Filename, "err", err)
			continue
		}
		out = append(out, adapters.Image{MIME: at.ContentType, Data: data})
	}
	return out
}

// attachments lists a message's files other than images (voice messages, audio, documents and
// text pasted as a file), fetched from the CDN when the pipeline reads them.
func (a *Adapter) attachments(m *discordgo.Message) []adapters.Attachment {
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
			Duration: time.Duration(at.DurationSecs * float64(time.Second)), Fetch: adapters.HTTPFetch(a.http, at.URL, nil)})
	}
	return out
}

func (a *Adapter) download(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("download %s: %w", url, err)
	}
	resp, err := a.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("download attachment: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("download attachment: HTTP %s", resp.Status)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, int64(a.opts.MaxImageBytes)+1))
	if err != nil {
		return nil, fmt.Errorf("download attachment: %w", err)
	}
	if len(data) > a.opts.MaxImageBytes {
		return nil, fmt.Errorf("download attachment: larger than %d bytes", a.opts.MaxImageBytes)
	}
	return data, nil
}
