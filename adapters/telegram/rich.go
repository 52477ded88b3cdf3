package telegram

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"relaybot/adapters"
	"relaybot/adapters/markdown"
	"relaybot/chat"
)

var _ adapters.RichMessenger = (*messenger)(nil)

// RichFits reports whether text may go out as one rich message (sendRichMessage): rich
// messages are on (telegram.rich = "auto"), the Bot API has not answered that it does not know
// the method, and the rendered text is within Telegram's documented limits.
func (m *messenger) RichFits(_ chat.Ref, text string) bool {
	if !m.rich || m.richOff.Load() {
		return false
	}
	h, size := markdown.RichHTML(text)
	return strings.TrimSpace(h) != "" && markdown.TelegramRichLimits.Fits(size)
}

// richParam is the rich_message parameter for text: its HTML rendering (InputRichMessage.html).
func richParam(text string) string {
	h, _ := markdown.RichHTML(text)
	b, _ := json.Marshal(map[string]string{"html": h})
	return string(b)
}

// SendRich posts text as a rich message with sendRichMessage, replying to opts.ReplyTo.
func (m *messenger) SendRich(ctx context.Context, chat chat.Ref, text string, opts adapters.SendOptions) (adapters.MessageRef, error) {
	p := chatParams(chat)
	p["rich_message"] = richParam(text)
	if opts.ReplyTo != "" {
		p["reply_parameters"] = fmt.Sprintf(`{"message_id":%s,"allow_sending_without_reply":true}`, opts.ReplyTo)
	}
	if opts.Stoppable {
		p["reply_markup"] = stopKeyboard
	}
	m.budgetParams(p)
	res, err := m.api.call(ctx, "sendRichMessage", p)
	if err != nil {
		return adapters.MessageRef{}, m.richError(err)
	}
	return messageRef(chat, res)
}

// EditRich makes a message the bot sent show text as a rich message (editMessageText with
// rich_message); its inline keyboard goes, as with every edit without reply_markup.
func (m *messenger) EditRich(ctx context.Context, msg adapters.MessageRef, text string) error {
	p := chatParams(msg.Chat)
	delete(p, "message_thread_id")
	p["message_id"] = msg.ID
	p["rich_message"] = richParam(text)
	err := m.api.callInto(ctx, "editMessageText", p, nil)
	if err != nil {
		return m.richError(err)
	}
	return nil
}

// Delete removes a message the bot sent (deleteMessage).
func (m *messenger) Delete(ctx context.Context, msg adapters.MessageRef) error {
	p := chatParams(msg.Chat)
	delete(p, "message_thread_id")
	p["message_id"] = msg.ID
	err := m.api.callInto(ctx, "deleteMessage", p, nil)
	var ae *apiError
	if errors.As(err, &ae) && ae.code == 400 && strings.Contains(strings.ToLower(ae.desc), "message to delete not found") {
		return fmt.Errorf("%w: %w", err, adapters.ErrMessageGone)
	}
	return err
}

// richError marks Telegram's refusal of a rich message: a 400 that is not about the message
// (gone, not modified) or its length, or a 404, which means this Bot API server does not know
// rich messages at all: then no chat gets one again for the process's life.
func (m *messenger) richError(err error) error {
	var ae *apiError
	if !errors.As(err, &ae) || errors.Is(err, adapters.ErrNotModified) || errors.Is(err, adapters.ErrMessageGone) ||
		errors.Is(err, adapters.ErrTooLong) {
		return err
	}
	switch {
	case ae.code == 404:
		if m.richOff.CompareAndSwap(false, true) {
			m.api.log.Warn("telegram: the Bot API does not know rich messages; answers go out as plain messages", "err", err)
		}
	case ae.code != 400:
		return err
	}
	return fmt.Errorf("%w: %w", err, adapters.ErrRichRefused)
}
