package logredact_test

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"relaybot/internal/logredact"
)

type secretURL string

func (u secretURL) String() string { return string(u) }

func TestSecretNeverReachesTheLog(t *testing.T) {
	const secret = "123456:AAbbCC"
	redact := func(s string) string { return strings.ReplaceAll(s, secret, "<redacted>") }
	tests := []struct {
		name string
		log  func(l *slog.Logger)
	}{
		{"message", func(l *slog.Logger) { l.Info("GET https://api/bot" + secret + "/getMe") }},
		{"string attr", func(l *slog.Logger) { l.Info("x", "url", "https://api/bot"+secret) }},
		{"error attr", func(l *slog.Logger) { l.Error("x", "err", fmt.Errorf("post: %w", errors.New("bot"+secret))) }},
		{"stringer attr", func(l *slog.Logger) { l.Info("x", "u", secretURL(secret)) }},
		{"group", func(l *slog.Logger) { l.Info("x", slog.Group("req", "url", secret)) }},
		{"With", func(l *slog.Logger) { l.With("token", secret).Info("x") }},
		{"WithGroup", func(l *slog.Logger) { l.WithGroup("g").Info("x", "k", secret) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			tt.log(slog.New(logredact.NewHandler(slog.NewTextHandler(&buf, nil), redact)))
			out := buf.String()
			if strings.Contains(out, secret) {
				t.Fatalf("secret in log: %s", out)
			}
			if !strings.Contains(out, "<redacted>") {
				t.Fatalf("nothing redacted (did the record reach the log?): %s", out)
			}
		})
	}
}

func TestLevelsPassThrough(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(logredact.NewHandler(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}), strings.ToUpper))
	l.Info("quiet")
	l.Warn("loud", "n", 3)
	if got := buf.String(); strings.Contains(got, "quiet") || !strings.Contains(got, "LOUD") || !strings.Contains(got, "n=3") {
		t.Fatalf("log = %q", got)
	}
}
