package main

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"relaybot/config"
	"relaybot/coord"
	"relaybot/internal/testkit/llm"
	"relaybot/internal/testkit/logbuf"
)

// pgSchemaDSN returns the DSN of a fresh schema in the PostgreSQL database of
// BOT_TEST_POSTGRES_DSN, dropped when the test ends; the test is skipped without it.
func pgSchemaDSN(t *testing.T) string {
	t.Helper()
	base := os.Getenv("BOT_TEST_POSTGRES_DSN")
	if base == "" {
		t.Skip("PostgreSQL not tested: set BOT_TEST_POSTGRES_DSN")
	}
	schema := fmt.Sprintf("replicas_%d", time.Now().UnixNano())
	db, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := db.Exec("DROP SCHEMA " + schema + " CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
		db.Close()
	})
	if _, err := db.Exec("CREATE SCHEMA " + schema); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// freeAddr returns a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// replica is one bot serve of a deployment, run in this process.
type replica struct {
	stop func() error
	logs *logbuf.Buffer
}

// startReplica runs bot serve with cfg until the test ends (or stop) and waits until it runs.
func startReplica(t *testing.T, cfg *config.Config) *replica {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &replica{logs: &logbuf.Buffer{}}
	errc := make(chan error, 1)
	go func() { errc <- serve(ctx, cfg, slog.New(slog.NewTextHandler(r.logs, nil)), nil) }()
	r.stop = sync.OnceValue(func() error {
		cancel()
		return <-errc
	})
	t.Cleanup(func() { r.stop() })
	waitFor(t, "a replica to run", func() bool {
		select {
		case err := <-errc:
			t.Fatalf("replica did not start: %v\n%s", err, r.logs)
		default:
		}
		return strings.Contains(r.logs.String(), "bot running")
	})
	return r
}

// TestTwoReplicasOnOnePostgresAnswerEveryWebhookUpdateOnce runs two bot serve replicas on one
// PostgreSQL database behind a proxy that hands every Telegram webhook update to both of them
// (first to each in turn), as a retry landing on the other replica would: every message is
// answered exactly once, both replicas are listed while they run, and a clean stop removes each
// from the list at once. Before the inbound ledger, each replica answered every update.
func TestTwoReplicasOnOnePostgresAnswerEveryWebhookUpdateOnce(t *testing.T) {
	dsn := pgSchemaDSN(t)
	e := newEnv(t)
	addrs := []string{freeAddr(t), freeAddr(t)}
	var turn atomic.Int64
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		first := int(turn.Add(1) % 2)
		status := http.StatusBadGateway
		for _, i := range []int{first, 1 - first} {
			req, _ := http.NewRequestWithContext(r.Context(), r.Method, "http://"+addrs[i]+r.URL.Path, bytes.NewReader(body))
			req.Header = r.Header.Clone()
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				continue
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if i == first || status != http.StatusOK {
				status = resp.StatusCode
			}
		}
		w.WriteHeader(status)
	}))
	defer proxy.Close()

	var reps []*replica
	for i, addr := range addrs {
		text := fmt.Sprintf(`
[storage]
driver = "postgres"
dsn = %q
[[models]]
name = "primary"
base_url = %q
model = "test-model"
[agent]
system_prompt = "You are a test bot."
[tools]
plugins = []
native = []
[telegram]
enabled = true
token = %q
api_endpoint = %q
mode = "webhook"
webhook_listen = %q
webhook_url = %q
webhook_secret = "s3cret-token"
offset_file = %q
[admin]
enabled = false
`, dsn, e.llm.URL, e.tg.Token(), e.tg.Endpoint(), addr, proxy.URL+"/hook", filepath.Join(t.TempDir(), fmt.Sprintf("r%d.offset", i)))
		cfg, err := config.Parse([]byte(text), func(string) (string, bool) { return "", false })
		if err != nil {
			t.Fatal(err)
		}
		reps = append(reps, startReplica(t, cfg))
	}
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if ins, err := coord.Instances(context.Background(), db); err != nil || len(ins) != 2 {
		t.Fatalf("live instances = %d (%v), want the 2 replicas", len(ins), err)
	}

	const chats = 12
	for i := range chats {
		e.llm.Push(llm.Text("Answered."))
		e.say(int64(2000+i), "question")
	}
	for i := range chats {
		e.waitBotText(int64(2000+i), "the answer", contains("Answered."))
	}
	for i := range chats {
		if got := e.botTexts(int64(2000 + i)); len(got) != 1 {
			t.Errorf("chat %d got %d bot messages %q, want its message answered once", 2000+i, len(got), got)
		}
	}
	for _, r := range reps {
		if err := r.stop(); err != nil {
			t.Fatal(err)
		}
	}
	if ins, err := coord.Instances(context.Background(), db); err != nil || len(ins) != 0 {
		t.Fatalf("live instances after both stopped = %d (%v), want none: a clean stop leaves at once", len(ins), err)
	}
}
