package pipeline

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"relaybot/adapters"
	"relaybot/agent"
	"relaybot/internal/testkit/llm"
	"relaybot/pipeline/access"
	"relaybot/pipeline/history"
	"relaybot/provider"
	"relaybot/store"
	"relaybot/store/storetest"
)

// withModels replaces the harness's pipeline by one whose runner has the given candidates, all
// answered by the harness's fake model, and no tools.
func (h *harness) withModels(opts Options, models ...agent.Model) {
	h.t.Helper()
	for i := range models {
		models[i].BaseURL = h.llm.URL
	}
	runner, err := agent.NewRunner(models, agent.Options{FlushChunks: 1})
	if err != nil {
		h.t.Fatal(err)
	}
	opts.History.SystemPrompt = "You are a test bot."
	opts.Logger = slog.New(slog.NewTextHandler(h.logs, nil))
	if opts.History.Rounds == 0 {
		opts.History.Rounds = 10
	}
	p, err := New(runner, storeOf(h.store), nil, opts)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		p.Shutdown(ctx)
	})
	h.p = p
}

func lastNotice(out *recResponder) string {
	n := out.Notices()
	if len(n) == 0 {
		return ""
	}
	return n[len(n)-1]
}

func TestModelCommandPicksAModelForThisConversation(t *testing.T) {
	budgets := []history.ModelBudget{{Name: "primary", ContextWindow: 8000, MaxOutputTokens: 1000}, {Name: "fast", ContextWindow: 8000, MaxOutputTokens: 1000}}
	tests := []struct {
		name       string
		selectable []string
		pick       string
		wantNotice string
		wantModel  string // the model id the next message is sent to
	}{
		{"any configured model", nil, "/model fast", "This conversation now uses fast.", "fast-model"},
		{"back to the configured order", nil, "/model default", "This conversation uses the configured model again.", "test-model"},
		{"a model that does not exist", nil, "/model huge", `There is no model "huge" to pick here. Send /model to list them.`, "test-model"},
		{"a model the admins left out", []string{"primary"}, "/model fast", `There is no model "fast" to pick here. Send /model to list them.`, "test-model"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Options{})
			h.withModels(Options{Models: ModelOptions{Budgets: budgets, Selectable: tt.selectable}},
				agent.Model{Endpoint: provider.Endpoint{Name: "primary", Model: "test-model"}}, agent.Model{Endpoint: provider.Endpoint{Name: "fast", Model: "fast-model"}})
			out := &recResponder{}
			<-h.handle(privateMsg("42", "1", "/model"), out)
			want := "Models: primary (current), fast. Send /model NAME to pick one for this conversation, /model default for the configured one."
			if tt.selectable != nil {
				want = "Models: primary (current). Send /model NAME to pick one for this conversation, /model default for the configured one."
			}
			if got := lastNotice(out); got != want {
				t.Errorf("/model said %q, want %q", got, want)
			}
			<-h.handle(privateMsg("42", "2", tt.pick), out)
			if got := lastNotice(out); got != tt.wantNotice {
				t.Errorf("%s said %q, want %q", tt.pick, got, tt.wantNotice)
			}
			h.llm.Push(llm.Text("hello"))
			<-h.handle(privateMsg("42", "3", "hi"), out)
			reqs := h.llm.Requests()
			if got := reqs[len(reqs)-1].Model; got != tt.wantModel {
				t.Errorf("the next message went to %q, want %q", got, tt.wantModel)
			}
		})
	}
}

func TestRetryAnswersTheLastMessageAgainAndHistoryKeepsOnlyTheNewAnswer(t *testing.T) {
	h := newHarness(t, Options{})
	out := &recResponder{}
	<-h.handle(privateMsg("42", "1", "/retry"), out)
	if got := lastNotice(out); got != "There is no earlier message of yours to answer again." {
		t.Errorf("/retry in a new chat said %q", got)
	}
	h.llm.Push(llm.Text("first answer"), llm.Text("second answer"), llm.Text("third answer"))
	<-h.handle(privateMsg("42", "2", "what is 2+2"), out)
	<-h.handle(privateMsg("42", "3", "/retry"), out)
	if got, _ := out.Reply(1).Final(); got != "second answer" {
		t.Fatalf("/retry answered %q, want the new answer", got)
	}
	if got, _ := out.Reply(0).Final(); got != "first answer" {
		t.Errorf("the earlier answer became %q; it stays in the chat", got)
	}
	reqs := h.llm.Requests()
	retried := reqs[1]
	if got := lastUserContent(retried); got != "what is 2+2" {
		t.Errorf("/retry asked %q, want the last user message", got)
	}
	if len(retried.Messages) != 2 {
		t.Errorf("/retry sent %d messages, want the system prompt and the message only: the earlier round left history", len(retried.Messages))
	}
	<-h.handle(privateMsg("42", "4", "and 3+3?"), out)
	reqs = h.llm.Requests()
	var sent []string
	for _, m := range reqs[len(reqs)-1].Messages[1:] {
		sent = append(sent, m.Role+": "+m.Content)
	}
	want := []string{"user: what is 2+2", "assistant: second answer", "user: and 3+3?"}
	if strings.Join(sent, "|") != strings.Join(want, "|") {
		t.Errorf("history after /retry: %q, want %q", sent, want)
	}
}

func TestSystemCommandSetsThePromptOfTheConversationForAdminsOnly(t *testing.T) {
	h := newHarness(t, Options{Access: access.Lists{Admins: []string{"telegram:1"}}})
	out := &recResponder{}
	// A group shared by its members: user 1 is an admin, user 42 is not.
	member := func(user, id, text string) adapters.Inbound {
		in := privateMsg(user, id, text)
		in.Chat.ChatID, in.Kind = "-100", adapters.Group
		return in
	}
	admin := func(id, text string) adapters.Inbound { return member("1", id, text) }
	steps := []struct {
		in         adapters.Inbound
		wantNotice string
	}{
		{member("42", "1", "/system Answer in French."), "Only an admin can set the system prompt."},
		{member("42", "2", "/system"), "This conversation uses the configured system prompt."},
		{admin("3", "/system Answer in French."), "System prompt set for this conversation."},
		{member("42", "4", "/system"), "System prompt of this conversation: Answer in French."},
	}
	for _, s := range steps {
		<-h.handle(s.in, out)
		if got := lastNotice(out); got != s.wantNotice {
			t.Fatalf("%q said %q, want %q", s.in.Args, got, s.wantNotice)
		}
	}
	h.llm.Push(llm.Text("Bonjour"), llm.Text("Hello"))
	<-h.handle(member("42", "5", "hi"), out)
	reqs := h.llm.Requests()
	if sys := reqs[0].Messages[0].Content; !strings.HasPrefix(sys, "Answer in French.") || strings.Contains(sys, "You are a test bot.") {
		t.Errorf("system prompt sent: %q, want the chat's own", sys)
	}
	<-h.handle(admin("6", "/system default"), out)
	<-h.handle(member("42", "7", "hi again"), out)
	reqs = h.llm.Requests()
	if sys := reqs[1].Messages[0].Content; !strings.HasPrefix(sys, "You are a test bot.") {
		t.Errorf("system prompt after /system default: %q, want the configured one", sys)
	}
}

// summaryOrText answers the summary instruction with summary and anything else with text.
func summaryOrText(summary, text string) llm.Handler {
	return func(req llm.Request) llm.Reply {
		if strings.HasPrefix(req.Messages[0].Content, "You write the memory") {
			return llm.Text(summary)
		}
		return llm.Text(text)
	}
}

func TestCompactCommandSummarisesTheConversationOnDemand(t *testing.T) {
	var rec *endsStore
	h := newHarnessStore(t, Options{}, func(st Store) Store { rec = &endsStore{Turns: st.Turns}; st.Turns = rec; return st })
	h.llm.SetHandler(summaryOrText("They talked about cats.", "an answer"))
	out := &recResponder{}
	<-h.handle(privateMsg("42", "1", "/compact"), out)
	if got := lastNotice(out); got != "Nothing to summarise yet." {
		t.Errorf("/compact in a new chat said %q", got)
	}
	<-h.handle(privateMsg("42", "2", "tell me about cats"), out)
	<-h.handle(privateMsg("42", "3", "and kittens"), out)
	<-h.handle(privateMsg("42", "4", "/compact"), out)
	if got := lastNotice(out); got != "Summarised 2 earlier rounds; the conversation goes on from the summary." {
		t.Errorf("/compact said %q", got)
	}
	reqs := h.llm.Requests()
	summaryReq := reqs[len(reqs)-1]
	if in := lastUserContent(summaryReq); !strings.Contains(in, "User: tell me about cats") || !strings.Contains(in, "Assistant: an answer") {
		t.Errorf("the model was asked to summarise %q", in)
	}
	<-h.handle(privateMsg("42", "5", "and dogs?"), out)
	reqs = h.llm.Requests()
	next := reqs[len(reqs)-1]
	if len(next.Messages) != 2 || !strings.Contains(next.Messages[0].Content, "They talked about cats.") {
		t.Errorf("after /compact the model got %d messages, system %q; want the summary and the new message only", len(next.Messages), next.Messages[0].Content)
	}
	if len(rec.ends) != 3 {
		t.Errorf("%d turns saved, want 3: /compact is no turn", len(rec.ends))
	}
}

func TestIdleResetStartsAFreshConversationAfterAQuietPeriod(t *testing.T) {
	clk := &clock{now: time.Now()}
	h := newHarness(t, Options{History: history.Options{IdleReset: 30 * time.Minute}, Now: clk.Now})
	h.llm.SetHandler(summaryOrText("", "ok"))
	out := &recResponder{}
	<-h.handle(privateMsg("42", "1", "first"), out)
	clk.Advance(29 * time.Minute)
	<-h.handle(privateMsg("42", "2", "second"), out)
	clk.Advance(31 * time.Minute)
	<-h.handle(privateMsg("42", "3", "third"), out)
	reqs := h.llm.Requests()
	if n := len(reqs[1].Messages); n != 4 {
		t.Errorf("after 29 quiet minutes the model got %d messages, want the earlier round too (4)", n)
	}
	if n := len(reqs[2].Messages); n != 2 {
		t.Errorf("after 31 quiet minutes the model got %d messages, want a fresh conversation (2)", n)
	}
}

func TestContextTooLongCompactsAndRetriesOnce(t *testing.T) {
	var rec *endsStore
	h := newHarnessStore(t, Options{}, func(st Store) Store { rec = &endsStore{Turns: st.Turns}; st.Turns = rec; return st })
	refused := false
	h.llm.SetHandler(func(req llm.Request) llm.Reply {
		if strings.HasPrefix(req.Messages[0].Content, "You write the memory") {
			return llm.Text("Earlier: greetings.")
		}
		if len(req.Messages) > 4 && !refused {
			refused = true
			return llm.Fault(400, "This model's maximum context length is 4096 tokens (context_length_exceeded)")
		}
		return llm.Text("fine")
	})
	out := &recResponder{stream: true}
	for i, text := range []string{"one", "two", "three"} {
		<-h.handle(privateMsg("42", string(rune('1'+i)), text), out)
	}
	if got, _ := out.Reply(2).Final(); got != "fine" {
		t.Fatalf("the user saw %q, want the answer after the retry", got)
	}
	if got := lastNotice(out); got != history.CompactedNotice {
		t.Errorf("notice %q, want %q", got, history.CompactedNotice)
	}
	reqs := h.llm.Requests()
	retry := reqs[len(reqs)-1]
	if len(retry.Messages) != 2 || !strings.Contains(retry.Messages[0].Content, "Earlier: greetings.") {
		t.Errorf("the retry sent %d messages with system %q; want the summary and the new message", len(retry.Messages), retry.Messages[0].Content)
	}
	last := rec.ends[len(rec.ends)-1]
	saved := savedCalls(t, h, last.TurnID)
	var calls []string
	for _, c := range saved {
		calls = append(calls, string(c.Status))
	}
	if last.Status != store.TurnOK || strings.Join(calls, ",") != "error,ok,ok" || saved[1].Round != 0 {
		t.Errorf("turn saved %s with calls %v (%+v), want ok with the refused call, the summary (round 0) and the answer", last.Status, calls, saved)
	}
}

// TestNewRefusesAStoreMissingAQueryType: every part of the database a turn uses is required, and
// the error names the one missing, so no turn finds out halfway.
func TestNewRefusesAStoreMissingAQueryType(t *testing.T) {
	st := storeOf(storetest.Open(t, storetest.SQLite))
	for _, tc := range []struct {
		field string
		drop  func(*Store)
	}{
		{"Conversations", func(s *Store) { s.Conversations = nil }},
		{"Turns", func(s *Store) { s.Turns = nil }},
		{"Messages", func(s *Store) { s.Messages = nil }},
		{"ModelCalls", func(s *Store) { s.ModelCalls = nil }},
		{"ToolCalls", func(s *Store) { s.ToolCalls = nil }},
	} {
		s := st
		tc.drop(&s)
		if _, err := New(stoppedRunner{}, s, nil, Options{}); err == nil || !strings.Contains(err.Error(), "Store."+tc.field) {
			t.Errorf("without %s: err = %v, want it named", tc.field, err)
		}
	}
}
