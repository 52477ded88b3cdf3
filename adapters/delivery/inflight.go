package delivery

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"relaybot/adapters"
)

// InFlight records the message each reply is streaming into and the text it shows there, so
// that should this process die mid-reply, another replica can end that message with a note
// (Engine.MarkInterrupted). Its methods are called on the delivery path and must not block.
type InFlight interface {
	// Showing records that reply id (unique within the engine) shows text in msg, the last
	// message it has posted.
	Showing(id string, msg adapters.MessageRef, text string)
	// Ended forgets reply id: its final text was delivered, or failed for good.
	Ended(id string)
}

// InterruptedNote ends the partial message of a reply whose replica died mid-answer.
const InterruptedNote = "— interrupted"

// showing tells Options.InFlight that r shows text in msg.
func (r *Reply) showing(msg adapters.MessageRef, text string) {
	f := r.e.opts.InFlight
	if f == nil {
		return
	}
	if r.id == "" {
		r.id = strconv.FormatInt(r.e.replySeq.Add(1), 10)
	}
	f.Showing(r.id, msg, text)
}

// ended tells Options.InFlight that r is over.
func (r *Reply) ended() {
	if f := r.e.opts.InFlight; f != nil && r.id != "" {
		f.Ended(r.id)
	}
}

// MarkInterrupted edits msg, a message of a reply that another process was streaming when it
// died, to show shown (what it last showed) followed by InterruptedNote; a code block left
// open is closed first, and a text with no room for the note loses its end. It is paced and
// retried like a final edit. A message the platform no longer lets the bot edit is reported
// with adapters.ErrMessageGone; one that already ends with the note counts as done.
func (e *Engine) MarkInterrupted(ctx context.Context, msg adapters.MessageRef, shown string) error {
	shown = strings.TrimRight(shown, " \n")
	if strings.HasSuffix(shown, InterruptedNote) {
		return nil
	}
	suffix := "\n\n" + InterruptedNote
	if strings.Count(shown, "```")%2 == 1 {
		suffix = "\n```" + suffix
	}
	if room := e.limits.MaxLen - Length(suffix, e.limits.Unit); e.limits.MaxLen > 0 && Length(shown, e.limits.Unit) > room {
		if parts := SplitLines(shown, max(room-1, 1), 0, e.limits.Unit); len(parts) > 0 {
			shown = strings.TrimRight(parts[0], " \n") + "…"
		}
	}
	r := &Reply{e: e, ctx: ctx, chat: msg.Chat}
	err := r.call(ctx, func(cctx context.Context) error { return e.m.Edit(cctx, msg, shown+suffix) })
	if errors.Is(err, adapters.ErrNotModified) {
		return nil
	}
	if err == nil {
		r.observe(Event{Kind: EventEdit, Chat: msg.Chat, Final: true, Took: r.took})
	}
	return err
}
