package tools

import (
	"fmt"
	"relaybot/audit"
)

// ErrorText is the tool message a failed call sends the model: "err: " and the error's text. It
// is the only place that prefix is made; everything else reads Outcome.Status and Outcome.Err.
func ErrorText(err error) string {
	return "err: " + err.Error()
}

// Failed returns the outcome of a call that failed with status st.
func Failed(st audit.Status, err error) Outcome {
	return Outcome{Content: ErrorText(err), Status: st, Err: err}
}

// Panicked returns the outcome of a call whose tool (or executor) panicked with p.
func Panicked(name string, p any) Outcome {
	return Failed(audit.StatusError, panicError(name, p))
}

func panicError(name string, p any) error {
	return fmt.Errorf("tool %s panicked: %v", name, p)
}

// NotRun returns the outcome of a call that was never run: reason goes to the model as its tool
// message, Status is cancelled and NotRun set. It writes no audit row; Turn.Skip does.
func NotRun(reason error) Outcome {
	out := Failed(audit.StatusCancelled, reason)
	out.NotRun = true
	return out
}
