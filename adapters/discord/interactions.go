package discord

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"

	"relaybot/adapters"
	"relaybot/adapters/delivery"
	"relaybot/chat"
)

// ackTimeout bounds the answer to an interaction; Discord drops it after 3 seconds.
const ackTimeout = 3 * time.Second

// notAllowed is the ephemeral answer to interactions where the bot does not answer.
const notAllowed = "This bot does not answer here."

// interactions answers what users do with the bot's application: slash commands, the Stop
// button of a streaming reply, and presses of question buttons, which it also posts and closes.
// Every answer to an interaction goes through the delivery engine's retry stage.
type interactions struct {
	log     *slog.Logger
	engine  *delivery.Engine
	session *discordgo.Session
	ledger  *ledger
	access  *access
	replies replies
	work    *workers
	// questions are the open approval questions (buttons "relaybot:approve:…").
	questions adapters.Questions
}

// onInteraction hands an INTERACTION_CREATE to a goroutine of its own.
func (x *interactions) onInteraction(ctx context.Context, h adapters.Handler, ic *discordgo.InteractionCreate) {
	if ic.Interaction == nil {
		return
	}
	x.work.spawn(func() { x.handleInteraction(ctx, h, ic.Interaction) })
}

// handleInteraction answers a slash command or a button press and hands it to h; it runs on the
// interaction's own goroutine.
func (x *interactions) handleInteraction(ctx context.Context, h adapters.Handler, i *discordgo.Interaction) {
	user, roles := i.User, []string(nil)
	if i.Member != nil {
		user, roles = i.Member.User, i.Member.Roles
	}
	if user == nil || !x.ledger.taken(ctx, "interaction:"+i.ID) {
		return
	}
	in := adapters.Inbound{
		Chat:      chat.Ref{Platform: chat.Discord, ChatID: i.ChannelID},
		Kind:      adapters.Private,
		MessageID: i.ID, // interactions have no user message; the interaction id stands in
		UserID:    user.ID,
		UserName:  user.Username,
		Time:      time.Now(),
	}
	if i.GuildID == "" && !x.access.dmAllowed(ctx, user.ID) {
		x.respond(ctx, i, discordgo.InteractionResponseChannelMessageWithSource,
			&discordgo.InteractionResponseData{Content: notAllowed, Flags: discordgo.MessageFlagsEphemeral, AllowedMentions: noMentions()})
		return
	}
	if i.GuildID != "" {
		in.Kind = adapters.Group
		in.Roles = roles
		parent, ok := x.access.allowed(ctx, i.GuildID, i.ChannelID, roles)
		in.ParentChatID = parent
		if !ok {
			x.respond(ctx, i, discordgo.InteractionResponseChannelMessageWithSource,
				&discordgo.InteractionResponseData{Content: notAllowed, Flags: discordgo.MessageFlagsEphemeral, AllowedMentions: noMentions()})
			return
		}
	}
	switch i.Type {
	case discordgo.InteractionApplicationCommand:
		data := i.ApplicationCommandData()
		in.Command = data.Name
		var args []string
		for _, o := range data.Options {
			args = append(args, fmt.Sprint(o.Value))
		}
		in.Args = strings.Join(args, " ")
		// Answer at once with "thinking…"; the handler's notices then fill that message in.
		acked := x.respond(ctx, i, discordgo.InteractionResponseDeferredChannelMessageWithSource, nil)
		out := &interactionResponder{x: x, i: i, chat: in.Chat, original: acked}
		h.Handle(ctx, in, out)
		out.done(ctx)
	case discordgo.InteractionMessageComponent:
		if rest, ok := strings.CutPrefix(i.MessageComponentData().CustomID, approvePrefix); ok {
			x.onApprovePress(ctx, i, user, rest)
			return
		}
		if i.MessageComponentData().CustomID != StopButtonID {
			x.respond(ctx, i, discordgo.InteractionResponseDeferredMessageUpdate, nil)
			return
		}
		// The asker's press takes the button off the message right away; this answer does not
		// draw on the channel's message budget. Anyone else's press leaves it: the handler may
		// refuse their stop (only the asker or an admin stops an answer), and the asker must
		// still be able to press it. A stop that happens removes it with the final edit.
		switch {
		case i.Message == nil:
			x.respond(ctx, i, discordgo.InteractionResponseDeferredMessageUpdate, nil)
		case i.Message.MessageReference != nil && !x.replies.stops.askedBy(in.Chat, i.Message.MessageReference.MessageID, user.ID):
			x.respond(ctx, i, discordgo.InteractionResponseDeferredMessageUpdate, nil)
		default:
			if x.removeButtons(ctx, i) {
				x.replies.stops.buttonGone(i.Message.ID)
			}
		}
		in.Command = "stop"
		h.Handle(ctx, in, &interactionResponder{x: x, i: i, chat: in.Chat})
	default:
		return
	}
}

// respond answers an interaction's callback; it reports whether Discord took the answer.
func (x *interactions) respond(ctx context.Context, i *discordgo.Interaction, typ discordgo.InteractionResponseType, data *discordgo.InteractionResponseData) bool {
	cctx, cancel := context.WithTimeout(ctx, ackTimeout)
	defer cancel()
	resp := &discordgo.InteractionResponse{Type: typ, Data: data}
	err := x.answer(cctx, i, "answer interaction", func(opts []discordgo.RequestOption) error {
		return x.session.InteractionRespond(i, resp, opts...)
	})
	if err != nil {
		x.log.Warn("discord: interaction not answered", "interaction", i.ID, "err", err)
		return false
	}
	return true
}

// answer makes one request that answers interaction i (its callback, or an edit, follow-up or
// removal of its response) through the delivery engine's retry stage, which waits out its 429s
// and retries temporary failures. Discord counts these requests against the interaction's
// token, neither the channel's budget nor the bot's global one: they take no place in the
// engine's windows, so no preview or message queued there delays them (ClassInteraction), and
// the first answer makes Discord's 3-second deadline however busy the channel is.
func (x *interactions) answer(ctx context.Context, i *discordgo.Interaction, what string, fn func([]discordgo.RequestOption) error) error {
	return x.engine.Do(ctx, delivery.Request{Chat: chat.Ref{Platform: chat.Discord, ChatID: i.ChannelID},
		Class: delivery.ClassInteraction, Kind: delivery.EventInteraction,
		Run: func(ctx context.Context) error { return classify(what, fn(reqOpts(ctx))) }})
}

// v2Text is the text of a Components V2 message (its container's text display).
func v2Text(m *discordgo.Message) (string, bool) {
	if m == nil || m.Flags&discordgo.MessageFlagsIsComponentsV2 == 0 {
		return "", false
	}
	for _, c := range m.Components {
		box, ok := c.(*discordgo.Container)
		if !ok {
			continue
		}
		for _, in := range box.Components {
			if td, ok := in.(*discordgo.TextDisplay); ok {
				return td.Content, true
			}
		}
	}
	return "", false
}

// removeButtons answers a button press by updating the pressed message to carry no
// components, leaving its text alone.
func (x *interactions) removeButtons(ctx context.Context, i *discordgo.Interaction) bool {
	cctx, cancel := context.WithTimeout(ctx, ackTimeout)
	defer cancel()
	var comps any = []any{}
	if text, ok := v2Text(i.Message); ok {
		comps = v2Components(text, false) // a Components V2 message keeps its text display
	}
	body := map[string]any{
		"type": discordgo.InteractionResponseUpdateMessage,
		"data": map[string]any{"components": comps},
	}
	err := x.answer(cctx, i, "answer button press", func(opts []discordgo.RequestOption) error {
		_, err := x.session.RequestWithBucketID("POST", discordgo.EndpointInteractionResponse(i.ID, i.Token), body,
			discordgo.EndpointInteractionResponse(i.ID, ""), opts...)
		return err
	})
	if err != nil {
		x.log.Warn("discord: stop button not removed", "interaction", i.ID, "err", err)
		return false
	}
	return true
}

// interactionResponder answers a slash command or a button press. Slash commands were
// acknowledged with a deferred response: the first notice fills it in, later ones follow up.
// Button presses (and commands whose acknowledgement failed) answer in the channel.
type interactionResponder struct {
	x        *interactions
	i        *discordgo.Interaction
	chat     chat.Ref
	original bool // a deferred response waits to be filled in

	mu       sync.Mutex
	answered bool
}

func (r *interactionResponder) NewReply(ctx context.Context) adapters.Reply {
	return r.x.replies.start(ctx, r.chat, "", "", false)
}

func (r *interactionResponder) SupportsStreaming() bool { return true }

func (r *interactionResponder) Notice(ctx context.Context, text string) error {
	if !r.original {
		return r.x.engine.Notice(ctx, r.chat, text, adapters.SendOptions{})
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	lim := Limits()
	for _, part := range delivery.Split(text, lim.MaxLen, lim.Unit) {
		var err error
		if !r.answered {
			err = r.x.answer(ctx, r.i, "fill in interaction response", func(opts []discordgo.RequestOption) error {
				_, err := r.x.session.InteractionResponseEdit(r.i, &discordgo.WebhookEdit{Content: &part, AllowedMentions: noMentions()}, opts...)
				return err
			})
			if err == nil {
				r.answered = true
			}
		} else {
			err = r.x.answer(ctx, r.i, "follow up interaction", func(opts []discordgo.RequestOption) error {
				_, err := r.x.session.FollowupMessageCreate(r.i, true, &discordgo.WebhookParams{Content: part, AllowedMentions: noMentions()}, opts...)
				return err
			})
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// done removes the "thinking…" response of a command the handler did not answer.
func (r *interactionResponder) done(ctx context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.original || r.answered {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	err := r.x.answer(cctx, r.i, "delete interaction response", func(opts []discordgo.RequestOption) error {
		return r.x.session.InteractionResponseDelete(r.i, opts...)
	})
	if err != nil {
		r.x.log.Debug("discord: unanswered command response not removed", "interaction", r.i.ID, "err", err)
	}
}
