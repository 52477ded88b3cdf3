package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"relaybot/config"
)

// TestHealthcheck runs `bot healthcheck` against listeners that answer, fail and are gone: the
// exit status a container healthcheck sees.
func TestHealthcheck(t *testing.T) {
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	}))
	defer ok.Close()
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "store unavailable", http.StatusServiceUnavailable)
	}))
	defer failing.Close()
	gone := httptest.NewServer(http.NotFoundHandler())
	goneAddr := gone.Listener.Addr().String()
	gone.Close()
	_, okPort, _ := net.SplitHostPort(ok.Listener.Addr().String())

	cases := []struct {
		name    string
		enabled bool
		listen  string
		wantErr string // "" = healthy
	}{
		{"answering", true, ok.Listener.Addr().String(), ""},
		{"listening on every address is asked on loopback", true, "0.0.0.0:" + okPort, ""},
		{"store down", true, failing.Listener.Addr().String(), "503"},
		{"nothing listens", true, goneAddr, "connect"},
		{"admin off", false, ok.Listener.Addr().String(), "enabled = false"},
		{"bad address", true, "8080", "admin.listen"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.Admin.Enabled, cfg.Admin.Listen = tc.enabled, tc.listen
			var out bytes.Buffer
			err := runHealthcheck(context.Background(), &cfg, nil, &out)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("healthcheck: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("healthcheck error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestHealthzURL(t *testing.T) {
	cases := map[string]string{
		"127.0.0.1:8080": "http://127.0.0.1:8080/healthz",
		"0.0.0.0:8080":   "http://127.0.0.1:8080/healthz",
		":9090":          "http://127.0.0.1:9090/healthz",
		"[::]:8080":      "http://[::1]:8080/healthz",
		"bot.lan:8080":   "http://bot.lan:8080/healthz",
	}
	for listen, want := range cases {
		got, err := healthzURL(listen)
		if err != nil || got != want {
			t.Errorf("healthzURL(%q) = %q, %v; want %q", listen, got, err, want)
		}
	}
}
