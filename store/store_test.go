package store

import (
	"context"
	"errors"
	"fmt"
	"relaybot/audit"
	"relaybot/chat"
	"sync"
	"testing"
	"time"
)

func TestMigrateFromEmpty(t *testing.T) {
	forEachDriver(t, func(t *testing.T, driver string) {
		ctx := context.Background()
		s, err := Open(ctx, testOptions(t, driver))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		cur, latest, err := s.SchemaVersion(ctx)
		if err != nil {
			t.Fatalf("SchemaVersion before Migrate: %v", err)
		}
		if cur != 0 || latest < 1 {
			t.Fatalf("empty database: version %d of %d, want 0 of >= 1", cur, latest)
		}
		if err := s.Migrate(ctx); err != nil {
			t.Fatalf("Migrate: %v", err)
		}
		if err := s.Migrate(ctx); err != nil {
			t.Fatalf("second Migrate: %v", err)
		}
		cur, latest, err = s.SchemaVersion(ctx)
		if err != nil || cur != latest {
			t.Fatalf("after Migrate: version %d of %d (%v), want the latest", cur, latest, err)
		}
		for _, table := range []string{"conversations", "turns", "messages", "tool_calls", "llm_calls"} {
			if n := count(t, s, table, ""); n != 0 {
				t.Errorf("%s has %d rows after migrating, want 0", table, n)
			}
		}
		// Every migration is reversible: down to empty and up again.
		p, err := s.provider()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.DownTo(ctx, 0); err != nil {
			t.Fatalf("down to 0: %v", err)
		}
		if cur, _, _ := s.SchemaVersion(ctx); cur != 0 {
			t.Fatalf("after down: version %d, want 0", cur)
		}
		if err := s.Migrate(ctx); err != nil {
			t.Fatalf("Migrate after down: %v", err)
		}
		// The schema works end to end.
		c, err := s.Conversations.Conversation(ctx, chat.Key{Platform: "telegram", ChatID: "1"})
		if err != nil {
			t.Fatal(err)
		}
		id, err := s.Turns.StartTurn(ctx, TurnStart{ConversationID: c.ID, UserMessage: chat.Message{Content: "hi"}})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Turns.FinishTurn(ctx, TurnEnd{TurnID: id, Status: TurnOK, Model: "m",
			Messages: []chat.Message{{Role: RoleAssistant, Content: "hello"}},
			LLMCalls: []chat.ModelCall{{Model: "m", Status: "ok", Duration: time.Second}}}); err != nil {
			t.Fatal(err)
		}
		if n := count(t, s, "llm_calls", "turn_id = ?", id); n != 1 {
			t.Errorf("llm_calls rows = %d, want 1", n)
		}
	})
}

func TestOpenRejects(t *testing.T) {
	ctx := context.Background()
	for _, o := range []Options{
		{Driver: "mysql", DSN: "x"},
		{Driver: DriverSQLite, DSN: ""},
		{Driver: DriverSQLite, DSN: ":memory:"},
	} {
		if s, err := Open(ctx, o); err == nil {
			s.Close()
			t.Errorf("Open(%+v) succeeded, want an error", o)
		}
	}
}

func TestConversationReset(t *testing.T) {
	forEachDriver(t, func(t *testing.T, driver string) {
		ctx := context.Background()
		s := newStore(t, driver)
		key := chat.Key{Platform: "discord", ChatID: "c1", ThreadID: "t", UserID: "u"}
		a, err := s.Conversations.Conversation(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		again, err := s.Conversations.Conversation(ctx, key)
		if err != nil || again.ID != a.ID {
			t.Fatalf("second Conversation = %d (%v), want the same %d", again.ID, err, a.ID)
		}
		other, err := s.Conversations.Conversation(ctx, chat.Key{Platform: "discord", ChatID: "c1", ThreadID: "t", UserID: "v"})
		if err != nil || other.ID == a.ID {
			t.Fatalf("other user's conversation = %d (%v), want a new one", other.ID, err)
		}
		turn, err := s.Turns.StartTurn(ctx, TurnStart{ConversationID: a.ID, UserMessage: chat.Message{Content: "remember 42"}})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Turns.FinishTurn(ctx, TurnEnd{TurnID: turn, Status: TurnOK, Messages: []chat.Message{{Role: RoleAssistant, Content: "ok"}}}); err != nil {
			t.Fatal(err)
		}
		b, err := s.Conversations.ResetConversation(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if b.ID == a.ID || !b.Active {
			t.Fatalf("reset gave %+v, want a new active conversation", b)
		}
		cur, err := s.Conversations.Conversation(ctx, key)
		if err != nil || cur.ID != b.ID {
			t.Fatalf("after reset Conversation = %d (%v), want %d", cur.ID, err, b.ID)
		}
		h, err := s.Messages.History(ctx, b.ID, 10)
		if err != nil || len(h) != 0 {
			t.Fatalf("history after reset = %v (%v), want empty", h, err)
		}
		old, err := s.Messages.History(ctx, a.ID, 10)
		if err != nil || len(old) != 2 {
			t.Fatalf("old conversation history = %v (%v), want its 2 messages kept", old, err)
		}
		if n := count(t, s, "conversations", "active = ?", false); n != 1 {
			t.Errorf("inactive conversations = %d, want 1", n)
		}
		if _, err := s.Conversations.Conversation(ctx, chat.Key{Platform: "discord"}); err == nil {
			t.Error("Conversation without a chat id succeeded")
		}
	})
}

func TestFinishTurnTwiceFails(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, DriverSQLite)
	c, _ := s.Conversations.Conversation(ctx, chat.Key{Platform: "telegram", ChatID: "1"})
	id, err := s.Turns.StartTurn(ctx, TurnStart{ConversationID: c.ID, UserMessage: chat.Message{Content: "x"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Turns.FinishTurn(ctx, TurnEnd{TurnID: id, Status: "weird"}); err == nil {
		t.Error("FinishTurn with a bad status succeeded")
	}
	if err := s.Turns.FinishTurn(ctx, TurnEnd{TurnID: id, Status: TurnOK}); err != nil {
		t.Fatal(err)
	}
	if err := s.Turns.FinishTurn(ctx, TurnEnd{TurnID: id, Status: TurnOK, Messages: []chat.Message{{Role: RoleAssistant, Content: "dup"}}}); !errContains(err, "already ok") {
		t.Errorf("second FinishTurn = %v, want an 'already ok' error", err)
	}
	if n := count(t, s, "messages", "turn_id = ?", id); n != 1 {
		t.Errorf("messages = %d, want only the user's", n)
	}
}

// TestConcurrentTurns runs 100 turns at once, each with tool calls, and checks nothing is lost and
// nobody saw "database is locked".
func TestConcurrentTurns(t *testing.T) {
	forEachDriver(t, func(t *testing.T, driver string) {
		ctx := context.Background()
		s := newStore(t, driver)
		const turns, callsPerTurn = 100, 3
		var wg sync.WaitGroup
		errs := make(chan error, turns)
		for i := range turns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- oneTurn(ctx, s, i, callsPerTurn)
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Error(err)
			}
		}
		if n := count(t, s, "turns", "status = ?", TurnOK); n != turns {
			t.Errorf("ok turns = %d, want %d", n, turns)
		}
		// user + per call (assistant + tool) + final answer
		if n, want := count(t, s, "messages", ""), turns*(2+2*callsPerTurn); n != want {
			t.Errorf("messages = %d, want %d", n, want)
		}
		if n := count(t, s, "tool_calls", "status = ?", audit.StatusOK); n != turns*callsPerTurn {
			t.Errorf("ok tool calls = %d, want %d", n, turns*callsPerTurn)
		}
		if n := count(t, s, "llm_calls", ""); n != turns*(callsPerTurn+1) {
			t.Errorf("llm calls = %d, want %d", n, turns*(callsPerTurn+1))
		}
	})
}

// oneTurn plays a turn the way the pipeline does: conversation, history, start, tool calls with
// their audit rows, finish.
func oneTurn(ctx context.Context, s *Database, i, calls int) error {
	key := chat.Key{Platform: "telegram", ChatID: fmt.Sprint("chat-", i%20), UserID: fmt.Sprint("u", i)}
	c, err := s.Conversations.Conversation(ctx, key)
	if err != nil {
		return err
	}
	if _, err := s.Messages.History(ctx, c.ID, 10); err != nil {
		return err
	}
	turn, err := s.Turns.StartTurn(ctx, TurnStart{ConversationID: c.ID, UserID: key.UserID,
		UserMessage: chat.Message{Content: fmt.Sprint("question ", i)}})
	if err != nil {
		return err
	}
	var msgs []chat.Message
	var llm []chat.ModelCall
	for r := range calls {
		callID := fmt.Sprintf("call_%d_%d", i, r)
		rec := &audit.Record{TurnID: turn, ConversationID: c.ID, Platform: string(key.Platform),
			ChatID: key.ChatID, UserID: key.UserID, Round: r + 1, ToolCallID: callID,
			ToolName: "web_search", Source: "native", Arguments: `{"q":"x"}`, ArgumentsSize: 9}
		if err := s.ToolCalls.StartToolCall(ctx, rec); err != nil {
			return err
		}
		// Rows started together share one INSERT: each caller must get its own row's id.
		if row, err := s.ToolCalls.ToolCall(ctx, rec.ID); err != nil || row.ToolCallID != callID {
			return fmt.Errorf("row %d of %s is %q (%v): the audit row ids are mixed up", rec.ID, callID, row.ToolCallID, err)
		}
		rec.Status, rec.Result, rec.ResultSize = audit.StatusOK, "found", 5
		if err := s.ToolCalls.FinishToolCall(ctx, rec); err != nil {
			return err
		}
		msgs = append(msgs,
			chat.Message{Role: RoleAssistant, ToolCalls: []chat.ToolCall{{ID: callID, Name: "web_search", Arguments: `{"q":"x"}`}}},
			chat.Message{Role: RoleTool, ToolCallID: callID, Name: "web_search", Content: "found"})
		llm = append(llm, chat.ModelCall{Round: r + 1, Model: "m", Status: "ok"})
	}
	msgs = append(msgs, chat.Message{Role: RoleAssistant, Content: fmt.Sprint("answer ", i)})
	llm = append(llm, chat.ModelCall{Round: calls + 1, Model: "m", Status: "ok"})
	return s.Turns.FinishTurn(ctx, TurnEnd{TurnID: turn, Status: TurnOK, Model: "m", Rounds: calls + 1,
		Messages: msgs, LLMCalls: llm})
}

func TestRecoverMarksRunningInterrupted(t *testing.T) {
	forEachDriver(t, func(t *testing.T, driver string) {
		ctx := context.Background()
		opts := testOptions(t, driver)
		s := openTest(t, opts)
		c, err := s.Conversations.Conversation(ctx, chat.Key{Platform: "telegram", ChatID: "1"})
		if err != nil {
			t.Fatal(err)
		}
		turn, err := s.Turns.StartTurn(ctx, TurnStart{ConversationID: c.ID, UserMessage: chat.Message{Content: "what is 2+2?"}})
		if err != nil {
			t.Fatal(err)
		}
		rec := &audit.Record{TurnID: turn, ToolName: "calc", ToolCallID: "call_1", Source: "native"}
		if err := s.ToolCalls.StartToolCall(ctx, rec); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}

		s2 := openTest(t, opts)
		turns, calls, err := s2.Turns.Recover(ctx)
		if err != nil || turns != 1 || calls != 1 {
			t.Fatalf("Recover = %d turns, %d calls, %v; want 1, 1", turns, calls, err)
		}
		tr, err := s2.Turns.Turn(ctx, turn)
		if err != nil || tr.Status != TurnInterrupted || tr.FinishedAt.IsZero() {
			t.Fatalf("turn after recover = %+v (%v), want interrupted with a finish time", tr, err)
		}
		row, err := s2.ToolCalls.ToolCall(ctx, rec.ID)
		if err != nil || row.Status != audit.StatusInterrupted || row.FinishedAt.IsZero() || row.Error == "" {
			t.Fatalf("tool call after recover = %+v (%v), want interrupted with an error", row, err)
		}
		// What the user said survives the crash and is in the next turn's history.
		h, err := s2.Messages.History(ctx, c.ID, 10)
		if err != nil || len(h) != 1 || h[0].Content != "what is 2+2?" {
			t.Fatalf("history = %+v (%v), want the user's message", h, err)
		}
		if turns, calls, _ := s2.Turns.Recover(ctx); turns != 0 || calls != 0 {
			t.Errorf("second Recover = %d, %d; want nothing left", turns, calls)
		}
	})
}

// TestCloseDuringBurst closes the store while many goroutines record tool calls: every call that
// was acknowledged is in the database, and later calls are refused with ErrClosed.
func TestCloseDuringBurst(t *testing.T) {
	forEachDriver(t, func(t *testing.T, driver string) {
		ctx := context.Background()
		opts := testOptions(t, driver)
		s := openTest(t, opts)
		const workers = 50
		var (
			mu       sync.Mutex
			started  = map[int64]bool{} // id -> finish acknowledged
			wg       sync.WaitGroup
			halfway  = make(chan struct{})
			once     sync.Once
			total    int
			unexpect []error
		)
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					rec := &audit.Record{ToolName: "t", ToolCallID: fmt.Sprint(w, "-", i), Source: "mcp", Server: "s"}
					if err := s.ToolCalls.StartToolCall(ctx, rec); err != nil {
						if !errors.Is(err, ErrClosed) {
							mu.Lock()
							unexpect = append(unexpect, err)
							mu.Unlock()
						}
						return
					}
					mu.Lock()
					started[rec.ID] = false
					total++
					if total == 500 {
						once.Do(func() { close(halfway) })
					}
					mu.Unlock()
					rec.Status = audit.StatusOK
					if err := s.ToolCalls.FinishToolCall(ctx, rec); err != nil {
						if !errors.Is(err, ErrClosed) {
							mu.Lock()
							unexpect = append(unexpect, err)
							mu.Unlock()
						}
						return
					}
					mu.Lock()
					started[rec.ID] = true
					mu.Unlock()
				}
			}()
		}
		allDone := make(chan struct{})
		go func() { wg.Wait(); close(allDone) }()
		select {
		case <-halfway:
		case <-allDone:
			t.Fatalf("every writer stopped before 500 calls: %v", unexpect)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		for _, err := range unexpect {
			t.Error(err)
		}
		s2 := openTest(t, opts)
		for id, finished := range started {
			row, err := s2.ToolCalls.ToolCall(ctx, id)
			if err != nil {
				t.Fatalf("acknowledged row %d is missing: %v", id, err)
			}
			if finished && row.Status != audit.StatusOK {
				t.Errorf("row %d: status %s, want ok (finish was acknowledged)", id, row.Status)
			}
		}
		if n := count(t, s2, "tool_calls", ""); n != len(started) {
			t.Errorf("rows = %d, acknowledged starts = %d", n, len(started))
		}
		t.Logf("%d calls acknowledged before close", len(started))
	})
}
