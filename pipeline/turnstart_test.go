package pipeline

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"relaybot/agent"
	"relaybot/chat"
	"relaybot/internal/testkit/llm"
	"relaybot/pipeline/history"
	"relaybot/pipeline/quota"
	"relaybot/policy"
	"relaybot/store"
	"relaybot/store/storetest"
)

// soloStarts counts the turns started on their own (StartTurn) rather than with their first
// model call's reservation.
type soloStarts struct {
	Turns
	n atomic.Int32
}

func (s *soloStarts) StartTurn(ctx context.Context, t store.TurnStart) (int64, error) {
	s.n.Add(1)
	return s.Turns.StartTurn(ctx, t)
}

// TestTheModelIsAskedOnlyOnceTheUsersMessageIsSavedWithItsReservation: a turn's start rides in
// its first model call's reservation, and when the model gets the request the turn, what the
// user said and the call's reservation are already in the database.
func TestTheModelIsAskedOnlyOnceTheUsersMessageIsSavedWithItsReservation(t *testing.T) {
	var solo *soloStarts
	h := newHarnessStore(t, Options{}, func(st Store) Store {
		solo = &soloStarts{Turns: st.Turns}
		st.Turns = solo
		return st
	})
	type seen struct {
		found    bool
		status   string
		messages []chat.Message
		calls    int64
		err      error
	}
	seenAt := make(chan seen, 1)
	h.llm.SetHandler(func(llm.Request) llm.Reply {
		ctx := context.Background()
		var s seen
		turn, found, err := h.store.Turns.TurnByInbound(ctx, chat.Ref{Platform: "telegram", ChatID: "7"}, "1")
		s.found, s.status, s.err = found, string(turn.Status), err
		if found && err == nil {
			s.messages, s.err = h.store.Messages.TurnMessages(ctx, turn.ID)
		}
		if s.err == nil {
			var rows []store.UsageRow
			rows, s.err = h.store.Usage.Usage(ctx, store.UsageFilter{Platform: "telegram", UserID: "7"})
			for _, r := range rows {
				s.calls += r.Calls
			}
		}
		seenAt <- s
		return llm.Text("the answer")
	})
	out := &recResponder{stream: true}
	<-h.handle(privateMsg("7", "1", "what time is it?"), out)
	if final, _ := out.Reply(0).Final(); final != "the answer" {
		t.Fatalf("the user got %q, want the answer", final)
	}
	s := <-seenAt
	if s.err != nil || !s.found || s.status != string(store.TurnRunning) {
		t.Fatalf("when the model was asked the turn was found %v, %q, %v; want it saved and running", s.found, s.status, s.err)
	}
	if len(s.messages) != 1 || s.messages[0].Content != "what time is it?" {
		t.Fatalf("when the model was asked the turn held %+v, want the user's message", s.messages)
	}
	if s.calls != 1 {
		t.Fatalf("when the model was asked %d calls were reserved, want its own", s.calls)
	}
	if n := solo.n.Load(); n != 0 {
		t.Fatalf("%d turns started in a write of their own, want the start with the call's reservation", n)
	}
	if msgs := h.history(history.KeyOf(privateMsg("7", "1", ""), false)); len(msgs) != 2 {
		t.Fatalf("history = %+v, want the question and the answer", msgs)
	}
}

// noUsage reports no usage, as a quota check that ran before a concurrent turn's reservation
// landed saw it.
type noUsage struct{}

func (noUsage) Usage(context.Context, store.UsageFilter) ([]store.UsageRow, error) { return nil, nil }

// TestAFirstCallRefusedByTheLedgerStillSavesTheTurnAndWhatTheUserSaid: the check before the turn
// let it through, the ledger's check of its first call refused it; the user is told, the model
// is not asked, and the turn and the user's message are saved as when the turn started alone.
func TestAFirstCallRefusedByTheLedgerStillSavesTheTurnAndWhatTheUserSaid(t *testing.T) {
	now := time.Now().UTC()
	h := newHarness(t, Options{Quotas: quota.Policy{User: policy.Limits{TokensPerDay: 1000}}, Now: func() time.Time { return now }, Usage: noUsage{}})
	ctx := context.Background()
	if _, err := h.store.ModelCalls.StartLLMCall(ctx, store.LLMCallStart{Platform: "telegram", ChatID: "7", UserID: "7",
		Call: chat.ModelCall{Model: "test-model", TokensIn: 900, TokensOut: 200, StartedAt: now}}); err != nil {
		t.Fatal(err)
	}
	out := &recResponder{stream: true}
	<-h.handle(privateMsg("7", "1", "one more"), out)
	if n := h.llm.RequestCount(); n != 0 {
		t.Fatalf("the model got %d requests over the quota, want none", n)
	}
	final, _ := out.Reply(0).Final()
	if !strings.Contains(final+strings.Join(out.Notices(), " "), "quota") {
		t.Fatalf("the user saw %q and notices %q, want the quota's refusal", final, out.Notices())
	}
	turn, found, err := h.store.Turns.TurnByInbound(ctx, chat.Ref{Platform: "telegram", ChatID: "7"}, "1")
	if err != nil || !found || turn.Status != store.TurnError {
		t.Fatalf("the refused turn: %+v, %v, %v; want it saved as an error", turn, found, err)
	}
	msgs, err := h.store.Messages.TurnMessages(ctx, turn.ID)
	if err != nil || len(msgs) == 0 || msgs[0].Content != "one more" {
		t.Fatalf("the refused turn's messages: %+v, %v; want the user's message", msgs, err)
	}
}

// stoppedRunner ends every turn as stopped before its first model call, without asking the
// Meter: the turn's start then has no reservation to ride in.
type stoppedRunner struct{}

func (stoppedRunner) Run(context.Context, agent.Request, func(agent.Event)) *agent.Result {
	return &agent.Result{Status: chat.StatusCancelled, Err: context.Canceled}
}

// TestATurnStoppedBeforeItsFirstModelCallStillSavesWhatTheUserSaid: with no model call to
// carry it, the turn's start is written on its own, and the turn's end after it.
func TestATurnStoppedBeforeItsFirstModelCallStillSavesWhatTheUserSaid(t *testing.T) {
	ctx := context.Background()
	st := storetest.Open(t, storetest.SQLite)
	p := newPipeline(t, stoppedRunner{}, storeOf(st), nil, Options{})
	p.Handle(ctx, privateMsg("7", "1", "hello"), &recResponder{stream: true})
	turn, found, err := st.Turns.TurnByInbound(ctx, chat.Ref{Platform: "telegram", ChatID: "7"}, "1")
	if err != nil || !found || turn.Status != store.TurnCancelled {
		t.Fatalf("the stopped turn: %+v, %v, %v; want it saved as cancelled", turn, found, err)
	}
	msgs, err := st.Messages.TurnMessages(ctx, turn.ID)
	if err != nil || len(msgs) != 1 || msgs[0].Content != "hello" {
		t.Fatalf("the stopped turn's messages: %+v, %v; want the user's message", msgs, err)
	}
}
