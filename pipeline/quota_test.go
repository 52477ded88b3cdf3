package pipeline

import (
	"context"
	"strings"
	"testing"
	"time"

	"relaybot/adapters"
	"relaybot/chat"
	"relaybot/internal/testkit/llm"
	"relaybot/pipeline/access"
	"relaybot/pipeline/quota"
	"relaybot/policy"
)

func usedTokens(in, out int, text string) llm.Reply {
	r := llm.Text(text)
	r.Usage = &llm.Usage{PromptTokens: in, CompletionTokens: out}
	return r
}

// A daily token quota reached in one turn stops the next one before any model request: the
// user is told the quota is used up and when it resets; an exempt admin still gets answers.
func TestQuotaStopsTheNextTurnBeforeAnyModelRequest(t *testing.T) {
	now := time.Date(2026, 12, 1, 15, 30, 0, 0, time.UTC)
	h := newHarness(t, Options{
		Access: access.Lists{Admins: []string{"telegram:1"}},
		Quotas: quota.Policy{User: policy.Limits{TokensPerDay: 1000}},
		Now:    func() time.Time { return now },
	})
	h.llm.Push(usedTokens(900, 150, "first answer"))
	out := &recResponder{stream: true}
	<-h.handle(privateMsg("7", "1", "hello"), out)
	if final, _ := out.Reply(0).Final(); final != "first answer" {
		t.Fatalf("first turn: %q", final)
	}
	before := h.llm.RequestCount()
	out = &recResponder{stream: true}
	<-h.handle(privateMsg("7", "2", "again"), out)
	if got := h.llm.RequestCount(); got != before {
		t.Fatalf("the model got %d requests after the quota was used up, want none", got-before)
	}
	n := out.Notices()
	if len(n) != 1 || !strings.Contains(n[0], "You have used up today's quota (1050 of 1000 tokens). It resets Dec 2 00:00 UTC.") {
		t.Fatalf("notices = %q, want the quota message with its reset time", n)
	}

	// Another user and an admin are not held by user 7's quota.
	h.llm.Push(llm.Text("for 8"), llm.Text("for the admin"))
	for _, in := range []adapters.Inbound{privateMsg("8", "3", "hi"), privateMsg("1", "4", "hi")} {
		o := &recResponder{stream: true}
		<-h.handle(in, o)
		if _, ok := o.Reply(0).Final(); !ok {
			t.Fatalf("user %s was not answered: notices %q", in.UserID, o.Notices())
		}
	}
}

// /usage shows the sender's own tokens and cost today and this month; /usage all is for admins.
func TestUsageCommand(t *testing.T) {
	now := time.Date(2026, 12, 1, 15, 30, 0, 0, time.UTC)
	h := newHarness(t, Options{
		Access: access.Lists{Admins: []string{"telegram:1"}},
		Models: ModelOptions{Prices: map[string]chat.Price{"primary": {In: 2.50, Out: 10.00}}},
		Now:    func() time.Time { return now },
	})
	h.llm.Push(usedTokens(400_000, 100_000, "a"), usedTokens(1000, 1000, "b"))
	<-h.handle(privateMsg("7", "1", "hello"), &recResponder{stream: true})
	<-h.handle(privateMsg("8", "2", "hello"), &recResponder{stream: true})
	tests := []struct {
		user, args string
		want       string
	}{
		{"7", "", "Today: 400000 tokens in, 100000 out, 1 model calls, cost 2.0000"},
		{"8", "", "This month: 1000 tokens in, 1000 out, 1 model calls, cost 0.0125"},
		{"8", "all", "Only bot admins can use /usage all."},
		{"1", "all", "- telegram:7: 400000 tokens in, 100000 out, 1 model calls, cost 2.0000"},
	}
	for _, tc := range tests {
		out := &recResponder{}
		in := privateMsg(tc.user, "9", "/usage "+tc.args)
		<-h.handle(in, out)
		if n := out.RawNotices(); len(n) != 1 || !strings.Contains(n[0], tc.want) {
			t.Errorf("/usage %s by %s = %q, want %q", tc.args, tc.user, n, tc.want)
		}
	}
}

// /usage says how many of the tokens in the provider served from its prompt cache, and bills
// them at the cache's price.
func TestUsageCommandShowsCachedTokensAtTheirPrice(t *testing.T) {
	now := time.Date(2026, 12, 1, 15, 30, 0, 0, time.UTC)
	h := newHarness(t, Options{
		Models: ModelOptions{Prices: map[string]chat.Price{"primary": {In: 2.50, CachedIn: 0.25, Out: 10.00}}},
		Now:    func() time.Time { return now },
	})
	r := llm.Text("a")
	r.Usage = &llm.Usage{PromptTokens: 400_000, CachedTokens: 300_000, CompletionTokens: 100_000}
	h.llm.Push(r)
	<-h.handle(privateMsg("7", "1", "hello"), &recResponder{stream: true})
	out := &recResponder{}
	<-h.handle(privateMsg("7", "9", "/usage"), out)
	// 100,000 × 2.50 + 300,000 × 0.25 + 100,000 × 10.00 per million.
	// At full price: 400,000 × 2.50 + 100,000 × 10.00 = 2.0000, so the cache saved 0.6750.
	want := "Today: 400000 tokens in (300000 cached), 100000 out, 1 model calls, cost 1.3250 (0.6750 saved by the cache)"
	if n := out.RawNotices(); len(n) != 1 || !strings.Contains(n[0], want) || !strings.Contains(n[0], quota.CachedNote) {
		t.Errorf("/usage = %q, want %q and what cached tokens are", n, want)
	}
}

// A quota reached inside a turn (a tool round's model call used it up) stops the turn before its
// next model call, with the quota message instead of the failure hint.
func TestQuotaStopsATurnBetweenItsModelCalls(t *testing.T) {
	now := time.Date(2026, 12, 1, 15, 30, 0, 0, time.UTC)
	h := newHarness(t, Options{Quotas: quota.Policy{User: policy.Limits{TokensPerDay: 1000}}, Now: func() time.Time { return now }})
	h.llm.Push(llm.Reply{
		Chunks: []llm.Chunk{{Content: "Let me check."}, {ToolCalls: []llm.ToolCallDelta{{Index: 0, ID: "c1", Name: "echo", Arguments: `{"text":"x"}`}}}},
		Usage:  &llm.Usage{PromptTokens: 1100, CompletionTokens: 100},
	}, llm.Text("never asked for"))
	out := &recResponder{stream: true}
	<-h.handle(privateMsg("7", "1", "hello"), out)
	if got := h.llm.RequestCount(); got != 1 {
		t.Fatalf("the model got %d requests, want 1: the turn went on past the quota", got)
	}
	final, _ := out.Reply(0).Final()
	if !strings.Contains(final, "You have used up today's quota (1200 of 1000 tokens)") || strings.Contains(final, "never asked for") {
		t.Fatalf("final = %q, want the quota message after the first round", final)
	}
	turns, err := h.store.Turns.ChatTurns(context.Background(), privateMsg("7", "", "").Chat, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(turns) != 1 || turns[0].Failure != chat.FailureQuota {
		t.Errorf("turns %+v, want the one turn saved as not answered for a quota: it would be sent again with the next message", turns)
	}
}

// A Discord thread's answers count toward its parent channel's chat quota (quotas.chat caps a
// channel with its threads): a thread that used it up leaves the channel and its other threads
// refused before any model request.
func TestAThreadsUsageCountsTowardItsChannelsQuota(t *testing.T) {
	now := time.Date(2026, 12, 1, 15, 30, 0, 0, time.UTC)
	h := newHarness(t, Options{Quotas: quota.Policy{Chat: policy.Limits{TokensPerDay: 1000}}, Now: func() time.Time { return now }})
	msg := func(channel, parent, id string) adapters.Inbound {
		return adapters.Inbound{Chat: chat.Ref{Platform: chat.Discord, ChatID: channel}, ParentChatID: parent,
			Kind: adapters.Group, MessageID: id, UserID: "5", UserName: "Ann", Text: "hello", Time: now}
	}
	h.llm.Push(usedTokens(900, 150, "answer in the thread"))
	out := &recResponder{stream: true}
	<-h.handle(msg("thread-1", "channel", "1"), out)
	if final, _ := out.Reply(0).Final(); final != "answer in the thread" {
		t.Fatalf("the thread's first answer: %q, notices %q", final, out.Notices())
	}
	for _, in := range []adapters.Inbound{msg("channel", "", "2"), msg("thread-2", "channel", "3")} {
		before := h.llm.RequestCount()
		out := &recResponder{stream: true}
		<-h.handle(in, out)
		if got := h.llm.RequestCount(); got != before {
			t.Errorf("%s: the model got %d requests, want none: the thread's usage escaped the channel's quota", in.Chat.ChatID, got-before)
		}
		if n := out.Notices(); len(n) != 1 || !strings.Contains(n[0], "This chat has used up today's quota (1050 of 1000 tokens)") {
			t.Errorf("%s: notices %q, want the chat quota's refusal", in.Chat.ChatID, n)
		}
	}
	// Another channel is not held by it.
	h.llm.Push(llm.Text("elsewhere"))
	out = &recResponder{stream: true}
	<-h.handle(msg("other", "", "4"), out)
	if _, ok := out.Reply(0).Final(); !ok {
		t.Errorf("another channel was refused: %q", out.Notices())
	}
}
