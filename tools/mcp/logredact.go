package mcp

import (
	"log/slog"

	"relaybot/internal/logredact"
)

// newRedactingLogger logs through l with the server URL's secrets taken out of the message and
// of every attribute: mcp-go's transports log errors that quote the URL.
func newRedactingLogger(l *slog.Logger, r *redactor) *slog.Logger {
	if len(r.pairs) == 0 {
		return l
	}
	return slog.New(logredact.NewHandler(l.Handler(), r.text))
}
