package agent

import (
	"context"
	"errors"

	openai "github.com/sashabaranov/go-openai"

	"relaybot/chat"
	"relaybot/tools"
)

// Meter accounts for a turn's model calls while they happen.
type Meter interface {
	// Start is called before a model call's request is sent, with the call as far as it is known
	// (Model, Candidate, Round, FallbackReason, StartedAt) and its prompt's estimated tokens (0
	// without Request.Estimate). An error refuses the call: no request is made, no other
	// candidate is tried, and the turn ends with that error. Otherwise end is called once, from
	// the goroutine that called Run, when the call ended, with its record.
	Start(ctx context.Context, call chat.ModelCall, prompt int) (end func(chat.ModelCall), err error)
}

// refusedError is a call the Meter refused.
type refusedError struct{ err error }

func (e *refusedError) Error() string { return e.err.Error() }
func (e *refusedError) Unwrap() error { return e.err }

// meterStart asks the request's Meter for a call; end is never nil.
func (t *turn) meterStart(ctx context.Context, rec chat.ModelCall, prompt int) (func(chat.ModelCall), error) {
	if t.req.Meter == nil {
		return func(chat.ModelCall) {}, nil
	}
	end, err := t.req.Meter.Start(ctx, rec, prompt)
	if err != nil {
		return nil, &refusedError{err: err}
	}
	if end == nil {
		end = func(chat.ModelCall) {}
	}
	return end, nil
}

// estimatePrompt is the estimate of what a call sends: the history, and the tools when offered.
func (t *turn) estimatePrompt(c candidate, specs []tools.Spec) int {
	if t.req.Estimate == nil {
		return 0
	}
	return t.req.Estimate(c.Name, t.history, specs)
}

// estimateUsage fills in the usage of a call that ended without a usage report: the prompt's
// estimate plus that of what was generated so far (text, reasoning and tool-call arguments). A
// call the provider refused with an HTTP error before any answer cost nothing and stays at zero.
func (t *turn) estimateUsage(rec *chat.ModelCall, c candidate, prompt int, reported, started bool, acc *accumulator) {
	if reported || t.req.Estimate == nil {
		return
	}
	var apiErr *openai.APIError
	var reqErr *openai.RequestError
	if !started && (errors.As(rec.Err, &apiErr) || errors.As(rec.Err, &reqErr)) {
		return
	}
	rec.TokensIn, rec.Estimated = prompt, true
	if acc != nil {
		m := acc.message()
		m.ReasoningField = "reasoning_content" // reasoning is generated, and billed, whatever its field
		if m.Content != "" || m.Reasoning != "" || len(m.ToolCalls) > 0 {
			rec.TokensOut = t.req.Estimate(c.Name, []chat.Message{m}, nil)
		}
	}
}
