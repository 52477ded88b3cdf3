package provider

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"

	openai "github.com/sashabaranov/go-openai"
)

// ErrorKind says what kind of failure ended a model call, so operators (metrics) and the runner
// can tell a misconfiguration from a passing fault.
type ErrorKind string

// Kinds of model errors.
const (
	ErrAuth          ErrorKind = "auth"           // 401/403: a wrong or revoked key, no access to the model
	ErrNotFound      ErrorKind = "not_found"      // 404: no such model, or the base URL is not an API's
	ErrRateLimit     ErrorKind = "rate_limit"     // 429
	ErrQuota         ErrorKind = "quota"          // 402, or 429 insufficient_quota: the account's credit or plan is used up
	ErrOverloaded    ErrorKind = "overloaded"     // 503, 529: the provider is shedding load
	ErrContextLength ErrorKind = "context_length" // the request does not fit the model's context window
	ErrBadRequest    ErrorKind = "bad_request"    // other 4xx: the request itself is wrong
	ErrServer        ErrorKind = "server"         // other 5xx
	ErrTimeout       ErrorKind = "timeout"        // no data within the model's timeout, or a network timeout
	ErrNetwork       ErrorKind = "network"        // the connection failed or broke
	ErrCanceled      ErrorKind = "canceled"       // the turn was cancelled (/stop, shutdown)
	ErrOther         ErrorKind = "other"          // anything else (a stream without finish_reason, a content filter, ...)
)

// ErrNoData is the cause of a model call that sent nothing within its endpoint's Timeout.
var ErrNoData = errors.New("no data")

// ErrorKindOf classifies err, an error of a model call, by the provider's HTTP status and error
// code where it has one, then by the transport's failure.
func ErrorKindOf(err error) ErrorKind {
	if err == nil {
		return ""
	}
	var apiErr *openai.APIError
	if errors.As(err, &apiErr) {
		return kindOfStatus(apiErr.HTTPStatusCode, codeString(apiErr.Code)+" "+apiErr.Type+" "+apiErr.Message)
	}
	var reqErr *openai.RequestError
	if errors.As(err, &reqErr) && reqErr.HTTPStatusCode != 0 {
		return kindOfStatus(reqErr.HTTPStatusCode, string(reqErr.Body))
	}
	var netErr net.Error
	switch {
	case errors.Is(err, ErrNoData), errors.Is(err, context.DeadlineExceeded):
		return ErrTimeout
	case errors.Is(err, context.Canceled):
		return ErrCanceled
	case errors.As(err, &netErr) && netErr.Timeout():
		return ErrTimeout
	case errors.As(err, &netErr):
		return ErrNetwork
	}
	return ErrOther
}

// codeString renders an APIError's code, which providers send as a string or a number.
func codeString(code any) string {
	if c, ok := code.(string); ok {
		return c
	}
	return ""
}

// kindOfStatus classifies an HTTP error answer; detail is the provider's error code, type and
// message, read only to tell a context-length refusal from other 400s and a used-up account
// (OpenAI's code insufficient_quota) from other 429s.
func kindOfStatus(status int, detail string) ErrorKind {
	switch {
	case status == http.StatusUnauthorized, status == http.StatusForbidden:
		return ErrAuth
	case status == http.StatusNotFound:
		return ErrNotFound
	case status == http.StatusPaymentRequired,
		status == http.StatusTooManyRequests && strings.Contains(detail, "insufficient_quota"):
		return ErrQuota
	case status == http.StatusTooManyRequests:
		return ErrRateLimit
	case status == http.StatusRequestTimeout:
		return ErrTimeout
	case status == http.StatusServiceUnavailable, status == 529:
		return ErrOverloaded
	case status == http.StatusRequestEntityTooLarge:
		return ErrContextLength
	case status >= 400 && status < 500:
		if isContextLength(detail) {
			return ErrContextLength
		}
		return ErrBadRequest
	case status >= 500:
		return ErrServer
	}
	return ErrOther
}

// isContextLength recognises the providers' ways of saying a request is longer than the model's
// context: OpenAI's code context_length_exceeded, and the messages of gateways that send none.
func isContextLength(detail string) bool {
	d := strings.ToLower(detail)
	for _, s := range []string{"context_length_exceeded", "context length", "context window", "maximum context", "too many tokens", "prompt is too long", "input is too long"} {
		if strings.Contains(d, s) {
			return true
		}
	}
	return false
}

// Transient reports whether a failure of this kind may pass if another candidate or a later try
// is asked: rate limits, overload, server errors, timeouts and broken connections. Auth errors and
// bad requests are configuration or input problems that a fallback would only hide.
func (k ErrorKind) Transient() bool {
	switch k {
	case ErrRateLimit, ErrOverloaded, ErrServer, ErrTimeout, ErrNetwork:
		return true
	}
	return false
}

// MovesOn reports whether a failure of this kind leaves a candidate for the next one under the
// models' fallback rules (transient kinds, a used-up account, which another provider's does not
// share, and unclassified failures); other callers of OpenAI-compatible endpoints (speech) follow
// the same rules with it.
func (k ErrorKind) MovesOn() bool {
	return k.Transient() || k == ErrQuota || k == ErrOther
}
