// Package logredact keeps secrets out of logs: it wraps a slog.Handler and passes every record's
// message and attributes (strings, errors, other values, groups) through a redaction function
// before they reach the wrapped handler. Adapters and tool loaders whose libraries quote secrets
// in errors (the Telegram token is part of its API URL; MCP server URLs carry credentials) share it.
package logredact

import (
	"context"
	"fmt"
	"log/slog"
)

// Handler is a slog.Handler that redacts before it hands records on.
type Handler struct {
	next   slog.Handler
	redact func(string) string
}

// NewHandler returns a Handler that writes to next with redact applied to every message and
// attribute value.
func NewHandler(next slog.Handler, redact func(string) string) *Handler {
	return &Handler{next: next, redact: redact}
}

// Enabled reports whether the wrapped handler handles records at level.
func (h *Handler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.next.Enabled(ctx, level)
}

// Handle redacts rec and passes it on.
func (h *Handler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, h.redact(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.next.Handle(ctx, out)
}

// WithAttrs returns a Handler whose wrapped handler carries the redacted attrs.
func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	clean := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		clean[i] = h.attr(a)
	}
	return &Handler{next: h.next.WithAttrs(clean), redact: h.redact}
}

// WithGroup returns a Handler whose wrapped handler opens group name.
func (h *Handler) WithGroup(name string) slog.Handler {
	return &Handler{next: h.next.WithGroup(name), redact: h.redact}
}

func (h *Handler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, h.redact(v.String()))
	case slog.KindGroup:
		attrs := v.Group()
		out := make([]any, len(attrs))
		for i, g := range attrs {
			out[i] = h.attr(g)
		}
		return slog.Group(a.Key, out...)
	case slog.KindAny:
		if err, ok := v.Any().(error); ok {
			return slog.String(a.Key, h.redact(err.Error()))
		}
		return slog.String(a.Key, h.redact(fmt.Sprint(v.Any())))
	}
	return slog.Attr{Key: a.Key, Value: v}
}
