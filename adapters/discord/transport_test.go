package discord

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"relaybot/adapters"
	"relaybot/chat"
)

func TestRateLimitScopeAndRewrite(t *testing.T) {
	for _, tc := range []struct {
		name   string
		scope  string
		global bool
	}{
		{"channel bucket", "user", false},
		{"global", "global", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var path, auth string
			var requests atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				requests.Add(1)
				path, auth = r.URL.Path, r.Header.Get("Authorization")
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("X-RateLimit-Scope", tc.scope)
				w.Header().Set("X-RateLimit-Remaining", "0")
				w.Header().Set("X-RateLimit-Reset-After", "30")
				w.WriteHeader(http.StatusTooManyRequests)
				_, _ = w.Write([]byte(`{"message":"You are being rate limited.","retry_after":2.5,"global":` + map[bool]string{true: "true", false: "false"}[tc.global] + `}`))
			}))
			defer srv.Close()
			a, err := New(Options{Token: "tok", APIBase: srv.URL + "/api/v10"})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
			defer cancel()
			_, err = a.messenger.Send(ctx, chat.Ref{Platform: chat.Discord, ChatID: "42"}, "hi", adapters.SendOptions{})
			var rl *adapters.RateLimitError
			if !errors.As(err, &rl) || rl.RetryAfter != 2500*time.Millisecond || rl.Global != tc.global {
				t.Fatalf("Send: %v, want RateLimitError{2.5s, global=%v}", err, tc.global)
			}
			if path != "/api/v10/channels/42/messages" || auth != "Bot tok" {
				t.Errorf("request went to %q with authorization %q", path, auth)
			}
			// discordgo must not have learnt the bucket is empty (its reset is 30 s away): the next
			// call reaches the server instead of waiting in discordgo's own rate limiter, which
			// would outlast this context.
			sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
			defer scancel()
			_, _ = a.messenger.Send(sctx, chat.Ref{Platform: chat.Discord, ChatID: "42"}, "hi", adapters.SendOptions{})
			if n := requests.Load(); n != 2 {
				t.Errorf("the server saw %d requests, want 2: the second was held back by discordgo's own rate limiter", n)
			}
		})
	}
}

func TestNonJSONRateLimitBecomesRateLimitError(t *testing.T) {
	for _, tc := range []struct {
		name       string
		retryAfter string // Retry-After header; "" for none
		want       time.Duration
	}{
		{"seconds", "7", 7 * time.Second},
		{"fractional seconds", "1.5", 1500 * time.Millisecond},
		{"no header", "", defaultRetryAfter},
		{"garbage header", "soon", defaultRetryAfter},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tc.retryAfter != "" {
					w.Header().Set("Retry-After", tc.retryAfter)
				}
				w.Header().Set("Content-Type", "text/html")
				w.WriteHeader(http.StatusTooManyRequests)
				_, _ = w.Write([]byte("<html><body><h1>429 Too Many Requests</h1></body></html>"))
			}))
			defer srv.Close()
			a, err := New(Options{Token: "tok", APIBase: srv.URL + "/api/v10"})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err = a.messenger.Send(ctx, chat.Ref{Platform: chat.Discord, ChatID: "42"}, "hi", adapters.SendOptions{})
			var rl *adapters.RateLimitError
			if !errors.As(err, &rl) || rl.RetryAfter != tc.want || rl.Global {
				t.Fatalf("Send: %v, want RateLimitError{%s, global=false}", err, tc.want)
			}
		})
	}
}
