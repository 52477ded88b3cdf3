package telegram

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"relaybot/adapters"
	"relaybot/chat"
)

// messenger implements adapters.Messenger for Telegram. Text is rendered from Markdown to
// entities; when Telegram refuses the entities, the same text goes out plain.
type messenger struct {
	api    *api
	drafts bool // stream private-chat replies as drafts (telegram.drafts = "auto")
	paid   bool // send allow_paid_broadcast (Options.PaidBroadcast)
	// rich sends final answers as rich messages (telegram.rich = "auto"); richOff: the Bot API
	// answered that it does not know them.
	rich    bool
	richOff atomic.Bool
}

// budgetParams marks a send as paid broadcast when the bot is configured for it. Only the
// methods that send a message take allow_paid_broadcast (sendMessage, sendPhoto, sendDocument,
// sendVoice, sendRichMessage); editMessageText and sendMessageDraft do not, and stay within
// Telegram's free 30 a second (the delivery engine's free pool).
func (m *messenger) budgetParams(p tgbotapi.Params) {
	if m.paid {
		p["allow_paid_broadcast"] = "true"
	}
}

var (
	_ adapters.Messenger    = (*messenger)(nil)
	_ adapters.StreamEditor = (*messenger)(nil)
	_ adapters.Drafter      = (*messenger)(nil)
)

// StopData is the callback data of the Stop button on a streaming message. Callback data
// starts with its feature's prefix ("stop:"); the adapter routes a pressed button by it.
const StopData = "stop:"

// stopKeyboard is the reply_markup of a message still streaming, an inline keyboard of one
// Stop button, as json.Marshal writes it (keys sorted): every streaming send and edit carries
// it.
const stopKeyboard = `{"inline_keyboard":[[{"callback_data":"` + StopData + `","text":"Stop"}]]}`

func chatParams(chat chat.Ref) tgbotapi.Params {
	p := tgbotapi.Params{"chat_id": chat.ChatID}
	if chat.ThreadID != "" {
		p["message_thread_id"] = chat.ThreadID
	}
	return p
}

func textParams(p tgbotapi.Params, md string, plain bool) {
	if plain {
		p["text"] = md
		delete(p, "entities")
		return
	}
	text, ents := Render(md)
	if strings.TrimSpace(text) == "" {
		text, ents = md, nil // nothing visible after rendering: show the source
	}
	p["text"] = text
	if len(ents) > 0 {
		b, _ := json.Marshal(ents)
		p["entities"] = string(b)
	}
}

type sentMessage struct {
	MessageID int `json:"message_id"`
}

func (m *messenger) Send(ctx context.Context, chat chat.Ref, text string, opts adapters.SendOptions) (adapters.MessageRef, error) {
	p := chatParams(chat)
	p["link_preview_options"] = `{"is_disabled":true}`
	p["disable_web_page_preview"] = "true"
	if opts.ReplyTo != "" {
		p["reply_to_message_id"] = opts.ReplyTo
		p["allow_sending_without_reply"] = "true"
	}
	if opts.Stoppable {
		p["reply_markup"] = stopKeyboard
	}
	m.budgetParams(p)
	textParams(p, text, false)
	var sm sentMessage
	err := m.api.callInto(ctx, "sendMessage", p, &sm)
	if errors.Is(err, errEntities) {
		textParams(p, text, true)
		err = m.api.callInto(ctx, "sendMessage", p, &sm)
	}
	if err != nil {
		return adapters.MessageRef{}, err
	}
	if sm.MessageID == 0 {
		return adapters.MessageRef{}, errors.New("telegram sendMessage: answer without a message id")
	}
	return adapters.MessageRef{Chat: chat, ID: strconv.Itoa(sm.MessageID)}, nil
}

func messageRef(chat chat.Ref, res json.RawMessage) (adapters.MessageRef, error) {
	var sm sentMessage
	if err := json.Unmarshal(res, &sm); err != nil || sm.MessageID == 0 {
		return adapters.MessageRef{}, fmt.Errorf("telegram: answer without a message id: %s", res)
	}
	return adapters.MessageRef{Chat: chat, ID: strconv.Itoa(sm.MessageID)}, nil
}

// Edit replaces a message's text; an inline keyboard on it (the Stop button) goes, as an edit
// without reply_markup does on Telegram.
func (m *messenger) Edit(ctx context.Context, msg adapters.MessageRef, text string) error {
	return m.edit(ctx, msg, text, "")
}

// EditStreaming replaces the text of a message still streaming and keeps its Stop button.
func (m *messenger) EditStreaming(ctx context.Context, msg adapters.MessageRef, text string) error {
	return m.edit(ctx, msg, text, stopKeyboard)
}

func (m *messenger) edit(ctx context.Context, msg adapters.MessageRef, text, keyboard string) error {
	p := chatParams(msg.Chat)
	delete(p, "message_thread_id") // editMessageText names the message, not its topic
	if keyboard != "" {
		p["reply_markup"] = keyboard
	}
	p["message_id"] = msg.ID
	p["link_preview_options"] = `{"is_disabled":true}`
	p["disable_web_page_preview"] = "true"
	textParams(p, text, false)
	err := m.api.callInto(ctx, "editMessageText", p, nil)
	if errors.Is(err, errEntities) {
		textParams(p, text, true)
		err = m.api.callInto(ctx, "editMessageText", p, nil)
	}
	return err
}

// DraftsIn reports whether replies in chat stream as drafts: private chats (positive ids)
// when drafts are on.
func (m *messenger) DraftsIn(chat chat.Ref) bool {
	return m.drafts && !strings.HasPrefix(chat.ChatID, "-")
}

// Draft shows text as draft id with sendMessageDraft; stoppable adds Telegram's Stop button
// (can_stop) that keeps the partial text when pressed (keep_on_stop). A 400 or 404 answer
// means this bot or chat takes no drafts: it wraps adapters.ErrDraftsRefused.
func (m *messenger) Draft(ctx context.Context, chat chat.Ref, id int64, text string, stoppable bool) error {
	p := chatParams(chat)
	p["draft_id"] = strconv.FormatInt(id, 10)
	if stoppable {
		p["can_stop"], p["keep_on_stop"] = "true", "true"
	}
	textParams(p, text, false)
	err := m.api.callInto(ctx, "sendMessageDraft", p, nil)
	if errors.Is(err, errEntities) {
		textParams(p, text, true)
		err = m.api.callInto(ctx, "sendMessageDraft", p, nil)
	}
	var rl *adapters.RateLimitError
	if err != nil && !errors.As(err, &rl) && !errors.Is(err, adapters.ErrTemporary) && !errors.Is(err, adapters.ErrTooLong) &&
		ctx.Err() == nil && (strings.Contains(err.Error(), " 400 ") || strings.Contains(err.Error(), " 404 ")) {
		return fmt.Errorf("%w: %w", err, adapters.ErrDraftsRefused)
	}
	return err
}

// SendFiles posts each file as a photo or a document (one request per file; the delivery
// engine hands them over one at a time). The caption goes with the first file.
func (m *messenger) SendFiles(ctx context.Context, chat chat.Ref, files []chat.File, caption string, opts adapters.SendOptions) (adapters.MessageRef, error) {
	var first adapters.MessageRef
	for i, f := range files {
		p := chatParams(chat)
		m.budgetParams(p)
		if opts.ReplyTo != "" && i == 0 {
			p["reply_to_message_id"] = opts.ReplyTo
			p["allow_sending_without_reply"] = "true"
		}
		if caption != "" && i == 0 {
			text, ents := Render(caption)
			p["caption"] = text
			if len(ents) > 0 {
				b, _ := json.Marshal(ents)
				p["caption_entities"] = string(b)
			}
		}
		method, field := "sendDocument", "document"
		if f.IsImage() {
			method, field = "sendPhoto", "photo"
		}
		name := f.Name
		if name == "" {
			name = "file"
		}
		res, err := m.api.upload(ctx, method, p, []tgbotapi.RequestFile{{Name: field, Data: tgbotapi.FileBytes{Name: name, Bytes: f.Data}}})
		var rl *adapters.RateLimitError
		if err != nil && method == "sendPhoto" && ctx.Err() == nil && !errors.As(err, &rl) && !errors.Is(err, adapters.ErrTemporary) {
			// Telegram refuses some images as photos (too large, extreme sides or ratio):
			// the same file goes out as a document rather than not at all.
			res, err = m.api.upload(ctx, "sendDocument", p, []tgbotapi.RequestFile{{Name: "document", Data: tgbotapi.FileBytes{Name: name, Bytes: f.Data}}})
		}
		if err != nil {
			return first, fmt.Errorf("file %q: %w", name, err)
		}
		if i == 0 {
			if first, err = messageRef(chat, res); err != nil {
				return first, err
			}
		}
	}
	return first, nil
}

// SendVoice posts an OGG/Opus file as a voice message (sendVoice), replying to the user's
// message when opts says so.
func (m *messenger) SendVoice(ctx context.Context, chat chat.Ref, voice chat.File, opts adapters.SendOptions) (adapters.MessageRef, error) {
	p := chatParams(chat)
	m.budgetParams(p)
	if opts.ReplyTo != "" {
		p["reply_to_message_id"] = opts.ReplyTo
		p["allow_sending_without_reply"] = "true"
	}
	name := voice.Name
	if name == "" {
		name = "voice.ogg"
	}
	res, err := m.api.upload(ctx, "sendVoice", p, []tgbotapi.RequestFile{{Name: "voice", Data: tgbotapi.FileBytes{Name: name, Bytes: voice.Data}}})
	if err != nil {
		return adapters.MessageRef{}, fmt.Errorf("voice %q: %w", name, err)
	}
	return messageRef(chat, res)
}

func (m *messenger) Typing(ctx context.Context, chat chat.Ref) error {
	p := chatParams(chat)
	p["action"] = "typing"
	err := m.api.callInto(ctx, "sendChatAction", p, nil)
	return err
}
