package discord_test

import (
	"fmt"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"

	"relaybot/adapters/discord"
	"relaybot/internal/testkit/wait"
)

func TestNewRejectsBadOptions(t *testing.T) {
	for _, o := range []discord.Options{{}, {Token: "t", APIBase: "ftp://example.org"}, {Token: "t", APIBase: "::"}} {
		if _, err := discord.New(o); err == nil {
			t.Errorf("New(%+v) accepted", o)
		}
	}
}

func TestRunLeavesNoGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	t.Run("session", func(t *testing.T) {
		hs := start(t, func(o *discord.Options) { o.RegisterCommands = true }, nil)
		_, rc := hs.dm("550000000000000001", "hi")
		r := rc.out.NewReply(hs.ctx)
		r.Update("working on it")
		r.Working(true)
		hs.srv.DropGateway()
		hs.waitFor("the resume", func() bool { return hs.srv.Resumes() == 1 })
		if err := r.Finish(hs.ctx, "done", nil); err != nil {
			t.Fatal(err)
		}
	})
	wait.Until(t, "the adapter's goroutines to end after Run returned", func() error {
		if n := runtime.NumGoroutine(); n > before {
			var buf strings.Builder
			_ = pprof.Lookup("goroutine").WriteTo(&buf, 1)
			return fmt.Errorf("%d goroutines left (%d before):\n%s", n, before, buf.String())
		}
		return nil
	})
}

func TestGlobalBudgetIsTheConfiguredOne(t *testing.T) {
	tests := []struct {
		name      string
		perSecond int
		want      int
	}{
		{"default is Discord's 50", 0, 50},
		{"a large bot's grant", 1200, 1200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := discord.New(discord.Options{Token: "t", APIBase: "http://127.0.0.1:1/api/v10", GlobalPerSecond: tt.perSecond})
			if err != nil {
				t.Fatal(err)
			}
			defer a.Engine().Close()
			if got := a.Limits().Global.N; got != tt.want {
				t.Errorf("replies are paced at %d requests a second, want %d", got, tt.want)
			}
		})
	}
}
