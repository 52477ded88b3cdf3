package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"relaybot/internal/testkit/llm"
	"relaybot/internal/testkit/logbuf"
	"relaybot/internal/testkit/wait"
)

// runBot runs `bot serve -config path` as main does, with ctx for its signals, and returns its
// exit status; stderr gets what it logs.
func runBot(t *testing.T, ctx context.Context, path string, stderr io.Writer) int {
	t.Helper()
	prev := slog.Default()
	t.Cleanup(func() { slog.SetDefault(prev) })
	return run(ctx, []string{"serve", "-config", path}, io.Discard, stderr)
}

// webChatBot is a config.toml of a bot with the web chat alone (no Telegram, no Discord), its
// models left to the test.
func webChatBot(t *testing.T) *tomlConfig {
	return (&tomlConfig{}).
		set("storage", "dsn", filepath.Join(t.TempDir(), "bot.db")).
		set("tools", "plugins", []string{}, "native", []string{"current_time"}).
		set("telegram", "enabled", false).
		set("admin", webChatAdmin...)
}

// webOnly is webChatBot with a model on loopback nobody calls.
func webOnly(t *testing.T) *tomlConfig {
	return webChatBot(t).set("models", "name", "local", "base_url", "http://127.0.0.1:1/v1", "model", "test-model")
}

// holdPort takes a free port on loopback for the test, as another process would.
func holdPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String()
}

// TestAPortInUseStopsTheStartAndNamesTheKeyToChange: an address another process holds ends the
// start with a non-zero status and a message that names the config key, before the bot ever
// says it is running.
func TestAPortInUseStopsTheStartAndNamesTheKeyToChange(t *testing.T) {
	for _, tc := range []struct {
		name, key string
		config    func(taken string) *tomlConfig
	}{
		{"admin", "[admin] listen", func(taken string) *tomlConfig {
			return webOnly(t).set("admin", "listen", taken)
		}},
		{"telegram webhook", "[telegram] webhook_listen", func(taken string) *tomlConfig {
			return webOnly(t).set("telegram", "enabled", true, "token", "123:abc", "mode", "webhook", "webhook_listen", taken,
				"webhook_url", "https://bot.example/hook", "webhook_secret", "s3cret-hook")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			taken := holdPort(t)
			var logs logbuf.Buffer
			code := runBot(t, context.Background(), tc.config(taken).write(t), &logs)
			out := logs.String()
			if code == 0 {
				t.Fatalf("bot serve exited 0 with %s taken; output:\n%s", taken, out)
			}
			if !strings.Contains(out, tc.key+` = "`+taken+`": cannot listen`) || !strings.Contains(out, "address already in use") ||
				!strings.Contains(out, "set another port in "+tc.key) {
				t.Errorf("the error does not name %s and what to do:\n%s", tc.key, out)
			}
			if strings.Contains(out, "running") {
				t.Errorf("the bot said it was running before it failed to listen:\n%s", out)
			}
		})
	}
}

// TestStartUpSaysWhatItRuns: the log at start names each model (name, endpoint host, model id)
// and where to open the admin pages and the web chat, warns of a public provider's endpoint
// without a key (and not of a local one), and never shows a key.
func TestStartUpSaysWhatItRuns(t *testing.T) {
	const secret = "sk-test-secret-4242"
	model := llm.NewServer()
	t.Cleanup(model.Close)
	text := webChatBot(t).String() +
		"\n[[models]]\nname = \"primary\"\nbase_url = \"https://api.openai.com/v1\"\nmodel = \"gpt-4o-mini\"\n" +
		"\n[[models]]\nname = \"local\"\nbase_url = \"" + model.URL + "\"\nmodel = \"test-model\"\napi_key = \"" + secret + "\"\n"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var logs logbuf.Buffer
	done := make(chan int, 1)
	go func() { done <- runBot(t, ctx, writeText(t, text), &logs) }()
	wait.For(t, "the bot running", func() bool { return strings.Contains(logs.String(), "bot running") })
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("bot serve exited %d after a clean stop", code)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("bot serve did not return 30 s after the stop")
	}
	out := logs.String()
	for _, want := range []string{
		`level=INFO msg=model name=primary role=primary endpoint=https://api.openai.com model=gpt-4o-mini`,
		`level=INFO msg=model name=local role=fallback endpoint=` + strings.TrimSuffix(model.URL, "/v1") + ` model=test-model`,
		`level=WARN msg="models[0].api_key is empty and https://api.openai.com refuses requests without a key`,
		`level=INFO msg="admin pages" open=http://127.0.0.1:`,
		`level=INFO msg="web chat" open=http://127.0.0.1:`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the start-up log lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "models[1].api_key") {
		t.Errorf("a model on loopback with a key was warned about:\n%s", out)
	}
	if strings.Contains(out, secret) {
		t.Errorf("the start-up log shows an API key:\n%s", out)
	}
	admin := regexp.MustCompile(`"admin pages" open=(\S+) login="([^"]+)"`).FindStringSubmatch(out)
	if admin == nil || !strings.HasSuffix(admin[1], "/admin/") || !strings.HasPrefix(admin[2], "none") {
		t.Errorf("the admin line does not say where to open it and that no login is asked: %q", admin)
	}
	if i, j := strings.Index(out, `"admin pages"`), strings.Index(out, "bot running"); i < 0 || j < i {
		t.Errorf("the admin address comes after \"bot running\":\n%s", out)
	}
}

func writeText(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
