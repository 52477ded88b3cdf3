package asking

import (
	"context"
	"strings"
	"time"

	"relaybot/adapters"
	"relaybot/chat"
)

// PromptRelay is what a deployment of several replicas gives the pipeline (coord.Replica) so that
// a typed answer to a tool's reply prompt reaches the turn that asked, whichever replica the
// message lands on (a webhook behind a load balancer, the poller moved).
type PromptRelay interface {
	// OpenPrompt announces a prompt open in chat, asked by the turn whose context is ctx; take
	// is called with each message another replica carries here and reports whether the prompt
	// took it as its answer; it must not block. It returns the prompt's id for ClosePrompt.
	OpenPrompt(ctx context.Context, chat chat.Ref, take func(adapters.Inbound) bool) (id string, err error)
	// ClosePrompt withdraws prompt id; a failure is the relay's to log.
	ClosePrompt(ctx context.Context, id string)
	// CarryAnswer hands in, a message that reached this replica, to the replica whose prompt is
	// open in its chat, and reports whether that prompt took it; false at once (no statement)
	// when no other replica has a prompt open there.
	CarryAnswer(ctx context.Context, in adapters.Inbound) (taken bool, err error)
}

// promptCarryTimeout bounds the carrying of one message to another replica's prompt.
const promptCarryTimeout = 10 * time.Second

// announce tells the other replicas (when several serve the bot) that op is open in ref, and
// returns the function that withdraws it.
func (ps *prompts) announce(ctx context.Context, ref chat.Ref, op *openPrompt) (withdraw func(), err error) {
	if ps.relay == nil {
		return func() {}, nil
	}
	id, err := ps.relay.OpenPrompt(ctx, ref, func(in adapters.Inbound) bool { return ps.offer(op, in) })
	if err != nil {
		return nil, err
	}
	return func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), promptCarryTimeout)
		defer cancel()
		ps.relay.ClosePrompt(cctx, id)
	}, nil
}

// carried hands in to a prompt another replica has open in its chat and reports whether that
// prompt took it; false without a statement where no other replica has one.
func (ps *prompts) carried(ctx context.Context, in adapters.Inbound) bool {
	if ps.relay == nil || !answerLike(in) {
		return false
	}
	cctx, cancel := context.WithTimeout(ctx, promptCarryTimeout)
	defer cancel()
	taken, err := ps.relay.CarryAnswer(cctx, in)
	return err == nil && taken
}

// offer hands in to op when it is still the chat's open prompt and its sender may answer it.
func (ps *prompts) offer(op *openPrompt, in adapters.Inbound) bool {
	if !answerLike(in) {
		return false
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.open[in.Chat] != op || !op.may(in) {
		return false
	}
	select {
	case op.answers <- in:
		return true
	default:
		return false
	}
}

// answerLike reports whether in could answer a prompt: a text that is no command.
func answerLike(in adapters.Inbound) bool {
	return in.Command == "" && strings.TrimSpace(in.Text) != ""
}
