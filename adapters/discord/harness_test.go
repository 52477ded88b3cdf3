package discord_test

import (
	"context"
	"errors"
	"net/http"
	"runtime/pprof"
	"strings"
	"testing"
	"testing/synctest"
	"time"
	"unicode/utf8"

	"relaybot/adapters"
	"relaybot/adapters/discord"
	dtk "relaybot/internal/testkit/discord"
)

const (
	guildID = "300000000000000001"
	userID  = "400000000000000001"
)

type received struct {
	in  adapters.Inbound
	out adapters.Responder
}

// handler is the test's stand-in for the pipeline: it hands every Inbound to the test, or runs fn.
type handler struct {
	got chan received
	fn  func(ctx context.Context, in adapters.Inbound, out adapters.Responder)
}

func (h *handler) Handle(ctx context.Context, in adapters.Inbound, out adapters.Responder) {
	if h.fn != nil {
		h.fn(ctx, in, out)
	}
	h.got <- received{in, out}
}

type harness struct {
	t   testing.TB
	srv *dtk.Server
	a   *discord.Adapter
	h   *handler
	ctx context.Context
}

// start runs an adapter against a fresh test server until the test ends.
func start(t testing.TB, tweak func(*discord.Options), fn func(context.Context, adapters.Inbound, adapters.Responder)) *harness {
	t.Helper()
	return startWith(t, dtk.Config{}, tweak, fn)
}

// startInBubble is start against a server in memory: call it inside a testing/synctest
// bubble, where every wait of the adapter and the server is on the bubble's clock.
func startInBubble(t testing.TB, tweak func(*discord.Options), fn func(context.Context, adapters.Inbound, adapters.Responder)) *harness {
	t.Helper()
	return startWith(t, dtk.Config{InMemory: true}, tweak, fn)
}

// startWith is start against a test server configured by cfg.
func startWith(t testing.TB, cfg dtk.Config, tweak func(*discord.Options), fn func(context.Context, adapters.Inbound, adapters.Responder)) *harness {
	t.Helper()
	hs := launch(t, dtk.New(cfg), tweak, fn)
	wctx, wcancel := context.WithTimeout(hs.ctx, 10*time.Second)
	defer wcancel()
	if err := hs.srv.WaitReady(wctx); err != nil {
		t.Fatalf("gateway never became ready: %v", err)
	}
	return hs
}

// launch runs an adapter against srv until the test ends, and closes srv then; it does not wait
// for the gateway.
func launch(t testing.TB, srv *dtk.Server, tweak func(*discord.Options), fn func(context.Context, adapters.Inbound, adapters.Responder)) *harness {
	t.Helper()
	t.Cleanup(srv.Close) // after the adapter's Run has returned (cleanups run last first)
	return join(t, srv, tweak, fn)
}

// join runs another adapter (another replica) against srv, which launch started, until the
// test ends. Its Run returns before srv closes: a server dropping the gateway of an adapter
// that is closing it too would leave two discordgo goroutines waiting on one lock, which a
// synctest bubble cannot see past.
func join(t testing.TB, srv *dtk.Server, tweak func(*discord.Options), fn func(context.Context, adapters.Inbound, adapters.Responder)) *harness {
	t.Helper()
	opts := optionsFor(t, srv)
	if tweak != nil {
		tweak(&opts)
	}
	a, err := discord.New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	h := &handler{got: make(chan received, 64), fn: fn}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, h) }()
	t.Cleanup(func() {
		if srv.InMemory() {
			// In a bubble, let discordgo's goroutines settle before Run closes the sessions:
			// Close sleeps holding the session lock, and a heartbeat not yet started would
			// wait on that lock, which the bubble cannot see past.
			synctest.Wait()
		}
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(60 * time.Second):
			var buf strings.Builder
			_ = pprof.Lookup("goroutine").WriteTo(&buf, 1)
			t.Errorf("Run did not return after cancel; goroutines:\n%s", buf.String())
		}
	})
	return &harness{t: t, srv: srv, a: a, h: h, ctx: ctx}
}

// optionsFor are an adapter's options against srv; when srv is in memory (in a synctest
// bubble), REST and the gateway reach it through memory.
func optionsFor(t testing.TB, srv *dtk.Server) discord.Options {
	opts := discord.Options{Token: srv.Token(), APIBase: srv.APIBase(), Commands: testCommands()}
	if srv.InMemory() {
		tr := &http.Transport{DialContext: srv.Dial}
		t.Cleanup(tr.CloseIdleConnections) // after the adapter's Run has returned and the server closed
		opts.HTTPTransport, opts.GatewayDial = tr, srv.Dial
	}
	return opts
}

// next returns the next Inbound the handler got.
func (hs *harness) next() received {
	hs.t.Helper()
	select {
	case r := <-hs.h.got:
		return r
	case <-time.After(15 * time.Second):
		hs.t.Fatalf("no message reached the handler")
		return received{}
	}
}

// post posts a user's message and returns the Inbound and Responder it produced.
func (hs *harness) post(um dtk.UserMessage) (dtk.Message, received) {
	hs.t.Helper()
	if um.AuthorID == "" {
		um.AuthorID = userID
	}
	m, err := hs.srv.Post(um)
	if err != nil {
		hs.t.Fatalf("post: %v", err)
	}
	return m, hs.next()
}

// dm posts a direct message in channel ch.
func (hs *harness) dm(ch, text string) (dtk.Message, received) {
	return hs.post(dtk.UserMessage{ChannelID: ch, Content: text})
}

// waitFor waits until cond holds.
func (hs *harness) waitFor(what string, cond func() bool) {
	hs.t.Helper()
	ctx, cancel := context.WithTimeout(hs.ctx, 20*time.Second)
	defer cancel()
	if err := hs.srv.WaitFor(ctx, cond); err != nil {
		hs.t.Fatalf("waiting for %s: %v", what, err)
	}
}

// botText is what the bot's messages in a channel show, joined by newlines.
func (hs *harness) botText(ch string) string {
	var parts []string
	for _, m := range hs.srv.BotMessages(ch) {
		if m.Content != "" {
			parts = append(parts, m.Content)
		}
	}
	return strings.Join(parts, "\n")
}

// checkBudget fails the test when the channel saw a 429 or more than 5 creates and edits in
// any 5-second span.
func checkBudget(t testing.TB, srv *dtk.Server, channels ...string) {
	t.Helper()
	for _, ch := range channels {
		var times []time.Time
		for _, c := range srv.CallsTo(dtk.RouteCreateMessage, dtk.RouteEditMessage) {
			if c.ChannelID != ch {
				continue
			}
			if c.Status == 429 {
				t.Errorf("channel %s: 429 at %s", ch, c.Time.Format("15:04:05.000"))
				continue
			}
			times = append(times, c.Time)
		}
		for i := range times {
			n := 0
			for j := i; j < len(times) && times[j].Sub(times[i]) < 5*time.Second; j++ {
				n++
			}
			if n > 5 {
				t.Errorf("channel %s: %d requests in the 5 s from %s", ch, n, times[i].Format("15:04:05.000"))
			}
		}
	}
}

// limitedCalls counts the 429s the server answered on routes.
func limitedCalls(srv *dtk.Server, routes ...dtk.Route) int {
	n := 0
	for _, c := range srv.CallsTo(routes...) {
		if c.Status == 429 {
			n++
		}
	}
	return n
}

// checkNoPings fails when any bot create or edit lacked allowed_mentions with an empty parse list.
func checkNoPings(t testing.TB, srv *dtk.Server) {
	t.Helper()
	for _, c := range srv.CallsTo(dtk.RouteCreateMessage, dtk.RouteEditMessage) {
		if c.Status >= 300 {
			continue
		}
		am := strings.ReplaceAll(string(c.AllowedMentions), " ", "")
		if !strings.Contains(am, `"parse":[]`) {
			t.Errorf("%s %s sent allowed_mentions %q, want parse=[]", c.Method, c.Path, c.AllowedMentions)
		}
	}
}

// text returns n runes of prose with multi-byte characters, in lines and paragraphs.
func text(n int) string {
	words := []string{"the", "naïve", "model", "answers", "日本語", "with", "care", "🙂", "and", "streams", "every", "token"}
	var b strings.Builder
	count, i := 0, 0
	for count < n {
		w := words[i%len(words)]
		sep := " "
		switch {
		case i%97 == 96:
			sep = "\n\n"
		case i%23 == 22:
			sep = "\n"
		}
		piece := w + sep
		if count+utf8.RuneCountInString(piece) > n {
			piece = strings.Repeat("x", n-count)
		}
		b.WriteString(piece)
		count += utf8.RuneCountInString(piece)
		i++
	}
	return strings.TrimSpace(b.String())
}

// streamInto feeds text to r as a model would: the whole text so far, step runes more each
// time, one update per tick.
func streamInto(r adapters.Reply, full string, step int, every time.Duration) {
	runes := []rune(full)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for i := step; i < len(runes); i += step {
		r.Update(string(runes[:i]))
		<-tick.C
	}
}

func errorsIs(err, target error) bool { return errors.Is(err, target) }

func errorsAs[T error](err error, target *T) bool { return errors.As(err, target) }

// prefix returns the first n runes of s.
func prefix(s string, n int) string {
	r := []rune(s)
	if n > len(r) {
		n = len(r)
	}
	return string(r[:n])
}

// testCommands is the command table the harness's adapters register (the bot's own comes from
// the pipeline).
func testCommands() adapters.Commands {
	return adapters.Commands{
		{Name: "reset", Who: adapters.Anyone, Help: "start a new conversation"},
		{Name: "stop", Who: adapters.Anyone, Help: "cancel the answer in progress"},
		{Name: "help", Who: adapters.Anyone, Help: "show this"},
		{Name: "usage", Who: adapters.Anyone, Help: "your tokens and cost",
			Args: []adapters.CommandArg{{Name: "scope", Help: "all: everyone's usage", Choices: []string{"all"}}}},
	}
}

// waitForServer polls cond with a generous deadline.
func waitForServer(t *testing.T, hs *harness, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(hs.ctx, 20*time.Second)
	defer cancel()
	if err := hs.srv.WaitFor(ctx, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}
