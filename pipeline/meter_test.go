package pipeline

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"relaybot/adapters"
	"relaybot/internal/testkit/llm"
	"relaybot/internal/testkit/wait"
	"relaybot/pipeline/history"
	"relaybot/pipeline/quota"
	"relaybot/policy"
	"relaybot/store"
	"relaybot/store/storetest"
	"relaybot/tools"
)

// usageOf sums what the store counts against a user today.
func usageOf(t *testing.T, u quota.UsageLog, user string) store.UsageTotal {
	t.Helper()
	rows, err := u.Usage(context.Background(), store.UsageFilter{Platform: "telegram", UserID: user, Since: time.Now().UTC().Truncate(24 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if t := store.RollUp(rows, store.ByAll, nil); len(t) > 0 {
		return t[0]
	}
	return store.UsageTotal{}
}

// stopAfterFirstWords sends a message whose answer holds after its first chunk, waits for the
// first words to show, and stops it with /stop, as a user would.
func stopAfterFirstWords(t *testing.T, h *harness, in adapters.Inbound) *recResponder {
	t.Helper()
	hold := make(chan struct{})
	defer close(hold)
	h.llm.Push(llm.Reply{Chunks: []llm.Chunk{{Content: "Once upon a time"}, {Content: " there was", Wait: hold}}})
	out := &recResponder{stream: true}
	done := h.handle(in, out)
	wait.For(t, "the first words of "+in.MessageID, func() bool { r := out.Reply(0); return r != nil && r.Latest() == "Once upon a time" })
	<-h.handle(adapters.Inbound{Chat: in.Chat, Kind: in.Kind, UserID: in.UserID, Command: "stop"}, &recResponder{})
	<-done
	return out
}

// An answer stopped mid-stream (the provider never sends its usage) is counted at the prompt's
// estimate plus the words generated, marked estimated, and /usage says so.
func TestStoppedAnswerCountsWhatItCost(t *testing.T) {
	h := newHarness(t, Options{})
	out := stopAfterFirstWords(t, h, privateMsg("7", "1", "tell me a long story about "+strings.Repeat("dragons ", 40)))
	if final, _ := out.Reply(0).Final(); !strings.HasPrefix(final, "Once upon a time") {
		t.Fatalf("final = %q, want the partial answer", final)
	}
	u := usageOf(t, h.store.Usage, "7")
	if u.Calls != 1 || u.Estimated != 1 || u.TokensIn < 80 || u.TokensOut < 4 {
		t.Fatalf("usage of the stopped answer = %+v, want 1 estimated call with the prompt (80+ tokens) and the words so far", u)
	}
	usage := &recResponder{}
	<-h.handle(privateMsg("7", "2", "/usage"), usage)
	if n := usage.Notices(); len(n) != 1 || !strings.Contains(n[0], "Today: ≈") || !strings.Contains(n[0], "(1 estimated)") ||
		!strings.Contains(n[0], quota.EstimatedNote) {
		t.Fatalf("/usage = %q, want the estimated tokens marked ≈ with the note", n)
	}
}

// A call whose stream breaks (no finish, no usage) is counted at its estimate too.
func TestCutStreamCountsWhatItCost(t *testing.T) {
	h := newHarness(t, Options{})
	h.llm.Push(llm.Reply{Chunks: []llm.Chunk{{Content: "The answer"}, {Content: " is"}}, Cut: true})
	out := &recResponder{stream: true}
	<-h.handle(privateMsg("7", "1", "what is "+strings.Repeat("the question ", 30)), out)
	if n := out.Notices(); len(n) != 0 {
		t.Fatalf("notices = %q", n)
	}
	u := usageOf(t, h.store.Usage, "7")
	if u.Calls != 1 || u.Estimated != 1 || u.TokensIn < 80 || u.TokensOut < 2 {
		t.Fatalf("usage of the cut call = %+v, want 1 estimated call with the prompt (80+ tokens) and the words so far", u)
	}
}

// /compact's model call is counted against the user who asked and held to their quota.
func TestCompactIsCountedAndQuotaChecked(t *testing.T) {
	h := newHarness(t, Options{Quotas: quota.Policy{User: policy.Limits{TokensPerDay: 600}}})
	h.llm.Push(usedTokens(100, 10, "first answer"), usedTokens(500, 50, "the summary"))
	<-h.handle(privateMsg("7", "1", "hello"), &recResponder{stream: true})
	out := &recResponder{}
	<-h.handle(privateMsg("7", "2", "/compact"), out)
	if n := out.Notices(); len(n) != 1 || !strings.HasPrefix(n[0], "Summarised 1 earlier rounds") {
		t.Fatalf("/compact = %q", n)
	}
	if u := usageOf(t, h.store.Usage, "7"); u.Calls != 2 || u.TokensIn != 600 || u.TokensOut != 60 {
		t.Fatalf("usage = %+v, want the answer's and the summary's calls (600 in, 60 out)", u)
	}
	before := h.llm.RequestCount()
	out = &recResponder{}
	<-h.handle(privateMsg("7", "3", "/compact"), out)
	if n := out.Notices(); len(n) != 1 || !strings.Contains(n[0], "You have used up today's quota (660 of 600 tokens).") {
		t.Fatalf("/compact over quota = %q, want the quota refusal", n)
	}
	if got := h.llm.RequestCount(); got != before {
		t.Fatalf("/compact over quota made %d model requests", got-before)
	}
}

// quotaMsgs are n messages of one user in n chats of their own.
func quotaMsgs(user string, n int) []adapters.Inbound {
	var ins []adapters.Inbound
	for i := range n {
		in := privateMsg(user, strconv.Itoa(i+1), "hello from chat "+strconv.Itoa(i))
		in.Chat.ChatID = "chat-" + strconv.Itoa(i)
		ins = append(ins, in)
	}
	return ins
}

// heldToOne sends ins at once to the pipelines (round robin) while the model holds its first
// answer, and checks that one turn reached the model and the others were told the quota is
// used up.
func heldToOne(t *testing.T, srv *llm.Server, ps []*harness, ins []adapters.Inbound) {
	t.Helper()
	hold := make(chan struct{})
	srv.Push(llm.Reply{Chunks: []llm.Chunk{{Content: "the one answer", Wait: hold}}})
	outs := make([]*recResponder, len(ins))
	var wg sync.WaitGroup
	refused := func() int {
		n := 0
		for _, o := range outs {
			texts := o.Notices()
			if r := o.Reply(0); r != nil {
				final, _ := r.Final()
				texts = append(texts, final)
			}
			for _, text := range texts {
				if strings.Contains(text, "You have used up today's quota (") && strings.Contains(text, "It resets") {
					n++
				}
			}
		}
		return n
	}
	var finished atomic.Int32
	for i, in := range ins {
		outs[i] = &recResponder{stream: true}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-ps[i%len(ps)].handle(in, outs[i])
			finished.Add(1)
		}()
	}
	// The one answer is held; every other turn ends, refused or (over the quota) answered.
	wait.For(t, "all but one turn to end", func() bool { return int(finished.Load()) >= len(ins)-1 })
	close(hold)
	wg.Wait()
	if got := srv.RequestCount(); got != 1 {
		t.Fatalf("the model got %d requests from %d concurrent turns under a quota that fits one, want 1", got, len(ins))
	}
	if n := refused(); n != len(ins)-1 {
		t.Fatalf("%d turns were refused, want %d", n, len(ins)-1)
	}
}

// meterBudget makes one model call reserve more than the quota of the tests below.
var meterBudget = []history.ModelBudget{{Name: "primary", ContextWindow: 8192, MaxOutputTokens: 1000}}

// Four turns of one user in four chats at once, under a daily quota that one call's reservation
// (its prompt and max_output_tokens) fills: one reaches the model, the others are refused before
// any model request.
func TestConcurrentTurnsAreHeldToTheQuota(t *testing.T) {
	h := newHarness(t, Options{Quotas: quota.Policy{User: policy.Limits{TokensPerDay: 1000}}, Models: ModelOptions{Budgets: meterBudget}})
	heldToOne(t, h.llm, []*harness{h}, quotaMsgs("7", 4))
	if u := usageOf(t, h.store.Usage, "7"); u.Calls != 1 || u.Estimated != 0 {
		t.Fatalf("usage = %+v, want the one answered call, settled at its reported usage", u)
	}
}

// The same across two replicas: two pipelines, each with its own store, on one PostgreSQL
// database.
func TestConcurrentTurnsAreHeldToTheQuotaAcrossReplicas(t *testing.T) {
	dsn := storetest.PostgresDSN(t)
	srv := llm.NewServer()
	t.Cleanup(srv.Close)
	var hs []*harness
	for i := range 2 {
		st := storetest.OpenWith(t, store.Options{Driver: store.DriverPostgres, DSN: dsn, Instance: fmt.Sprintf("replica-%d", i)})
		h := newHarnessOn(t, srv, st, Options{Quotas: quota.Policy{User: policy.Limits{TokensPerDay: 1000}}, Models: ModelOptions{Budgets: meterBudget}}, tools.ManagerOptions{}, nil)
		hs = append(hs, h)
	}
	heldToOne(t, srv, hs, quotaMsgs("7", 4))
}

// The walk-through: a quota of 1,000 tokens, three answers stopped after their first
// words, and the fourth message is refused before any model request.
func TestStoppedAnswersUseUpTheQuota(t *testing.T) {
	h := newHarness(t, Options{Quotas: quota.Policy{User: policy.Limits{TokensPerDay: 1000}},
		Models: ModelOptions{Budgets: []history.ModelBudget{{Name: "primary", ContextWindow: 8192, MaxOutputTokens: 100}}}})
	question := "Write me a long essay about " + strings.Repeat("the history of the steam engine, ", 12)
	for i := range 3 {
		out := stopAfterFirstWords(t, h, privateMsg("7", strconv.Itoa(i+1), question))
		if final, _ := out.Reply(0).Final(); !strings.HasPrefix(final, "Once upon a time") {
			t.Fatalf("answer %d: final = %q, notices %q", i+1, final, out.Notices())
		}
		t.Logf("after answer %d: %+v", i+1, usageOf(t, h.store.Usage, "7"))
	}
	before := h.llm.RequestCount()
	out := &recResponder{stream: true}
	<-h.handle(privateMsg("7", "4", question), out)
	if got := h.llm.RequestCount(); got != before {
		t.Fatalf("the fourth message made %d model requests, want none", got-before)
	}
	if n := out.Notices(); len(n) != 1 || !strings.Contains(n[0], "You have used up today's quota (") || !strings.Contains(n[0], " of 1000 tokens). It resets") {
		t.Fatalf("fourth message: notices %q, want the quota refusal", n)
	}
}

// refusingStore refuses every turn's final write, as a database that went away would.
type refusingStore struct{ Turns }

func (refusingStore) FinishTurn(context.Context, store.TurnEnd) error {
	return fmt.Errorf("the database refused the write")
}

// A turn whose final write is refused still has its model calls counted: they were saved as
// they happened.
func TestRefusedFinalWriteKeepsTheModelCalls(t *testing.T) {
	h := newHarnessStore(t, Options{}, func(st Store) Store { st.Turns = refusingStore{st.Turns}; return st })
	h.llm.Push(usedTokens(700, 40, "an answer"))
	out := &recResponder{stream: true}
	<-h.handle(privateMsg("7", "1", "hello"), out)
	if final, _ := out.Reply(0).Final(); final != "an answer" {
		t.Fatalf("final = %q", final)
	}
	if u := usageOf(t, h.store.Usage, "7"); u.Calls != 1 || u.TokensIn != 700 || u.TokensOut != 40 {
		t.Fatalf("usage = %+v, want the answer's call at its reported 700 in, 40 out", u)
	}
}
