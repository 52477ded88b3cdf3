package discord

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"

	"relaybot/adapters"
)

// approvePrefix starts the custom_id of approval question buttons: "relaybot:approve:<id>:<choice>".
const approvePrefix = "relaybot:approve:"

// closedText ends a question nobody answered.
const closedText = "\n\nClosed without an answer."

// question is an approval question waiting for a press.
type question struct {
	chat    adapters.ChatRef
	msgID   string
	text    string
	choices []adapters.Choice
	decide  func(adapters.Answer) (bool, string)
	done    chan adapters.Answer // buffered
	settled bool
}

// questions are the open approval questions of an Adapter, by id.
type questions struct {
	mu   sync.Mutex
	open map[string]*question
}

var _ adapters.Asker = msgResponder{}

// Ask posts q with buttons and waits for an accepted press or the end of ctx.
func (r msgResponder) Ask(ctx context.Context, q adapters.Question, decide func(adapters.Answer) (bool, string)) (adapters.Answer, error) {
	a := r.a
	b := make([]byte, 8)
	rand.Read(b) // crypto/rand.Read never fails on supported platforms
	id := hex.EncodeToString(b)
	var buttons []discordgo.MessageComponent
	for i, ch := range q.Choices {
		style := discordgo.SecondaryButton
		switch i {
		case 0:
			style = discordgo.SuccessButton
		case 1:
			style = discordgo.DangerButton
		}
		buttons = append(buttons, discordgo.Button{Label: ch.Label, Style: style, CustomID: approvePrefix + id + ":" + ch.ID})
	}
	ch := channelOf(r.chat)
	ms := &discordgo.MessageSend{Content: q.Text, AllowedMentions: noMentions(), Reference: reference(ch, r.replyTo),
		Components: []discordgo.MessageComponent{discordgo.ActionsRow{Components: buttons}}}
	// The question is open before it is posted: a press can arrive before the post's answer.
	pq := &question{chat: r.chat, text: q.Text, choices: slices.Clone(q.Choices), decide: decide, done: make(chan adapters.Answer, 1)}
	a.questions.mu.Lock()
	a.questions.open[id] = pq
	a.questions.mu.Unlock()
	var m *discordgo.Message
	err := a.waitRateLimit(ctx, func() error {
		var err error
		m, err = a.session.ChannelMessageSendComplex(ch, ms, a.reqOpts(ctx)...)
		return classify("post approval question in channel "+ch, err)
	})
	if err != nil {
		a.questions.mu.Lock()
		delete(a.questions.open, id)
		a.questions.mu.Unlock()
		return adapters.Answer{}, err
	}
	a.questions.mu.Lock()
	pq.msgID = m.ID
	a.questions.mu.Unlock()

	select {
	case ans := <-pq.done:
		return ans, nil
	case <-ctx.Done():
	}
	a.questions.mu.Lock()
	if pq.settled { // answered as ctx ended: the answer stands
		a.questions.mu.Unlock()
		return <-pq.done, nil
	}
	pq.settled = true
	delete(a.questions.open, id)
	a.questions.mu.Unlock()
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	text := pq.text + closedText
	none := []discordgo.MessageComponent{}
	me := &discordgo.MessageEdit{ID: pq.msgID, Channel: ch, Content: &text, Components: &none, AllowedMentions: noMentions()}
	if err := a.waitRateLimit(ectx, func() error {
		_, err := a.session.ChannelMessageEditComplex(me, a.reqOpts(ectx)...)
		return classify("close approval question", err)
	}); err != nil {
		a.log.Warn("discord: approval question not closed", "err", err)
	}
	return adapters.Answer{}, ctx.Err()
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
	a.questions.mu.Lock()
	defer a.questions.mu.Unlock()
	pq := a.questions.open[id]
	if pq == nil || pq.settled || !slices.ContainsFunc(pq.choices, func(c adapters.Choice) bool { return c.ID == choice }) {
		a.respond(ctx, i, discordgo.InteractionResponseChannelMessageWithSource,
			&discordgo.InteractionResponseData{Content: "This question is closed.", Flags: discordgo.MessageFlagsEphemeral, AllowedMentions: noMentions()})
		return
	}
	ans := adapters.Answer{Choice: choice, UserID: user.ID, UserName: user.Username,
		ChatAdmin: i.Member != nil && i.Member.Permissions&chatAdminPermissions != 0}
	ok, text := pq.decide(ans)
	if !ok {
		a.respond(ctx, i, discordgo.InteractionResponseChannelMessageWithSource,
			&discordgo.InteractionResponseData{Content: text, Flags: discordgo.MessageFlagsEphemeral, AllowedMentions: noMentions()})
		return
	}
	pq.settled = true
	delete(a.questions.open, id)
	none := []discordgo.MessageComponent{}
	if !a.respond(ctx, i, discordgo.InteractionResponseUpdateMessage,
		&discordgo.InteractionResponseData{Content: text, Components: none, AllowedMentions: noMentions()}) {
		a.log.Warn("discord: approval question not updated", "question", fmt.Sprint(pq.msgID))
	}
	pq.done <- ans
}
