package discord

import (
	"context"
	"strings"

	"relaybot/adapters"
	"relaybot/adapters/delivery"
	"relaybot/chat"
)

// cursor ends every preview of a streaming reply, so users can tell a message still being
// written from a finished one. It also makes the final text always differ from the last
// preview, so the final edit (which removes the Stop button) is never skipped as identical.
const cursor = " ▌"

// reply is a streamed answer: the delivery engine's reply plus the Stop button's lifecycle.
type reply struct {
	a     *Adapter
	inner *delivery.Reply
	sr    *stopReply // nil when the reply has no Stop button
}

var (
	_ adapters.Reply        = (*reply)(nil)
	_ adapters.StreamEditor = (*Adapter)(nil)
)

func (a *Adapter) newReply(ctx context.Context, chat chat.Ref, replyTo, asker string, stoppable bool) *reply {
	r := &reply{a: a}
	if stoppable {
		r.sr = a.stops.begin(chat, replyTo, asker)
	}
	r.inner = a.engine.NewReply(ctx, chat, adapters.SendOptions{ReplyTo: replyTo, Stoppable: stoppable})
	return r
}

// Update shows text, with the streaming cursor, as the newest preview.
func (r *reply) Update(text string) {
	if strings.TrimSpace(text) == "" {
		return
	}
	r.inner.Update(text + cursor)
}

// Working turns the typing indicator on or off.
func (r *reply) Working(on bool) { r.inner.Working(on) }

// Finish delivers the final text and files; the final edit removes the cursor and the Stop
// button.
func (r *reply) Finish(ctx context.Context, text string, files []chat.File) error {
	if r.sr != nil {
		r.a.stops.finish(r.sr)
		defer r.a.stops.end(r.sr)
	}
	return r.inner.Finish(ctx, text, files)
}

// msgResponder answers a message: replies reference it and stream with a Stop button.
type msgResponder struct {
	a       *Adapter
	chat    chat.Ref
	replyTo string
	asker   string // the user who wrote replyTo
}

func (r msgResponder) NewReply(ctx context.Context) adapters.Reply {
	return r.a.newReply(ctx, r.chat, r.replyTo, r.asker, true)
}

func (r msgResponder) Notice(ctx context.Context, text string) error {
	return r.a.engine.Notice(ctx, r.chat, text, adapters.SendOptions{ReplyTo: r.replyTo})
}

func (r msgResponder) SupportsStreaming() bool { return true }
