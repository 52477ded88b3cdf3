package store

import (
	"context"
	"relaybot/audit"
	"relaybot/chat"
	"testing"
)

// register puts a replica's lease row in the instances table, live or already expired.
func register(t *testing.T, s *Database, id string, live bool) {
	t.Helper()
	expires := "now() + interval '1 hour'"
	if !live {
		expires = "now() - interval '1 second'"
	}
	if _, err := s.wsql.Exec(`INSERT INTO instances (id, host, pid, started_at, heartbeat_at, expires_at)
		VALUES ($1, 'test', 1, now(), now(), `+expires+`)`, id); err != nil {
		t.Fatalf("register instance %s: %v", id, err)
	}
}

// TestASecondReplicaStartingUpLeavesTheFirstOnesTurnsRunning starts two stores on one PostgreSQL
// database, as two replicas would: the second one's start-up recovery must not end the turn the
// first is running (before, it marked it interrupted and the first replica's answer was lost with
// "turn is already interrupted"), nor that of a replica whose lease expired but which nobody took
// over yet (it may be paused, or coming back from an outage), and must end the turns of a replica
// whose row is gone (taken over, or left).
func TestASecondReplicaStartingUpLeavesTheFirstOnesTurnsRunning(t *testing.T) {
	ctx := context.Background()
	opts := testOptions(t, DriverPostgres)
	cases := []struct {
		name      string
		row       string // "live", "expired", or "" for none
		wantAfter chat.Status
	}{
		{"a live replica's turn keeps running and finishes", "live", TurnOK},
		{"an expired replica nobody took over keeps its turn", "expired", TurnOK},
		{"a gone replica's turn is reclaimed", "", TurnInterrupted},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			first := opts
			first.Instance = []string{"replica-a", "replica-d", "replica-c"}[i]
			a := openTest(t, first)
			if tc.row != "" {
				register(t, a, first.Instance, tc.row == "live")
			}
			live := tc.row != ""
			conv, err := a.Conversations.Conversation(ctx, chat.Key{Platform: "telegram", ChatID: first.Instance})
			if err != nil {
				t.Fatal(err)
			}
			turn, err := a.Turns.StartTurn(ctx, TurnStart{ConversationID: conv.ID, UserMessage: chat.Message{Content: "a slow question"}})
			if err != nil {
				t.Fatal(err)
			}
			rec := &audit.Record{TurnID: turn, ConversationID: conv.ID, ToolName: "slow", ToolCallID: "call_1"}
			if err := a.ToolCalls.StartToolCall(ctx, rec); err != nil {
				t.Fatal(err)
			}

			second := opts
			second.Instance = "replica-b"
			b := openTest(t, second)
			if _, _, err := b.Turns.Recover(ctx); err != nil {
				t.Fatalf("second replica's Recover: %v", err)
			}
			got, err := b.Turns.Turn(ctx, turn)
			if err != nil {
				t.Fatal(err)
			}
			callStatus := audit.StatusRunning
			if !live {
				callStatus = audit.StatusInterrupted
			}
			if n := count(t, b, "tool_calls", "id = ? AND status = ?", rec.ID, callStatus); n != 1 {
				t.Errorf("the tool call of the turn is not %s after the second replica started", callStatus)
			}
			if !live {
				if got.Status != TurnInterrupted {
					t.Fatalf("a dead replica's running turn is %q after another replica started, want %q", got.Status, TurnInterrupted)
				}
				return
			}
			if got.Status != TurnRunning {
				t.Fatalf("the first replica's running turn is %q after a second replica started, want it still running", got.Status)
			}
			if err := a.Turns.FinishTurn(ctx, TurnEnd{TurnID: turn, Status: TurnOK, Messages: []chat.Message{{Role: RoleAssistant, Content: "the answer"}}}); err != nil {
				t.Fatalf("the first replica could not finish its turn: %v", err)
			}
			if got, _ := b.Turns.Turn(ctx, turn); got.Status != tc.wantAfter {
				t.Errorf("turn ended %q, want %q", got.Status, tc.wantAfter)
			}
		})
	}
}
