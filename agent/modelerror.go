package agent

import (
	"errors"

	"relaybot/provider"
)

// ErrContextTooLong matches (errors.Is) a turn's error when the model refused the request as
// longer than its context window: the caller may shorten the history and ask again.
var ErrContextTooLong = errors.New("the conversation is longer than the model's context window")

// ModelError is the error of a turn that a model refused for a reason another candidate would not
// fix (a wrong key, a bad request, a context that is too long): the fallback chain stops at it.
type ModelError struct {
	Kind provider.ErrorKind
	Err  error
}

// Error names the kind and the model's error.
func (e *ModelError) Error() string {
	switch e.Kind {
	case provider.ErrAuth:
		return "the model refused the credentials (check the model's api_key and access), no fallback tried: " + e.Err.Error()
	case provider.ErrNotFound:
		return "the model's endpoint has no such model or path (check the model's base_url and model), no fallback tried: " + e.Err.Error()
	case provider.ErrContextLength:
		return ErrContextTooLong.Error() + ": " + e.Err.Error()
	case provider.ErrBadRequest:
		return "the model rejected the request as invalid, no fallback tried: " + e.Err.Error()
	}
	return string(e.Kind) + ": " + e.Err.Error()
}

// Unwrap returns the model's error.
func (e *ModelError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrContextTooLong) true for a context-length refusal.
func (e *ModelError) Is(target error) bool {
	return target == ErrContextTooLong && e.Kind == provider.ErrContextLength
}

// movesOn reports whether a candidate that failed with this kind before its first chunk is left
// for the next one: transient kinds, and unclassified failures (a stream cut before any chunk, a
// body that is not JSON), which say nothing against the request itself. Auth errors, bad
// requests, context-length refusals and cancellation end the turn.
func movesOn(k provider.ErrorKind) bool {
	return k.MovesOn()
}
