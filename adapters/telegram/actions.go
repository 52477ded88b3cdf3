package telegram

import (
	"context"
	"strconv"
	"strings"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"relaybot/adapters"
)

// callbackQuery is a pressed inline button (Bot API CallbackQuery).
type callbackQuery struct {
	ID      string         `json:"id"`
	From    *tgbotapi.User `json:"from"`
	Message *message       `json:"message"`
	Data    string         `json:"data"`
}

// generationStopped is a user pressing the Stop button of a draft (Bot API
// MessageGenerationStopped, the stopped_message_generation update).
type generationStopped struct {
	Chat            tgChat `json:"chat"`
	MessageThreadID int    `json:"message_thread_id"`
	DraftID         int64  `json:"draft_id"`
}

// action turns a user's action into the Inbound the Handler acts on, or false when there is
// nothing to hand over. A pressed inline button is routed by its callback data's prefix
// ("stop:" is the Stop button of a streaming message) and always answered, so the user's
// client stops showing a spinner; a stopped draft is the /stop of its private chat. Whoever
// acts is the Inbound's user: the pipeline refuses a bystander's stop as it refuses their /stop.
func (a *Adapter) action(ctx context.Context, u *update) (adapters.Inbound, bool) {
	switch {
	case u.StoppedGeneration != nil:
		g := u.StoppedGeneration
		// A draft's chat is private: its user is the chat.
		from := &tgbotapi.User{ID: g.Chat.ID}
		in, ok := a.sender(g.Chat, from)
		if !ok {
			return adapters.Inbound{}, false
		}
		if g.MessageThreadID != 0 {
			in.Chat.ThreadID = strconv.Itoa(g.MessageThreadID)
		}
		in.Command, in.Time = "stop", time.Now().UTC()
		return in, true
	case u.CallbackQuery != nil:
		cq := u.CallbackQuery
		if !strings.HasPrefix(cq.Data, StopData) {
			// Other buttons (approval questions) have routes of their own.
			a.onCallback(ctx, cq)
			return adapters.Inbound{}, false
		}
		a.answerCallback(ctx, cq, "", false)
		if cq.Message == nil {
			return adapters.Inbound{}, false // the message is too old for Telegram to say which
		}
		in, ok := a.sender(cq.Message.Chat, cq.From)
		if !ok {
			return adapters.Inbound{}, false
		}
		if cq.Message.MessageThreadID != 0 && cq.Message.IsTopicMessage {
			in.Chat.ThreadID = strconv.Itoa(cq.Message.MessageThreadID)
		}
		in.Command, in.Time = "stop", time.Now().UTC()
		return in, true
	}
	return adapters.Inbound{}, false
}
