package pipeline

import (
	"context"
	"sync"
	"testing"

	"relaybot/adapters"
	"relaybot/internal/testkit/llm"
	"relaybot/pipeline/access"
)

// entryGate is a deployment's turn queue held in memory: it admits every message (or none,
// full) and notes which messages have entered it.
type entryGate struct {
	full bool

	mu      sync.Mutex
	seq     int64
	entered map[string]bool // by message id: its Enter has returned
}

func (g *entryGate) Shared() bool { return true }

func (g *entryGate) Enter(_ context.Context, _ string, in adapters.Inbound, _ int, _ bool) (int64, bool, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.entered == nil {
		g.entered = map[string]bool{}
	}
	g.entered[in.MessageID] = true
	if g.full {
		return 0, false, nil
	}
	g.seq++
	return g.seq, true, nil
}

func (g *entryGate) hasEntered(id string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.entered[id]
}

func (g *entryGate) Wait(context.Context, string, int64) (bool, error) { return true, nil }

func (g *entryGate) Leave(context.Context, string, int64) error { return nil }

func (g *entryGate) Elsewhere(context.Context, string) (string, bool, error) { return "", false, nil }

func (g *entryGate) PublishStop(context.Context, string, string, bool) error { return nil }

// placedAt is what had happened when the pipeline first said a message was placed.
type placedAt struct {
	calls   int
	entered bool // the message had entered the deployment's queue
	notices int  // the user had been sent this many notices
	replies int  // and this many replies begun
}

// TestTheAdapterHearsAMessageIsPlacedOnceTheDeploymentsQueueHoldsIt: an adapter that tells its
// platform a message arrived only once the message has its place (a Telegram webhook behind a
// load balancer) is told so by the pipeline once the deployment's turn queue holds the message,
// not before (the chat's next message could run first on another replica) and not after it
// waits for its turn or runs it (Telegram would hold the chat's next update that long); a
// command or a refusal takes no place and is told so before the user gets its answer.
func TestTheAdapterHearsAMessageIsPlacedOnceTheDeploymentsQueueHoldsIt(t *testing.T) {
	for _, tt := range []struct {
		name    string
		opts    Options
		full    bool     // the deployment's queue of the conversation is full
		first   []string // messages handled before, by the same user
		text    string
		entered bool // placed only once the message entered the queue
		notices int  // the notices the user gets, all after placed
		answer  bool // a turn answers it
	}{
		{name: "a message", text: "hello", entered: true, answer: true},
		{name: "a message the deployment's queue refuses", full: true, text: "hello", entered: true, notices: 1},
		{name: "/retry, which waits for the turn like a message", first: []string{"hello"}, text: "/retry", entered: true, answer: true},
		{name: "/help", text: "/help", notices: 1},
		{name: "/reset", text: "/reset", notices: 1},
		{name: "a message over the user's rate limit", opts: Options{RateLimitPerMinute: 1}, first: []string{"hello"}, text: "again", notices: 1},
		{name: "a message the access rules refuse", opts: Options{Access: access.Lists{DenyUsers: []string{"*:9"}}}, text: "hello"},
		{name: "a message with nothing in it", text: "  "},
	} {
		t.Run(tt.name, func(t *testing.T) {
			gate := &entryGate{}
			tt.opts.Replicas = gate
			h := newHarness(t, tt.opts)
			h.llm.SetHandler(func(r llm.Request) llm.Reply { return llm.Text("answer to " + lastUserContent(r)) })
			for i, text := range tt.first {
				<-h.handle(privateMsg("9", string(rune('a'+i)), text), &recResponder{stream: true})
			}
			gate.mu.Lock()
			gate.full = tt.full
			gate.mu.Unlock()
			out := &recResponder{stream: true}
			in := privateMsg("9", "m1", tt.text)
			var mu sync.Mutex
			var at placedAt
			in.Placed = func() {
				mu.Lock()
				defer mu.Unlock()
				if at.calls++; at.calls > 1 {
					return
				}
				out.mu.Lock()
				at.notices, at.replies = len(out.notices), len(out.replies)
				out.mu.Unlock()
				at.entered = gate.hasEntered("m1")
			}
			<-h.handle(in, out)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case at.calls == 0:
				t.Fatal("the adapter never heard the message was placed: a webhook would hold Telegram for adapters.PlaceWait")
			case at.entered != tt.entered:
				t.Errorf("placed with the message in the deployment's queue: %v, want %v", at.entered, tt.entered)
			case at.notices != 0 || at.replies != 0:
				t.Errorf("placed after %d notices and %d replies, want before any", at.notices, at.replies)
			}
			if n := len(out.Notices()); n != tt.notices {
				t.Errorf("the user got %d notices %q, want %d", n, out.Notices(), tt.notices)
			}
			final := ""
			if r := out.Reply(0); r != nil {
				final, _ = r.Final()
			}
			if (final != "") != tt.answer {
				t.Errorf("answer %q, want one: %v", final, tt.answer)
			}
		})
	}
}
