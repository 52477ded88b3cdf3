package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"relaybot/adapters"
	"relaybot/agent"
	"relaybot/chat"
	"relaybot/tools"
)

// response is the response wrapper of one turn: it takes the agent's events as they happen,
// keeps what the user sees of them (view), shows it in the turn's reply as it grows
// (streaming) or sends each finished round as a message of its own (without streaming, as
// LangBot does, in order and without holding up the model), and delivers the final answer.
type response struct {
	ctx    context.Context // the replies' context: it outlives the turn's
	out    adapters.Responder
	reply  adapters.Reply
	stream bool
	outbox *outbox
	log    *slog.Logger

	mu    sync.Mutex
	view  view
	files []chat.File
	// roundShown is the text shown of the latest round that ended with tool calls: that
	// round's message is among the turn's messages already.
	roundShown string
	// roundsDone is closed once the latest round message is delivered (non-streaming).
	roundsDone chan struct{}
	// feed shows the tools' progress (watch); nil when there is none.
	feed *progressFeed
}

// sent are the files the answer carried on its final (nil before it was finished; r may be
// nil: a turn that ended before its reply).
func (r *response) sent() []chat.File {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.files)
}

// watch shows the progress of the turn's running calls on their status lines (streaming only):
// a flood of progress only changes the text the next scheduled preview carries. The feed stops
// when the answer is delivered.
func (r *response) watch(tt *tools.Turn) {
	r.feed = newProgressFeed(func(ids []string, ps []tools.Progress) {
		r.mu.Lock()
		defer r.mu.Unlock()
		for i, id := range ids {
			r.view.progress(id, ps[i])
		}
		r.reply.Update(r.view.render())
	})
	tt.SetProgress(r.feed.report)
}

func newResponse(ctx context.Context, out adapters.Responder, reply adapters.Reply, stream bool, opts OutputOptions, p chat.Platform, ob *outbox, log *slog.Logger) *response {
	return &response{ctx: ctx, out: out, reply: reply, stream: stream, outbox: ob, log: log,
		view: view{track: opts.TrackFunctionCalls, s: newSurface(p, opts.Reasoning)}}
}

// emit is the agent's event callback (agent.Runner's emit contract: called from the turn's
// goroutine, in order).
func (r *response) emit(e agent.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v := &r.view
	switch e := e.(type) {
	case agent.Chunk:
		v.setText(e.Text)
		if e.Final && len(e.ToolCalls) > 0 {
			r.roundShown = e.Text
			v.endRound()
			if !r.stream {
				if t := v.sendBlocks(); strings.TrimSpace(t) != "" {
					r.sendRound(t)
				}
			}
			r.reply.Working(true)
		} else if strings.TrimSpace(e.Text) != "" {
			r.reply.Working(false)
		}
	case agent.ToolStart:
		v.startTool(e.Call.ID, e.Call.Name)
		r.reply.Working(true)
	case agent.ToolResult:
		v.finishTool(e.Call.ID, e.Call.Name, e.Outcome)
		v.addSources(e.Outcome.Sources)
		r.files = append(r.files, e.Outcome.Files...)
		if e.Outcome.FilesLeftOut != "" {
			v.note("(" + e.Outcome.FilesLeftOut + ")")
		}
	case agent.RoundCapHit:
		v.note(fmt.Sprintf("(Reached the limit of %d tool rounds; answering without more tools.)", e.MaxToolRounds))
	default:
		return
	}
	if r.stream {
		r.reply.Update(v.render())
	}
}

// sendRound sends a finished round's text as a message of its own, after the round before it.
// The caller holds r.mu.
func (r *response) sendRound(text string) {
	prev, done := r.roundsDone, make(chan struct{})
	r.roundsDone = done
	rr := r.out.NewReply(r.ctx)
	go func() {
		defer close(done)
		if prev != nil {
			<-prev
		}
		dctx, dcancel := r.outbox.context()
		defer dcancel()
		if err := rr.Finish(dctx, text, nil); err != nil {
			r.log.Error("pipeline: a round's text not delivered", "err", err)
		}
	}()
}

// finish delivers the final answer once the rounds' messages are out, with note after it
// (inline: the stopped marker ends the sentence that was cut short). It returns the text of the
// round the turn was cut in the middle of, when that is not among the agent's messages. The final
// answer waits for the platform (rate limits, a long queue of other finals) as long as the
// pipeline runs; only the end of the shutdown's grace period bounds it.
func (r *response) finish(res *agent.Result, note string, inline bool) (partial string, err error) {
	if r.feed != nil {
		r.feed.stop()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	partial = partialText(res, r.roundShown)
	if partial != "" {
		r.view.setText(partial)
	}
	text := r.view.withNote(note, inline)
	if src := r.view.sourcesBlock(text); src != "" {
		text += "\n\n" + src
	}
	r.reply.Working(false)
	if r.roundsDone != nil {
		<-r.roundsDone // the rounds' messages come first
	}
	ctx, cancel := r.outbox.context()
	defer cancel()
	return partial, r.reply.Finish(ctx, text, r.files)
}
