package delivery

import (
	"context"
	"errors"
	"strings"

	"relaybot/adapters"
)

// richFinal delivers the final text as one rich message when the Messenger can
// (adapters.RichMessenger) and the chat has not refused one: the reply's first message becomes
// the rich message, or, when the reply shows a draft (which only a new message ends) or has no
// message yet, a new one does; then the messages the previews rolled the answer over into are
// deleted, so the chat ends with the whole answer once, where it began.
//
// done reports that the final text went out (or failed for good with err). A refusal, or any
// failure of the rich request itself, leaves the reply's messages as they were and done false:
// the caller delivers the text the usual way. Only ErrRichRefused is remembered for the chat.
func (r *Reply) richFinal(ctx context.Context, text string) (done bool, err error) {
	rm, ok := r.e.m.(adapters.RichMessenger)
	if !ok || strings.TrimSpace(text) == "" || r.e.richRefused(r.chat) || !rm.RichFits(r.chat, text) {
		return false, nil
	}
	r.mu.Lock()
	drafting := r.draftText != ""
	r.mu.Unlock()
	old := r.msgs
	var ref adapters.MessageRef
	if len(old) > 0 && !drafting {
		err = r.call(ctx, func(cctx context.Context) error { return rm.EditRich(cctx, old[0].ref, text) })
		switch {
		case err == nil:
			r.observe(Event{Kind: EventEdit, Chat: r.chat, Final: true, Took: r.took})
			ref, old = old[0].ref, old[1:]
		case errors.Is(err, adapters.ErrNotModified):
			r.observe(Event{Kind: EventNotModified, Chat: r.chat, Final: true, Took: r.took})
			ref, old, err = old[0].ref, old[1:], nil
		case errors.Is(err, adapters.ErrMessageGone):
			r.observe(Event{Kind: EventFallback, Chat: r.chat, Final: true, Err: err, Took: r.took})
			old, err = old[1:], nil
		}
	}
	if ref == (adapters.MessageRef{}) && err == nil {
		err = r.post(ctx, func(cctx context.Context) error {
			var err error
			ref, err = rm.SendRich(cctx, r.chat, text, r.sendOptions(true))
			return err
		})
		if err == nil {
			r.observe(Event{Kind: EventSend, Chat: r.chat, Final: true, Took: r.took})
			r.mu.Lock()
			r.draftText, r.persist = "", false // a message from the bot ends the chat's draft
			r.mu.Unlock()
		}
	}
	if err != nil {
		if ctx.Err() != nil || errors.Is(err, ErrClosed) {
			return true, err
		}
		r.observe(Event{Kind: EventFallback, Chat: r.chat, Final: true, Err: err, Took: r.took})
		if errors.Is(err, adapters.ErrRichRefused) {
			r.e.refuseRich(r.chat, err)
		} else {
			r.e.log.Warn("rich message not delivered; sending the answer as plain messages", "chat", r.chat.String(), "err", err)
		}
		return false, nil
	}
	r.msgs = []sent{{ref: ref, text: text}}
	for _, m := range old {
		r.deletePart(ctx, rm, m.ref)
	}
	return true, nil
}

// deletePart removes a message the rich final replaced. One that cannot be deleted stays (its
// text is also in the rich message): that is said in the log, and the answer is not failed.
func (r *Reply) deletePart(ctx context.Context, rm adapters.RichMessenger, msg adapters.MessageRef) {
	err := r.call(ctx, func(cctx context.Context) error { return rm.Delete(cctx, msg) })
	if err != nil && !errors.Is(err, adapters.ErrMessageGone) {
		r.observe(Event{Kind: EventFailed, Chat: r.chat, Final: true, Err: err, Took: r.took})
		r.e.log.Warn("a part of the streamed answer was not deleted after the rich message replaced it",
			"chat", r.chat.String(), "message", msg.ID, "err", err)
	}
}
