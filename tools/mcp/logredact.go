package mcp

import (
	"context"
	"fmt"
	"log/slog"
)

// redactingHandler passes records to next with the server URL's secrets taken out of the message
// and of string and error attributes: mcp-go's transports log errors that quote the URL.
type redactingHandler struct {
	next slog.Handler
	r    *redactor
}

func newRedactingLogger(l *slog.Logger, r *redactor) *slog.Logger {
	if len(r.pairs) == 0 {
		return l
	}
	return slog.New(&redactingHandler{next: l.Handler(), r: r})
}

func (h *redactingHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.next.Enabled(ctx, level)
}

func (h *redactingHandler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, h.r.text(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.next.Handle(ctx, out)
}

func (h *redactingHandler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, h.r.text(v.String()))
	case slog.KindGroup:
		attrs := v.Group()
		out := make([]any, len(attrs))
		for i, g := range attrs {
			out[i] = h.attr(g)
		}
		return slog.Group(a.Key, out...)
	case slog.KindAny:
		if err, ok := v.Any().(error); ok {
			return slog.String(a.Key, h.r.text(err.Error()))
		}
		return slog.String(a.Key, h.r.text(fmt.Sprint(v.Any())))
	}
	return slog.Attr{Key: a.Key, Value: v}
}

func (h *redactingHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	clean := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		clean[i] = h.attr(a)
	}
	return &redactingHandler{next: h.next.WithAttrs(clean), r: h.r}
}

func (h *redactingHandler) WithGroup(name string) slog.Handler {
	return &redactingHandler{next: h.next.WithGroup(name), r: h.r}
}
