package pipeline

import (
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"relaybot/internal/testkit/llm"
)

// clock is a time source the test moves by hand.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func countNotices(notices []string) map[string]int {
	n := map[string]int{}
	for _, s := range notices {
		n[s]++
	}
	return n
}

func TestStopCountsAgainstTheRateLimitLikeHelp(t *testing.T) {
	tests := []struct {
		command string
		want    map[string]int
	}{
		{"/help", map[string]int{Commands().Help(HelpIntro): 3, DefaultRateLimitedText: 1}},
		{"/stop", map[string]int{"Nothing to stop.": 1, DefaultRateLimitedText: 1}},
		{"/reset", map[string]int{"Started a new conversation.": 3, DefaultRateLimitedText: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.command, func(t *testing.T) {
			h := newHarness(t, Options{RateLimitPerMinute: 3})
			out := &recResponder{}
			for i := range 30 {
				<-h.handle(privateMsg("1", strconv.Itoa(i), tt.command), out)
			}
			got := countNotices(out.Notices())
			if len(got) != len(tt.want) {
				t.Fatalf("30 × %s got the replies %v, want %v", tt.command, got, tt.want)
			}
			for text, n := range tt.want {
				if got[text] != n {
					t.Fatalf("30 × %s got the replies %v, want %v", tt.command, got, tt.want)
				}
			}
		})
	}
}

func TestNothingToStopIsSaidOnceAMinute(t *testing.T) {
	clk := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	h := newHarness(t, Options{Now: clk.Now}) // no rate limit at all
	out := &recResponder{}
	for i := range 30 {
		<-h.handle(privateMsg("1", strconv.Itoa(i), "/stop"), out)
	}
	if got := countNotices(out.Notices()); got["Nothing to stop."] != 1 || len(got) != 1 {
		t.Fatalf("30 × /stop with nothing running got the replies %v, want one \"Nothing to stop.\"", got)
	}
	// Another user is answered; the first user is answered again a minute later.
	other := &recResponder{}
	<-h.handle(privateMsg("2", "1", "/stop"), other)
	if n := other.Notices(); len(n) != 1 {
		t.Fatalf("another user's /stop got %q, want one answer", n)
	}
	clk.Advance(time.Minute)
	<-h.handle(privateMsg("1", "99", "/stop"), out)
	if got := countNotices(out.Notices()); got["Nothing to stop."] != 2 {
		t.Fatalf("a /stop a minute later got no answer: %v", got)
	}
}

// The adapter parses commands (adapters.ParseCommand) and drops those naming another bot; the
// pipeline acts on Inbound.Command alone, never on text that looks like a command.
func TestCommandsComeOnlyFromInboundCommand(t *testing.T) {
	h := newHarness(t, Options{})
	h.llm.Push(llm.Text("that is not my command"))
	out := &recResponder{}
	in := privateMsg("1", "1", "hello")
	in.Text = "/reset@otherbot"
	<-h.handle(in, out)
	if n := out.Notices(); len(n) != 0 {
		t.Fatalf("text %q was run as a command: notices %q", in.Text, n)
	}
	if h.llm.RequestCount() != 1 {
		t.Fatalf("the model was asked %d times, want 1", h.llm.RequestCount())
	}
}

// Every command of the table (and every alias) is answered by the pipeline itself, with a
// notice and without asking the model: a name the table lists but the dispatch lacked would
// reach the model as a message. /help lists them all, /audit included.
func TestEveryCommandOfTheTableIsAnsweredWithoutTheModel(t *testing.T) {
	help := Commands().Help(HelpIntro)
	for _, c := range Commands() {
		for _, name := range append([]string{c.Name}, c.Aliases...) {
			t.Run(name, func(t *testing.T) {
				h := newHarness(t, Options{})
				out := &recResponder{}
				in := privateMsg("1", "1", "/"+name)
				in.Command = name
				<-h.handle(in, out)
				if h.llm.RequestCount() != 0 {
					t.Fatalf("/%s reached the model", name)
				}
				if len(out.Notices()) == 0 {
					t.Fatalf("/%s got no answer", name)
				}
			})
		}
		if !strings.Contains(help, c.Usage()+": "+c.Description()) {
			t.Errorf("/help lacks /%s:\n%s", c.Name, help)
		}
	}
}
