package delivery

import (
	"context"

	"relaybot/adapters"
	"relaybot/chat"
)

// Responder returns the adapters.Responder for one inbound message in chat: its replies and
// notices go through the engine with opts (typically ReplyTo set to the user's message), and
// streaming says whether replies are streamed by edits.
func (e *Engine) Responder(chat chat.Ref, opts adapters.SendOptions, streaming bool) adapters.Responder {
	return responder{e: e, chat: chat, opts: opts, streaming: streaming}
}

type responder struct {
	e         *Engine
	chat      chat.Ref
	opts      adapters.SendOptions
	streaming bool
}

func (r responder) NewReply(ctx context.Context) adapters.Reply {
	return r.e.NewReply(ctx, r.chat, r.opts)
}

func (r responder) Notice(ctx context.Context, text string) error {
	return r.e.Notice(ctx, r.chat, text, r.opts)
}

func (r responder) SupportsStreaming() bool { return r.streaming }
