package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"relaybot/chat"
)

// TestATurnStartedWithItsFirstCallIsSavedInOneCommit: a turn whose start rides in its first
// model call's reservation has its row, the user's message and the call's reservation written
// by one commit, and is finished like any other turn.
func TestATurnStartedWithItsFirstCallIsSavedInOneCommit(t *testing.T) {
	forEachDriver(t, func(t *testing.T, driver string) {
		ctx := context.Background()
		s := newStore(t, driver)
		conv, err := s.Conversations.Conversation(ctx, chat.Key{Platform: "telegram", ChatID: "one-commit"})
		if err != nil {
			t.Fatal(err)
		}
		id, err := s.Turns.NewTurnID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n := count(t, s, "turns", "id = ?", id); n != 0 {
			t.Fatalf("a turn id taken wrote the turn already (%d rows)", n)
		}
		commits := s.turns.commits.Load()
		call, err := s.ModelCalls.StartLLMCall(ctx, LLMCallStart{TurnID: id, Platform: "telegram", ChatID: "one-commit", UserID: "7",
			Call: chat.ModelCall{Model: "m", TokensIn: 10, TokensOut: 100, StartedAt: time.Now()},
			Turn: &TurnStart{ID: id, ConversationID: conv.ID, UserID: "7", InboundMessageID: "41",
				UserMessage: chat.Message{Content: "what time is it?"}}})
		if err != nil {
			t.Fatal(err)
		}
		if got := s.turns.commits.Load() - commits; got != 1 {
			t.Errorf("the turn's start and its first call took %d commits, want 1", got)
		}
		turn, found, err := s.Turns.TurnByInbound(ctx, chat.Ref{Platform: "telegram", ChatID: "one-commit"}, "41")
		if err != nil || !found || turn.ID != id || turn.Status != TurnRunning {
			t.Fatalf("TurnByInbound = %+v, %v, %v; want running turn %d", turn, found, err, id)
		}
		if n := count(t, s, "messages", "turn_id = ? AND role = ? AND content = ?", id, RoleUser, "what time is it?"); n != 1 {
			t.Fatalf("the user's message saved %d times with the turn, want once", n)
		}
		if n := count(t, s, "llm_calls", "id = ? AND turn_id = ? AND status = ?", call, id, LLMCallRunning); n != 1 {
			t.Fatalf("the call's reservation saved %d times, want once", n)
		}
		err = s.Turns.FinishTurn(ctx, TurnEnd{TurnID: id, Status: TurnOK, Model: "m",
			Messages: []chat.Message{{Role: RoleAssistant, Content: "noon"}},
			Settle:   []LLMCallSettle{{ID: call, Call: chat.ModelCall{Model: "m", Status: "ok", TokensIn: 10, TokensOut: 2}}}})
		if err != nil {
			t.Fatal(err)
		}
		h, err := s.Messages.History(ctx, conv.ID, 10)
		if err != nil || len(h) != 2 || h[0].Content != "what time is it?" || h[1].Content != "noon" {
			t.Fatalf("history = %+v, %v; want the question and its answer", h, err)
		}
	})
}

// TestAFirstCallOverQuotaStillSavesItsTurnAndTheUsersMessage: a refusal of the call that
// carries its turn's start writes the turn and what the user said, as a refusal after a turn
// started alone did, and no reservation.
func TestAFirstCallOverQuotaStillSavesItsTurnAndTheUsersMessage(t *testing.T) {
	forEachDriver(t, func(t *testing.T, driver string) {
		ctx := context.Background()
		s := newStore(t, driver)
		conv, err := s.Conversations.Conversation(ctx, chat.Key{Platform: "telegram", ChatID: "over"})
		if err != nil {
			t.Fatal(err)
		}
		day := time.Now().UTC().Truncate(24 * time.Hour)
		check := QuotaCheck{Filter: UsageFilter{Platform: "telegram", UserID: "7", Since: day}, Tokens: 100}
		if _, err := s.ModelCalls.StartLLMCall(ctx, LLMCallStart{Platform: "telegram", ChatID: "over", UserID: "7",
			Checks: []QuotaCheck{check}, Call: chat.ModelCall{Model: "m", TokensIn: 60, TokensOut: 60, StartedAt: time.Now()}}); err != nil {
			t.Fatal(err)
		}
		id, err := s.Turns.NewTurnID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.ModelCalls.StartLLMCall(ctx, LLMCallStart{TurnID: id, Platform: "telegram", ChatID: "over", UserID: "7",
			Checks: []QuotaCheck{check}, Call: chat.ModelCall{Model: "m", TokensIn: 10, TokensOut: 10, StartedAt: time.Now()},
			Turn: &TurnStart{ID: id, ConversationID: conv.ID, UserID: "7", UserMessage: chat.Message{Content: "one more"}}})
		if over, ok := errors.AsType[*OverQuotaError](err); !ok || over.Check != 0 {
			t.Fatalf("StartLLMCall over quota = %v, want an *OverQuotaError of check 0", err)
		}
		if n := count(t, s, "turns", "id = ? AND status = ?", id, TurnRunning); n != 1 {
			t.Fatalf("the refused call's turn saved %d times, want once", n)
		}
		if n := count(t, s, "messages", "turn_id = ? AND content = ?", id, "one more"); n != 1 {
			t.Fatalf("the user's message of a refused call saved %d times, want once", n)
		}
		if n := count(t, s, "llm_calls", "turn_id = ?", id); n != 0 {
			t.Fatalf("a refused call reserved %d rows", n)
		}
		if err := s.Turns.FinishTurn(ctx, TurnEnd{TurnID: id, Status: TurnError, Error: "over quota"}); err != nil {
			t.Fatal(err)
		}
	})
}

// TestTurnIDsTakenAheadNeverMeetTheDatabasesOwn: ids handed out before their rows exist are
// never given to a turn the database numbers itself, nor again by a store opened later on the
// same database, and each is newer than the turns before it.
func TestTurnIDsTakenAheadNeverMeetTheDatabasesOwn(t *testing.T) {
	forEachDriver(t, func(t *testing.T, driver string) {
		ctx := context.Background()
		opts := testOptions(t, driver)
		s := openTest(t, opts)
		conv, err := s.Conversations.Conversation(ctx, chat.Key{Platform: "telegram", ChatID: "ids"})
		if err != nil {
			t.Fatal(err)
		}
		plain := func(s *Database) int64 {
			id, err := s.Turns.StartTurn(ctx, TurnStart{ConversationID: conv.ID, UserMessage: chat.Message{Content: "q"}})
			if err != nil {
				t.Fatal(err)
			}
			return id
		}
		ahead := func(s *Database) int64 {
			id, err := s.Turns.NewTurnID(ctx)
			if err != nil {
				t.Fatal(err)
			}
			return id
		}
		before := plain(s)
		a := ahead(s)
		b := ahead(s)
		own := plain(s)
		later := openTest(t, opts)
		c := ahead(later)
		if !(before < a && a < b) || own == a || own == b || c <= b || c == own {
			t.Fatalf("turn ids: before %d, taken ahead %d and %d, the database's own %d, a later store's %d: want them apart and growing", before, a, b, own, c)
		}
		for _, id := range []int64{b, a, c} { // in any order: each id is the turn's own
			if _, err := s.Turns.StartTurn(ctx, TurnStart{ID: id, ConversationID: conv.ID, UserMessage: chat.Message{Content: "q"}}); err != nil {
				t.Fatalf("the turn of id %d taken ahead not written: %v", id, err)
			}
		}
		if n := count(t, s, "turns", "conversation_id = ?", conv.ID); n != 5 {
			t.Fatalf("%d turns saved, want 5", n)
		}
	})
}

// TestATurnStartWrittenTwiceUnderItsIDIsSavedOnce: the start of a turn given its id ahead,
// written again after a write whose answer was lost had saved it, is taken as done, and the
// turn and the user's message are there once; another turn's start under that id is refused.
func TestATurnStartWrittenTwiceUnderItsIDIsSavedOnce(t *testing.T) {
	forEachDriver(t, func(t *testing.T, driver string) {
		ctx := context.Background()
		s := newStore(t, driver)
		conv, err := s.Conversations.Conversation(ctx, chat.Key{Platform: "telegram", ChatID: "twice"})
		if err != nil {
			t.Fatal(err)
		}
		id, err := s.Turns.NewTurnID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		start := TurnStart{ID: id, ConversationID: conv.ID, UserID: "7", InboundMessageID: "5", UserMessage: chat.Message{Content: "hi"}}
		for try := range 2 {
			if got, err := s.Turns.StartTurn(ctx, start); err != nil || got != id {
				t.Fatalf("start %d of turn %d = %d, %v", try+1, id, got, err)
			}
		}
		if n := count(t, s, "messages", "turn_id = ?", id); n != 1 {
			t.Fatalf("the user's message saved %d times, want once", n)
		}
		other := start
		other.InboundMessageID = "6"
		if _, err := s.Turns.StartTurn(ctx, other); err == nil {
			t.Fatal("another message's turn took the id of a turn saved already")
		}
	})
}
