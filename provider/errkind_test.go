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
		{"unknown model", api(404, "model_not_found", "no such model"), ErrNotFound, false},
		{"a base URL without /v1", &openai.RequestError{HTTPStatusCode: 404, Err: errors.New("404 page not found")}, ErrNotFound, false},
		{"used-up account (OpenAI)", api(429, "insufficient_quota", "You exceeded your current quota, please check your plan and billing details."), ErrQuota, false},
		{"no credit (gateway)", api(402, nil, "Insufficient credits"), ErrQuota, false},
		{"request timeout is not a refusal", api(408, nil, "request timed out"), ErrTimeout, true},
		{"content policy", api(400, "content_policy_violation", "Your request was rejected as a result of our safety system."), ErrBadRequest, false},
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

func TestAUsedUpAccountLeavesTheNextCandidateButAWrongURLDoesNot(t *testing.T) {
	for kind, want := range map[ErrorKind]bool{ErrQuota: true, ErrRateLimit: true, ErrNotFound: false, ErrBadRequest: false, ErrAuth: false} {
		if got := kind.MovesOn(); got != want {
			t.Errorf("%q.MovesOn() = %v, want %v", kind, got, want)
		}
	}
}
