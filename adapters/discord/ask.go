package discord

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/bwmarrin/discordgo"

	"relaybot/adapters"
)

// approvePrefix starts the custom_id of approval question buttons: "relaybot:approve:<id>:<choice>".
const approvePrefix = "relaybot:approve:"

var _ adapters.Asker = msgResponder{}

// Ask posts q with buttons and waits for an accepted press or the end of ctx.
func (r msgResponder) Ask(ctx context.Context, q adapters.Question, decide func(adapters.Answer) (bool, string)) (adapters.Answer, error) {
	a := r.a
	// The question is open before it is posted: a press can arrive before the post's answer.
	id, oq := a.questions.Open(r.chat, q, decide)
	// An action row holds at most 5 buttons, a message at most 5 rows.
	var rows []discordgo.MessageComponent
	var buttons []discordgo.MessageComponent
	for i, ch := range q.Choices {
		style := discordgo.SecondaryButton
		switch i {
		case 0:
			style = discordgo.SuccessButton
		case 1:
			style = discordgo.DangerButton
		}
		b := discordgo.Button{Label: ch.Label, Style: style, CustomID: approvePrefix + id + ":" + ch.ID}
		if ch.URL != "" {
			b = discordgo.Button{Label: ch.Label, Style: discordgo.LinkButton, URL: ch.URL} // never pressed
		}
		buttons = append(buttons, b)
		if len(buttons) == 5 || i == len(q.Choices)-1 {
			rows, buttons = append(rows, discordgo.ActionsRow{Components: buttons}), nil
		}
	}
	ch := channelOf(r.chat)
	ms := &discordgo.MessageSend{Content: q.Text, AllowedMentions: noMentions(), Reference: reference(ch, r.replyTo),
		Components: rows[:min(len(rows), 5)]}
	var m *discordgo.Message
	err := a.waitRateLimit(ctx, func() error {
		var err error
		m, err = a.session.ChannelMessageSendComplex(ch, ms, a.reqOpts(ctx)...)
		return classify("post approval question in channel "+ch, err)
	})
	if err != nil {
		a.questions.Drop(id)
		return adapters.Answer{}, err
	}
	a.questions.Posted(oq, m.ID)
	ans, closed, err := a.questions.Wait(ctx, id, oq)
	if !closed {
		return ans, err
	}
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	text := oq.Text + adapters.ClosedText
	none := []discordgo.MessageComponent{}
	me := &discordgo.MessageEdit{ID: a.questions.MessageOf(oq), Channel: ch, Content: &text, Components: &none, AllowedMentions: noMentions()}
	if err := a.waitRateLimit(ectx, func() error {
		_, err := a.session.ChannelMessageEditComplex(me, a.reqOpts(ectx)...)
		return classify("close approval question", err)
	}); err != nil {
		a.log.Warn("discord: approval question not closed", "err", err)
	}
	return adapters.Answer{}, err
}

// waitRateLimit runs fn, waiting out 429s until ctx ends: a question and its answer go outside
// the delivery engine and must not be lost to a busy channel.
func (a *Adapter) waitRateLimit(ctx context.Context, fn func() error) error {
	for {
		err := fn()
		var rl *adapters.RateLimitError
		if !errors.As(err, &rl) {
			return err
		}
		t := time.NewTimer(rl.RetryAfter)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
		}
	}
}

// chatAdminPermissions make a guild member a chat admin for approvals.
const chatAdminPermissions = discordgo.PermissionAdministrator | discordgo.PermissionManageGuild | discordgo.PermissionManageChannels

// onApprovePress takes a press of an approval button; rest is "<id>:<choice>". A refused press
// is told why in a message only the presser sees; an accepted one turns the question into the
// decision, without buttons.
func (a *Adapter) onApprovePress(ctx context.Context, i *discordgo.Interaction, user *discordgo.User, rest string) {
	id, choice, _ := strings.Cut(rest, ":")
	ans := adapters.Answer{UserID: user.ID, UserName: user.Username,
		ChatAdmin: i.Member != nil && i.Member.Permissions&chatAdminPermissions != 0}
	msgID := ""
	if i.Message != nil {
		msgID = i.Message.ID
	}
	oq, accepted, text := a.questions.Press(id, choice, msgID, ans)
	switch {
	case oq == nil:
		a.respond(ctx, i, discordgo.InteractionResponseChannelMessageWithSource,
			&discordgo.InteractionResponseData{Content: "This question is closed.", Flags: discordgo.MessageFlagsEphemeral, AllowedMentions: noMentions()})
	case !accepted:
		a.respond(ctx, i, discordgo.InteractionResponseChannelMessageWithSource,
			&discordgo.InteractionResponseData{Content: text, Flags: discordgo.MessageFlagsEphemeral, AllowedMentions: noMentions()})
	default:
		none := []discordgo.MessageComponent{}
		if !a.respond(ctx, i, discordgo.InteractionResponseUpdateMessage,
			&discordgo.InteractionResponseData{Content: text, Components: none, AllowedMentions: noMentions()}) {
			a.log.Warn("discord: approval question not updated", "question", a.questions.MessageOf(oq))
		}
	}
}
