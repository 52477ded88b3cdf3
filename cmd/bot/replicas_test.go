package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"relaybot/internal/testkit/wait"
	"strings"
	"testing"

	"relaybot/config"
	"relaybot/coord"
	"relaybot/internal/testkit/llm"
	"relaybot/internal/testkit/logbuf"
)

// secondServe runs another bot serve with cfg and returns its start-up error, or fails the test
// when it starts running instead.
func secondServe(t *testing.T, cfg *config.Config) error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logs := &logbuf.Buffer{}
	errc := make(chan error, 1)
	go func() { errc <- serve(ctx, cfg, slog.New(slog.NewTextHandler(logs, nil)), nil) }()
	var err error
	wait.For(t, "the second bot serve to stop or start", func() bool {
		select {
		case err = <-errc:
			return true
		default:
		}
		if strings.Contains(logs.String(), "bot running") {
			cancel()
			<-errc
			t.Fatalf("a second bot serve started on the same SQLite file alongside the first")
		}
		return false
	})
	return err
}

// TestASecondServeOnTheSameSQLiteFileIsRefused starts a second `bot serve` on the data folder of
// a running one: it is refused with an error that names the running process and tells to use
// PostgreSQL, and the first one keeps answering. Before, both ran on the file and the second's
// start-up marked the first's running turns interrupted.
func TestASecondServeOnTheSameSQLiteFileIsRefused(t *testing.T) {
	e := newEnv(t)
	stop := e.start(e.config())
	err := secondServe(t, e.config())
	if !errors.Is(err, coord.ErrInUse) {
		t.Fatalf("second bot serve on %s: err = %v, want it refused because the file is in use", e.db, err)
	}
	for _, want := range []string{fmt.Sprintf("pid %d", os.Getpid()), "postgres"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not say %q", err, want)
		}
	}
	e.llm.Push(llm.Text("Still here."))
	e.say(1, "hello?")
	e.waitBotText(1, "the first bot's answer", contains("Still here."))
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}
