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
	stops *stopTracker
	inner *delivery.Reply
	sr    *stopReply // nil when the reply has no Stop button
}

var _ adapters.Reply = (*reply)(nil)

// replies start the adapter's replies: the delivery engine's, with the Stop button's lifecycle
// kept in the messenger's stop tracker.
type replies struct {
	engine *delivery.Engine
	stops  *stopTracker
}

// start begins a reply in chat to asker's message replyTo, with a Stop button while it streams
// when stoppable.
func (rs replies) start(ctx context.Context, chat chat.Ref, replyTo, asker string, stoppable bool) *reply {
	r := &reply{stops: rs.stops}
	if stoppable {
		r.sr = rs.stops.begin(chat, replyTo, asker)
	}
	r.inner = rs.engine.NewReply(ctx, chat, adapters.SendOptions{ReplyTo: replyTo, Stoppable: stoppable})
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
		r.stops.finish(r.sr)
		defer r.stops.end(r.sr)
	}
	return r.inner.Finish(ctx, text, files)
}

// msgResponder answers a message: replies reference it and stream with a Stop button.
type msgResponder struct {
	x       *interactions // posts and closes its questions
	chat    chat.Ref
	replyTo string
	asker   string // the user who wrote replyTo
}

// responder is the responder of asker's message replyTo in ref.
func (x *interactions) responder(ref chat.Ref, replyTo, asker string) adapters.Responder {
	return msgResponder{x: x, chat: ref, replyTo: replyTo, asker: asker}
}

func (r msgResponder) NewReply(ctx context.Context) adapters.Reply {
	return r.x.replies.start(ctx, r.chat, r.replyTo, r.asker, true)
}

func (r msgResponder) Notice(ctx context.Context, text string) error {
	return r.x.engine.Notice(ctx, r.chat, text, adapters.SendOptions{ReplyTo: r.replyTo})
}

func (r msgResponder) SupportsStreaming() bool { return true }
