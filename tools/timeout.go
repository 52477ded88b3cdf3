package tools

import (
	"context"
	"errors"
	"os"
)

// IsTimeout reports whether err says a call ran out of time, whichever timer fired first: the
// loader's own deadline (ErrTimeout, context.DeadlineExceeded), a deadline on a connection
// (os.ErrDeadlineExceeded) or a transport's timer ("net/http: timeout awaiting response
// headers" and every other error whose Timeout method reports true).
func IsTimeout(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrTimeout) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
		return true
	}
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}
