package discord

import (
	"context"
	"errors"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/bwmarrin/discordgo"

	"relaybot/adapters"
	"relaybot/adapters/delivery"
	"relaybot/chat"
)

// approvePrefix starts the custom_id of approval question buttons: "relaybot:approve:<id>:<choice>".
const approvePrefix = "relaybot:approve:"

var (
	_ adapters.Asker             = msgResponder{}
	_ adapters.RedrawAsker       = msgResponder{}
	_ adapters.QuestionMessenger = msgResponder{}
	_ adapters.QuestionRedrawer  = msgResponder{}
)

// Ask posts q with buttons and waits for an accepted press or the end of ctx.
func (r msgResponder) Ask(ctx context.Context, q adapters.Question, decide func(adapters.Answer) (bool, string)) (adapters.Answer, error) {
	return adapters.Ask(ctx, &r.x.questions, r, r.chat, q, decide)
}

// AskRedraw is Ask whose presses may redraw the buttons in place (an UPDATE_MESSAGE answer).
func (r msgResponder) AskRedraw(ctx context.Context, q adapters.Question, decide func(adapters.Answer) adapters.Decision) (adapters.Answer, error) {
	return adapters.AskRedraw(ctx, &r.x.questions, r, r.chat, q, decide)
}

// RedrawQuestion sets the buttons of question id's message, keeping its text, through the
// channel's budgets in the delivery engine (a press another replica received and answered).
func (r msgResponder) RedrawQuestion(ctx context.Context, ref chat.Ref, id, messageID string, choices []adapters.Choice) {
	ch := channelOf(ref)
	rows := questionRows(id, choices)
	me := &discordgo.MessageEdit{ID: messageID, Channel: ch, Components: &rows}
	err := r.x.engine.Do(ctx, delivery.Request{Chat: ref, Class: delivery.ClassMessage, Kind: delivery.EventEdit,
		Run: func(ctx context.Context) error {
			_, err := r.x.session.ChannelMessageEditComplex(me, reqOpts(ctx)...)
			return classify("redraw question's buttons", err)
		}})
	if err != nil && !errors.Is(err, adapters.ErrNotModified) {
		r.x.log.Warn("discord: question's buttons not redrawn", "err", err)
	}
}

// PostQuestion posts q with a button per choice (the first green, the second red), answering
// the message the responder answers, through the channel's budgets in the delivery engine.
func (r msgResponder) PostQuestion(ctx context.Context, ref chat.Ref, id string, q adapters.Question) (string, error) {
	return r.x.postQuestion(ctx, ref, r.replyTo, id, q)
}

// postQuestion posts q with a button per choice (the first green, the second red), answering
// message replyTo, through the channel's budgets in the delivery engine.
func (x *interactions) postQuestion(ctx context.Context, ref chat.Ref, replyTo, id string, q adapters.Question) (string, error) {
	ch := channelOf(ref)
	ms := &discordgo.MessageSend{Content: plainText(q.Text), AllowedMentions: noMentions(), Reference: reference(ch, replyTo),
		Components: questionRows(id, q.Choices)}
	var m *discordgo.Message
	err := x.engine.Do(ctx, delivery.Request{Chat: ref, Class: delivery.ClassMessage, Kind: delivery.EventSend, Detached: true,
		Run: func(ctx context.Context) error {
			var err error
			m, err = x.session.ChannelMessageSendComplex(ch, ms, reqOpts(ctx)...)
			return classify("post approval question in channel "+ch, err)
		}})
	if err != nil {
		return "", err
	}
	return m.ID, nil
}

// questionRows are the action rows of question id's choices (the first green, the second
// red); an action row holds at most 5 buttons, a message at most 5 rows.
func questionRows(id string, choices []adapters.Choice) []discordgo.MessageComponent {
	var rows []discordgo.MessageComponent
	var buttons []discordgo.MessageComponent
	for i, ch := range choices {
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
		if len(buttons) == 5 || i == len(choices)-1 {
			rows, buttons = append(rows, discordgo.ActionsRow{Components: buttons}), nil
		}
	}
	return rows[:min(len(rows), 5)]
}

// EditQuestion sets the question's text and takes its buttons off, through the channel's
// budgets in the delivery engine; a failure is logged.
func (r msgResponder) EditQuestion(ctx context.Context, ref chat.Ref, messageID, text string) {
	r.x.closeQuestion(ctx, ref, messageID, text)
}

// closeQuestion sets a question's text and takes its buttons off, through the channel's
// budgets in the delivery engine; a failure is logged.
func (x *interactions) closeQuestion(ctx context.Context, ref chat.Ref, messageID, text string) {
	ch := channelOf(ref)
	none := []discordgo.MessageComponent{}
	text = plainText(text)
	me := &discordgo.MessageEdit{ID: messageID, Channel: ch, Content: &text, Components: &none, AllowedMentions: noMentions()}
	err := x.engine.Do(ctx, delivery.Request{Chat: ref, Class: delivery.ClassMessage, Kind: delivery.EventEdit,
		Run: func(ctx context.Context) error {
			_, err := x.session.ChannelMessageEditComplex(me, reqOpts(ctx)...)
			return classify("close approval question", err)
		}})
	if err != nil && !errors.Is(err, adapters.ErrNotModified) {
		x.log.Warn("discord: approval question not closed", "err", err)
	}
}

// chatAdminPermissions make a guild member a chat admin for approvals.
const chatAdminPermissions = discordgo.PermissionAdministrator | discordgo.PermissionManageGuild | discordgo.PermissionManageChannels

// onApprovePress takes a press of an approval button; rest is "<id>:<choice>". A refused press
// is told why in a message only the presser sees; an accepted one turns the question into the
// decision, without buttons.
func (x *interactions) onApprovePress(ctx context.Context, i *discordgo.Interaction, user *discordgo.User, rest string) {
	id, choice, _ := strings.Cut(rest, ":")
	// The member's permissions are the ones of the channel the press was made in, which a
	// question takes a press from only when it is its own (adapters.PressedIn).
	ans := adapters.Answer{UserID: user.ID, UserName: user.Username, Chat: chat.Ref{Platform: chat.Discord, ChatID: i.ChannelID},
		ChatAdmin: i.Member != nil && i.Member.Permissions&chatAdminPermissions != 0}
	msgID := ""
	if i.Message != nil {
		msgID = i.Message.ID
	}
	oq, d := x.questions.Take(id, choice, msgID, ans)
	switch {
	case oq == nil && x.questions.Shared():
		x.pressElsewhere(ctx, i, adapters.Press{Question: id, Choice: choice, MessageID: msgID, Answer: ans})
	case oq == nil:
		x.respond(ctx, i, discordgo.InteractionResponseChannelMessageWithSource,
			&discordgo.InteractionResponseData{Content: adapters.ClosedPress, Flags: discordgo.MessageFlagsEphemeral, AllowedMentions: noMentions()})
	case d.Redraw != nil:
		x.redrawOnPress(ctx, i, id, oq)
	case !d.Accept:
		x.respond(ctx, i, discordgo.InteractionResponseChannelMessageWithSource,
			&discordgo.InteractionResponseData{Content: d.Text, Flags: discordgo.MessageFlagsEphemeral, AllowedMentions: noMentions()})
	default:
		none := []discordgo.MessageComponent{}
		x.questions.Show(oq, func() {
			if !x.respond(ctx, i, discordgo.InteractionResponseUpdateMessage,
				&discordgo.InteractionResponseData{Content: plainText(d.Text), Components: none, AllowedMentions: noMentions()}) {
				x.log.Warn("discord: approval question not updated", "question", x.questions.MessageOf(oq))
			}
		})
	}
}

// redrawOnPress answers press i of question id with its buttons as they are now, in place
// (UPDATE_MESSAGE with the components alone, so the text stays); a question settled meanwhile
// gets a bare acknowledgement, its settling answer having taken the buttons off.
func (x *interactions) redrawOnPress(ctx context.Context, i *discordgo.Interaction, id string, oq *adapters.OpenQuestion) {
	drawn := x.questions.Redraw(oq, func(choices []adapters.Choice) {
		cctx, cancel := context.WithTimeout(ctx, ackTimeout)
		defer cancel()
		body := map[string]any{"type": discordgo.InteractionResponseUpdateMessage,
			"data": map[string]any{"components": questionRows(id, choices)}}
		err := x.answer(cctx, i, "redraw question's buttons", func(opts []discordgo.RequestOption) error {
			_, err := x.session.RequestWithBucketID("POST", discordgo.EndpointInteractionResponse(i.ID, i.Token), body,
				discordgo.EndpointInteractionResponse(i.ID, ""), opts...)
			return err
		})
		if err != nil {
			x.log.Warn("discord: question's buttons not redrawn", "interaction", i.ID, "err", err)
		}
	})
	if !drawn {
		x.respond(ctx, i, discordgo.InteractionResponseDeferredMessageUpdate, nil)
	}
}

// pressElsewhere carries press p of a question another replica's turn asked to that replica.
// The interaction is acknowledged at once with a deferred update (Discord wants an answer
// within 3 s; the verdict may take longer); a refusal, or the question being closed, then
// reaches the presser as an ephemeral follow-up. An accepted press needs nothing more here:
// the replica that asked edits the question.
func (x *interactions) pressElsewhere(ctx context.Context, i *discordgo.Interaction, p adapters.Press) {
	if !x.respond(ctx, i, discordgo.InteractionResponseDeferredMessageUpdate, nil) {
		return // Discord shows the presser that the interaction failed; a verdict could not reach them
	}
	v, err := x.questions.Elsewhere(ctx, p)
	text := ""
	switch {
	case err != nil:
		x.log.Warn("discord: press not carried to the replica that asked", "interaction", i.ID, "err", err)
		text = adapters.UnrelayedPress
	case v.Closed:
		text = adapters.ClosedPress
	case !v.Accepted:
		text = v.Text
	}
	if text == "" {
		return
	}
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err = x.answer(fctx, i, "follow up button press", func(opts []discordgo.RequestOption) error {
		_, err := x.session.FollowupMessageCreate(i, true, &discordgo.WebhookParams{Content: plainText(text),
			Flags: discordgo.MessageFlagsEphemeral, AllowedMentions: noMentions()}, opts...)
		return err
	})
	if err != nil {
		x.log.Warn("discord: verdict on a press not sent to the presser", "interaction", i.ID, "err", err)
	}
}

// questionMaxLen is Discord's limit on a message's content (characters).
const questionMaxLen = 2000

// markdownChars are the characters Discord's Markdown gives a meaning (emphasis, code, spoilers,
// quotes, headings, lists, masked links, autolinks through "://", custom emoji and mentions).
const markdownChars = "\\*_~`|>#-[]()<:"

// plainText escapes text so Discord shows it as written: a question's text is the model's
// arguments, which must not turn into a masked link, a heading or hidden spoilers there. It is
// cut to the message limit (escapes add characters).
func plainText(text string) string {
	var b strings.Builder
	for _, r := range text {
		if strings.ContainsRune(markdownChars, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	out := b.String()
	if n := utf8.RuneCountInString(out); n > questionMaxLen {
		runes := []rune(out)[:questionMaxLen-1]
		if len(runes) > 0 && runes[len(runes)-1] == '\\' {
			runes = runes[:len(runes)-1]
		}
		out = string(runes) + "…"
	}
	return out
}
