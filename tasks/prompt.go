package tasks

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"relaybot/adapters"
	"relaybot/chat"
	"relaybot/store"
)

// prompt runs a prompt task's turn: the pipeline handles the prompt as a message from the
// task's owner in the task's chat (access, rate limit, quota and tool rights checked now, as
// for any message), answered through the platform's delivery engine. The run is delivered when
// the answer's final text was confirmed by the platform. A run a replica that is gone had
// claimed is handed over as a redelivered message: the pipeline answers it again only when its
// turn did not end (the run's id is the turn's inbound message id).
func (s *Service) prompt(ctx context.Context, p Platform, r run) outcome {
	h := s.answerer()
	if h == nil {
		return outcome{err: errors.New("prompt tasks are not available in this server"), final: true}
	}
	ref := chatOf(r.task)
	id := RunMessageID(r.id)
	if r.adopted {
		if t, found := s.turnOf(ctx, ref, id); found && t.Status != store.TurnInterrupted && t.Status != store.TurnRunning && t.Status != chat.StatusRetried {
			return s.turnOutcome(t, true)
		}
	}
	kind := adapters.Group
	if r.task.Private {
		kind = adapters.Private
	}
	in := adapters.Inbound{Chat: ref, Kind: kind, MessageID: id, UserID: r.task.UserID, UserName: r.task.UserName,
		Text: r.task.Text, Time: s.opts.Now(), ParentChatID: r.task.ParentChatID, Redelivered: r.adopted}
	if r.adopted {
		in.Redeliveries = 1
	}
	inner := p.ChatResponder(ref)
	out := &watchedResponder{Responder: inner}
	if a, ok := inner.(adapters.Asker); ok {
		h.Handle(ctx, in, askingWatch{watchedResponder: out, asker: a}) // approvals are asked as for any turn
	} else {
		h.Handle(ctx, in, out)
	}
	t, found := s.turnOf(ctx, ref, id)
	finished, finishErr, notices, noticeErr := out.result()
	switch {
	case finished && finishErr != nil:
		return outcome{err: fmt.Errorf("the answer was not delivered: %w", finishErr), turnID: t.ID}
	case finished && found:
		return s.turnOutcome(t, false)
	case finished:
		return outcome{}
	case notices > 0 && noticeErr != nil:
		return outcome{err: fmt.Errorf("the bot's notice was not delivered: %w", noticeErr)}
	case notices > 0:
		return outcome{err: errors.New("the turn was refused (the owner was told why in the chat)"), final: true}
	default:
		return outcome{err: errors.New("no turn: the owner may no longer use the bot in this chat"), final: true}
	}
}

// turnOutcome is the outcome of a run whose turn t ended: delivered unless the turn failed.
func (s *Service) turnOutcome(t store.Turn, before bool) outcome {
	o := outcome{turnID: t.ID}
	if t.Status == chat.StatusError {
		o.err, o.final = fmt.Errorf("the turn failed: %s", clip(t.Error, 200)), true
	}
	if before {
		s.log.Info("tasks: adopted run's turn had already ended; not run again", "turn", t.ID, "status", t.Status)
	}
	return o
}

// turnOf finds the turn the run's message started.
func (s *Service) turnOf(ctx context.Context, ref chat.Ref, id string) (store.Turn, bool) {
	if s.opts.Turns == nil {
		return store.Turn{}, false
	}
	t, found, err := s.opts.Turns.TurnByInbound(context.WithoutCancel(ctx), ref, id)
	if err != nil {
		s.log.Warn("tasks: run's turn not found", "message", id, "err", err)
		return store.Turn{}, false
	}
	return t, found
}

// watchedResponder is the platform's responder for a prompt run, noting whether the answer's
// final text and the notices were delivered.
type watchedResponder struct {
	adapters.Responder

	mu        sync.Mutex
	finished  bool
	finishErr error
	notices   int
	noticeErr error
}

func (w *watchedResponder) NewReply(ctx context.Context) adapters.Reply {
	return &watchedReply{Reply: w.Responder.NewReply(ctx), w: w}
}

func (w *watchedResponder) Notice(ctx context.Context, text string) error {
	err := w.Responder.Notice(ctx, text)
	w.mu.Lock()
	w.notices++
	if err != nil {
		w.noticeErr = err
	}
	w.mu.Unlock()
	return err
}

func (w *watchedResponder) result() (finished bool, finishErr error, notices int, noticeErr error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.finished, w.finishErr, w.notices, w.noticeErr
}

// askingWatch is a watchedResponder whose platform asks questions (approvals).
type askingWatch struct {
	*watchedResponder
	asker adapters.Asker
}

func (a askingWatch) Ask(ctx context.Context, q adapters.Question, decide func(adapters.Answer) (bool, string)) (adapters.Answer, error) {
	return a.asker.Ask(ctx, q, decide)
}

type watchedReply struct {
	adapters.Reply
	w *watchedResponder
}

func (r *watchedReply) Finish(ctx context.Context, text string, files []chat.File) error {
	err := r.Reply.Finish(ctx, text, files)
	r.w.mu.Lock()
	r.w.finished = true
	if err != nil {
		r.w.finishErr = err
	}
	r.w.mu.Unlock()
	return err
}
