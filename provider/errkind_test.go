package provider

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"

	openai "github.com/sashabaranov/go-openai"
)

func TestModelErrorsAreClassifiedByStatusAndCode(t *testing.T) {
	api := func(status int, code any, msg string) error {
		return fmt.Errorf("model main (candidate 0): %w", &openai.APIError{HTTPStatusCode: status, Code: code, Message: msg})
	}
	for _, c := range []struct {
		name      string
		err       error
		want      ErrorKind
		transient bool
	}{
		{"bad key", api(401, "invalid_api_key", "Incorrect API key provided"), ErrAuth, false},
		{"no access to the model", api(403, nil, "forbidden"), ErrAuth, false},
		{"rate limited", api(429, "rate_limit_exceeded", "slow down"), ErrRateLimit, true},
		{"overloaded (Anthropic-style 529)", api(529, "overloaded_error", "Overloaded"), ErrOverloaded, true},
		{"unavailable", api(503, nil, "try later"), ErrOverloaded, true},
		{"context too long, OpenAI code", api(400, "context_length_exceeded", "This model's maximum context length is 8192 tokens"), ErrContextLength, false},
		{"context too long, gateway message", api(400, nil, "prompt is too long: 210000 tokens > 200000 maximum"), ErrContextLength, false},
		{"bad request", api(400, "invalid_request_error", "messages: roles must alternate"), ErrBadRequest, false},
		{"unknown model", api(404, "model_not_found", "no such model"), ErrBadRequest, false},
		{"server error", api(500, nil, "oops"), ErrServer, true},
		{"request error with status", &openai.RequestError{HTTPStatusCode: 502, Err: errors.New("bad gateway")}, ErrServer, true},
		{"no data within the timeout", fmt.Errorf("model main: %w", fmt.Errorf("%w within 30s", ErrNoData)), ErrTimeout, true},
		{"deadline", fmt.Errorf("x: %w", context.DeadlineExceeded), ErrTimeout, true},
		{"cancelled turn", fmt.Errorf("x: %w", context.Canceled), ErrCanceled, false},
		{"connection refused", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}, ErrNetwork, true},
		{"stream without finish", errors.New("stream ended without a finish_reason"), ErrOther, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := ErrorKindOf(c.err)
			if got != c.want {
				t.Errorf("ErrorKindOf(%v) = %q, want %q", c.err, got, c.want)
			}
			if got.Transient() != c.transient {
				t.Errorf("%q.Transient() = %v, want %v", got, got.Transient(), c.transient)
			}
		})
	}
}
