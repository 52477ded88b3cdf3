package pipeline

import (
	"errors"

	"relaybot/chat"
	"relaybot/pipeline/quota"
	"relaybot/provider"
)

// The lines a user is told of a turn the model did not answer, one per chat.Failure (Texts'
// defaults): what happened, in words a user knows, and what to do about it.
const (
	DefaultRefusedText       = "The model's provider refused this message, so I left it out of our conversation. Rephrase it, or send /reset to start over."
	DefaultUnavailableText   = "The model is unavailable right now. Send /retry to try this message again."
	DefaultMisconfiguredText = "I cannot reach my model: the bot's API key or endpoint is wrong. Please tell the bot's admin."
	DefaultQuotaText         = "The bot's model account has used up its quota. Please tell the bot's admin."
)

// failureOf is why a turn's model run failed without an answer, by the provider's error kinds: a
// request the provider refuses (a 4xx other than 408 and 429) would be refused again, a key or
// endpoint that is wrong needs the admin, a used-up quota (the bot's own or the account's) waits
// for its reset, and anything else may pass (/retry).
func failureOf(err error) chat.Failure {
	if _, ok := errors.AsType[*quota.Error](err); ok {
		return chat.FailureQuota
	}
	switch provider.ErrorKindOf(err) {
	case provider.ErrBadRequest, provider.ErrContextLength:
		return chat.FailureRefused
	case provider.ErrAuth, provider.ErrNotFound:
		return chat.FailureMisconfigured
	case provider.ErrQuota:
		return chat.FailureQuota
	}
	return chat.FailureUnavailable
}

// failureNote is what the user sees of a turn that failed with f, by exception_handling: the
// failure's line (show-hint), the line and the error itself (show-error), or nothing (hide). The
// bot's own quotas say which quota and when it resets, whatever exception_handling is.
func (o *Options) failureNote(f chat.Failure, err error) string {
	if q, ok := errors.AsType[*quota.Error](err); ok {
		return q.Text
	}
	line := o.Texts.failureLine(f)
	switch o.Output.ExceptionHandling {
	case ShowError:
		return line + "\nError: " + err.Error()
	case Hide:
		return ""
	default:
		return line
	}
}

// failureLine is the line of a kind of failure; FailureHint for a failure of no kind.
func (t *Texts) failureLine(f chat.Failure) string {
	switch f {
	case chat.FailureRefused:
		return t.Refused
	case chat.FailureUnavailable:
		return t.Unavailable
	case chat.FailureMisconfigured:
		return t.Misconfigured
	case chat.FailureQuota:
		return t.Quota
	}
	return t.FailureHint
}
