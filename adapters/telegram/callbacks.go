package telegram

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"relaybot/adapters"
	"relaybot/adapters/delivery"
	"relaybot/chat"
)

// callbackRoute handles the presses whose callback data starts with its prefix; rest is the data
// after the prefix. A feature with buttons adds a prefix to Adapter.callbackRoutes.
type callbackRoute func(ctx context.Context, q *callbackQuery, rest string)

// approvePrefix starts the callback data of approval question buttons: "approve:<id>:<choice>".
const approvePrefix = "approve:"

// onCallback hands a press to the route of its data's prefix; a press nobody routes is
// answered, so the user's client stops its spinner.
func (a *Adapter) onCallback(ctx context.Context, q *callbackQuery) {
	for prefix, route := range a.callbackRoutes {
		if rest, ok := strings.CutPrefix(q.Data, prefix); ok {
			route(ctx, q, rest)
			return
		}
	}
	a.answerCallback(ctx, q, "This button no longer works.", false)
}

// callbackTimeout bounds the answer to a press: Telegram forgets a callback query about 15 s
// after the press, and an answer that late has no one to reach.
const callbackTimeout = 15 * time.Second

// answerCallback answers press q (its client stops the spinner, and shows text when set)
// through the delivery engine's retry stage.
func (a *Adapter) answerCallback(ctx context.Context, q *callbackQuery, text string, alert bool) {
	p := tgbotapi.Params{"callback_query_id": q.ID}
	if text != "" {
		p["text"] = text
	}
	if alert {
		p["show_alert"] = "true"
	}
	ref := chat.Ref{Platform: chat.Telegram}
	if q.Message != nil {
		ref.ChatID = strconv.FormatInt(q.Message.Chat.ID, 10)
	}
	cctx, cancel := context.WithTimeout(ctx, callbackTimeout)
	defer cancel()
	err := a.engine.Do(cctx, delivery.Request{Chat: ref, Class: delivery.ClassInteraction, Kind: delivery.EventInteraction,
		Run: func(ctx context.Context) error {
			err := a.api.callInto(ctx, "answerCallbackQuery", p, nil)
			return err
		}})
	if err != nil {
		a.log.Warn("telegram: answerCallbackQuery failed", "err", err)
	}
}

// askResponder is the Responder of a Telegram message with approval buttons (adapters.Asker).
type askResponder struct {
	adapters.Responder
	a    *Adapter
	chat chat.Ref
}

var (
	_ adapters.Asker             = askResponder{}
	_ adapters.RedrawAsker       = askResponder{}
	_ adapters.QuestionMessenger = askResponder{}
	_ adapters.QuestionRedrawer  = askResponder{}
)

// Ask posts q with an inline keyboard and waits for an accepted press or the end of ctx.
func (r askResponder) Ask(ctx context.Context, q adapters.Question, decide func(adapters.Answer) (bool, string)) (adapters.Answer, error) {
	return adapters.Ask(ctx, &r.a.questions, r, r.chat, q, decide)
}

// AskRedraw is Ask whose presses may redraw the keyboard in place (editMessageReplyMarkup).
func (r askResponder) AskRedraw(ctx context.Context, q adapters.Question, decide func(adapters.Answer) adapters.Decision) (adapters.Answer, error) {
	return adapters.AskRedraw(ctx, &r.a.questions, r, r.chat, q, decide)
}

// keyboard is the inline keyboard of question id's choices, two buttons a row.
func keyboard(id string, choices []adapters.Choice) string {
	var row []map[string]string
	var rows [][]map[string]string
	for i, ch := range choices {
		b := map[string]string{"text": ch.Label, "callback_data": approvePrefix + id + ":" + ch.ID}
		if ch.URL != "" {
			b = map[string]string{"text": ch.Label, "url": ch.URL} // opened by the user, never pressed
		}
		row = append(row, b)
		if len(row) == 2 || i == len(choices)-1 {
			rows, row = append(rows, row), nil
		}
	}
	markup, _ := json.Marshal(map[string]any{"inline_keyboard": rows}) // strings only: always encodes
	return string(markup)
}

// PostQuestion posts q with an inline keyboard, two buttons a row, through the chat's budgets
// in the delivery engine.
func (r askResponder) PostQuestion(ctx context.Context, ref chat.Ref, id string, q adapters.Question) (string, error) {
	p := chatParams(ref)
	p["text"] = q.Text // plain text: no parse_mode, so the arguments' markup stays as written
	p["link_preview_options"] = `{"is_disabled":true}`
	p["reply_markup"] = keyboard(id, q.Choices)
	var msg adapters.MessageRef
	err := r.a.engine.Do(ctx, delivery.Request{Chat: ref, Class: delivery.ClassMessage, Kind: delivery.EventSend, Detached: true,
		Run: func(ctx context.Context) error {
			res, err := r.a.api.call(ctx, "sendMessage", p)
			if err == nil {
				msg, err = messageRef(ref, res)
			}
			return err
		}})
	if err != nil {
		return "", fmt.Errorf("telegram: post approval question: %w", err)
	}
	return msg.ID, nil
}

// EditQuestion sets the question's text and removes its keyboard.
func (r askResponder) EditQuestion(ctx context.Context, ref chat.Ref, messageID, text string) {
	r.a.editQuestion(ctx, ref, messageID, text)
}

// editQuestion sets a question's text and removes its keyboard, through the chat's budgets in
// the delivery engine; a failure is logged.
func (a *Adapter) editQuestion(ctx context.Context, ref chat.Ref, messageID, text string) {
	p := chatParams(ref)
	delete(p, "message_thread_id")
	p["message_id"] = messageID
	p["text"] = text
	err := a.engine.Do(ctx, delivery.Request{Chat: ref, Class: delivery.ClassMessage, Kind: delivery.EventEdit,
		Run: func(ctx context.Context) error {
			err := a.api.callInto(ctx, "editMessageText", p, nil)
			return err
		}})
	if err != nil && !errors.Is(err, adapters.ErrNotModified) {
		a.log.Warn("telegram: approval question not updated", "err", err)
	}
}

// RedrawQuestion sets the keyboard of question id's message, keeping its text.
func (r askResponder) RedrawQuestion(ctx context.Context, ref chat.Ref, id, messageID string, choices []adapters.Choice) {
	r.a.redrawQuestion(ctx, ref, id, messageID, choices)
}

// redrawQuestion sets the keyboard of question id's message (editMessageReplyMarkup), keeping
// its text, through the chat's budgets in the delivery engine; a failure is logged. A keyboard
// already showing ("message is not modified") is no failure.
func (a *Adapter) redrawQuestion(ctx context.Context, ref chat.Ref, id, messageID string, choices []adapters.Choice) {
	p := tgbotapi.Params{"chat_id": ref.ChatID, "message_id": messageID, "reply_markup": keyboard(id, choices)}
	err := a.engine.Do(ctx, delivery.Request{Chat: ref, Class: delivery.ClassMessage, Kind: delivery.EventEdit,
		Run: func(ctx context.Context) error {
			return a.api.callInto(ctx, "editMessageReplyMarkup", p, nil)
		}})
	if err != nil && !errors.Is(err, adapters.ErrNotModified) {
		a.log.Warn("telegram: question's keyboard not redrawn", "err", err)
	}
}

// onApprovePress takes a press of an approval button ("<id>:<choice>").
func (a *Adapter) onApprovePress(ctx context.Context, q *callbackQuery, rest string) {
	id, choice, _ := strings.Cut(rest, ":")
	if q.From == nil {
		a.answerCallback(ctx, q, adapters.ClosedPress, false)
		return
	}
	ref, msgID := pressedIn(q.Message)
	ans := adapters.Answer{UserID: strconv.FormatInt(q.From.ID, 10), UserName: q.From.UserName, Chat: ref}
	// Rights are asked of the chat the press was made in, which a question takes a press from
	// only when it is its own chat (adapters.PressedIn): an admin of one group is no admin of
	// another group's questions. A press the question here refuses as stray asks nothing.
	ans.ChatAdmin = ref.ChatID != "" && !a.questions.Stray(id, ref) && a.chatAdmin(ctx, ref, q.From.ID)
	if ans.UserName == "" {
		ans.UserName = strings.TrimSpace(q.From.FirstName + " " + q.From.LastName)
	}
	oq, d := a.questions.Take(id, choice, msgID, ans)
	switch {
	case oq == nil && a.questions.Shared():
		a.pressElsewhere(ctx, q, adapters.Press{Question: id, Choice: choice, MessageID: msgID, Answer: ans})
	case oq == nil:
		a.answerCallback(ctx, q, adapters.ClosedPress, false)
	case d.Redraw != nil:
		a.answerCallback(ctx, q, "", false)
		a.questions.Redraw(oq, func(choices []adapters.Choice) {
			a.redrawQuestion(ctx, oq.Chat, id, a.questions.MessageOf(oq), choices)
		})
	case !d.Accept:
		a.answerCallback(ctx, q, d.Text, true)
	default:
		a.answerCallback(ctx, q, "", false)
		a.questions.Show(oq, func() { a.editQuestion(ctx, oq.Chat, a.questions.MessageOf(oq), d.Text) })
	}
}

// pressedIn is the chat, forum topic included, and the message a press was made on; zero when
// Telegram does not say (a press of an inline message, or of one too old to be sent).
func pressedIn(m *message) (chat.Ref, string) {
	if m == nil || m.Chat.ID == 0 {
		return chat.Ref{}, ""
	}
	ref := chat.Ref{Platform: chat.Telegram, ChatID: strconv.FormatInt(m.Chat.ID, 10)}
	if m.MessageThreadID != 0 && m.IsTopicMessage { // as inbound names a message's topic
		ref.ThreadID = strconv.Itoa(m.MessageThreadID)
	}
	return ref, strconv.Itoa(m.MessageID)
}

// pressElsewhere carries press p of a question another replica's turn asked to that replica and
// answers q with its verdict: nothing to show for an accepted or redrawing press (the asker
// edits the question), the reason in an alert for a refused one.
func (a *Adapter) pressElsewhere(ctx context.Context, q *callbackQuery, p adapters.Press) {
	v, err := a.questions.Elsewhere(ctx, p)
	switch {
	case err != nil:
		a.log.Warn("telegram: press not carried to the replica that asked", "err", err)
		a.answerCallback(ctx, q, adapters.UnrelayedPress, true)
	case v.Closed:
		a.answerCallback(ctx, q, adapters.ClosedPress, false)
	case !v.Accepted && v.Text != "":
		a.answerCallback(ctx, q, v.Text, true)
	default: // settled, or redrawn: the replica that asked edits the question
		a.answerCallback(ctx, q, "", false)
	}
}

// CloseQuestion implements adapters.QuestionCloser: the question of a replica that was taken
// over says it closed and loses its keyboard.
func (a *Adapter) CloseQuestion(ctx context.Context, ref chat.Ref, messageID, text string) {
	a.editQuestion(ctx, ref, messageID, text)
}

// chatAdmin asks Telegram whether user administers a group chat; false in a private chat or
// when Telegram cannot say.
func (a *Adapter) chatAdmin(ctx context.Context, chat chat.Ref, user int64) bool {
	if !strings.HasPrefix(chat.ChatID, "-") { // private chats have positive ids
		return false
	}
	res, err := a.api.call(ctx, "getChatMember", tgbotapi.Params{"chat_id": chat.ChatID, "user_id": strconv.FormatInt(user, 10)})
	if err != nil {
		a.log.Warn("telegram: getChatMember failed; the presser counts as no chat admin", "err", err)
		return false
	}
	var m struct {
		Status string `json:"status"`
	}
	return json.Unmarshal(res, &m) == nil && (m.Status == "creator" || m.Status == "administrator")
}

// adminTTL is how long a getChatMember answer about a sender is kept.
const adminTTL = time.Minute

type adminVerdict struct {
	admin bool
	until time.Time
}

// adminCache remembers who administers which chat, so a busy group costs one getChatMember
// per sender a minute, not one per message.
type adminCache struct {
	mu sync.Mutex
	m  map[adminKey]adminVerdict
}

// adminKey names one member of one chat.
type adminKey struct {
	chat string
	user int64
}

// chatAdminCached is chatAdmin, remembered for adminTTL.
func (a *Adapter) chatAdminCached(ctx context.Context, ref chat.Ref, user int64) bool {
	key := adminKey{chat: ref.ChatID, user: user}
	now := time.Now()
	a.admins.mu.Lock()
	v, ok := a.admins.m[key]
	a.admins.mu.Unlock()
	if ok && now.Before(v.until) {
		return v.admin
	}
	admin := a.chatAdmin(ctx, ref, user)
	a.admins.mu.Lock()
	for k, old := range a.admins.m { // drop what has expired, so the map stays small
		if !now.Before(old.until) {
			delete(a.admins.m, k)
		}
	}
	a.admins.m[key] = adminVerdict{admin: admin, until: now.Add(adminTTL)}
	a.admins.mu.Unlock()
	return admin
}
