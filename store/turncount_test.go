package store

import (
	"context"
	"maps"
	"relaybot/chat"
	"testing"
	"time"
)

func TestCountTurns(t *testing.T) {
	forEachDriver(t, func(t *testing.T, driver string) {
		ctx := context.Background()
		s := newStore(t, driver)
		c, err := s.Conversations.Conversation(ctx, chat.Key{Platform: "web", ChatID: "count"})
		if err != nil {
			t.Fatal(err)
		}
		var ids []int64
		for _, status := range []chat.Status{TurnOK, TurnOK, TurnError, TurnOK, TurnCancelled, TurnRunning} {
			id, err := s.Turns.StartTurn(ctx, TurnStart{ConversationID: c.ID, UserMessage: chat.Message{Content: "q"}})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
			if status != TurnRunning {
				if err := s.Turns.FinishTurn(ctx, TurnEnd{TurnID: id, Status: status}); err != nil {
					t.Fatal(err)
				}
			}
		}
		// The fourth turn's start splits the turns in two: three before, three from it on.
		mid, err := s.Turns.Turn(ctx, ids[3])
		if err != nil {
			t.Fatal(err)
		}
		third, err := s.Turns.Turn(ctx, ids[2])
		if err != nil {
			t.Fatal(err)
		}
		if !third.StartedAt.Before(mid.StartedAt) {
			t.Skipf("turns 3 and 4 started in the same microsecond (%s); cannot split by time", mid.StartedAt)
		}
		tests := []struct {
			name   string
			f      TurnFilter
			want   int
			counts map[string]int
		}{
			{"all", TurnFilter{}, 6, map[string]int{"ok": 3, "error": 1, "cancelled": 1, "running": 1}},
			{"ok", TurnFilter{Status: TurnOK}, 3, map[string]int{"ok": 3}},
			{"interrupted (none)", TurnFilter{Status: TurnInterrupted}, 0, map[string]int{}},
			{"since", TurnFilter{Since: mid.StartedAt}, 3, map[string]int{string(TurnOK): 1, string(TurnCancelled): 1, string(TurnRunning): 1}},
			{"until", TurnFilter{Until: mid.StartedAt}, 3, map[string]int{string(TurnOK): 2, string(TurnError): 1}},
			{"since and status", TurnFilter{Since: mid.StartedAt, Status: TurnOK}, 1, map[string]int{string(TurnOK): 1}},
			{"future", TurnFilter{Since: time.Now().Add(time.Hour)}, 0, map[string]int{}},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				n, err := s.Turns.CountTurns(ctx, tc.f)
				if err != nil || n != tc.want {
					t.Errorf("CountTurns = %d, %v; want %d", n, err, tc.want)
				}
				counts, err := s.Turns.TurnStatusCounts(ctx, tc.f)
				if err != nil || !maps.Equal(counts, tc.counts) {
					t.Errorf("TurnStatusCounts = %v, %v; want %v", counts, err, tc.counts)
				}
			})
		}
		bad := []TurnFilter{
			{Status: "done"},
			{Since: mid.StartedAt, Until: third.StartedAt},
		}
		for _, f := range bad {
			if _, err := s.Turns.CountTurns(ctx, f); err == nil {
				t.Errorf("CountTurns(%+v) accepted a bad filter", f)
			}
			if _, err := s.Turns.TurnStatusCounts(ctx, f); err == nil {
				t.Errorf("TurnStatusCounts(%+v) accepted a bad filter", f)
			}
		}
	})
}
