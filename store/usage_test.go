package store

import (
	"context"
	"math"
	"relaybot/chat"
	"testing"
	"time"
)

// seedUsage writes turns with model calls: each entry is one turn of a user in a chat.
func seedUsage(t *testing.T, s *Database, at time.Time, turns []usageTurn) {
	t.Helper()
	ctx := context.Background()
	for _, u := range turns {
		c, err := s.Conversations.Conversation(ctx, chat.Key{Platform: "discord", ChatID: u.chat})
		if err != nil {
			t.Fatal(err)
		}
		id, err := s.Turns.StartTurn(ctx, TurnStart{ConversationID: c.ID, UserID: u.user, UserMessage: chat.Message{Role: "user", Content: "q"}})
		if err != nil {
			t.Fatal(err)
		}
		var calls []chat.ModelCall
		for i, m := range u.models {
			calls = append(calls, chat.ModelCall{Model: m, Status: "ok", TokensIn: u.in, TokensOut: u.out, StartedAt: at.Add(time.Duration(i) * time.Second)})
		}
		if err := s.Turns.FinishTurn(ctx, TurnEnd{TurnID: id, Status: TurnOK, LLMCalls: calls}); err != nil {
			t.Fatal(err)
		}
	}
}

type usageTurn struct {
	chat, user string
	models     []string
	in, out    int
}

// Usage totals equal the sum of the llm_calls rows, per user, chat and model, and cost follows
// the configured per-million prices.
func TestUsageSumsModelCallsAndPricesThem(t *testing.T) {
	forEachDriver(t, func(t *testing.T, driver string) {
		ctx := context.Background()
		s := newStore(t, driver)
		today := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
		seedUsage(t, s, today, []usageTurn{
			{"g1", "ann", []string{"mini", "mini"}, 1_234_567, 345_678},
			{"g1", "bob", []string{"big"}, 10_000, 2_000},
			{"g2", "ann", []string{"big"}, 500_000, 100_000},
		})
		seedUsage(t, s, today.AddDate(0, -1, 0), []usageTurn{{"g1", "ann", []string{"mini"}, 999, 999}})

		rows, err := s.Usage.Usage(ctx, UsageFilter{Since: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)})
		if err != nil {
			t.Fatal(err)
		}
		var in, out int64
		if err := s.r.Raw("SELECT COALESCE(SUM(tokens_in),0), COALESCE(SUM(tokens_out),0) FROM llm_calls WHERE started_at >= ?",
			dbTime(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))).Row().Scan(&in, &out); err != nil {
			t.Fatal(err)
		}
		all := RollUp(rows, ByAll, nil)
		if len(all) != 1 || all[0].TokensIn != in || all[0].TokensOut != out || all[0].Calls != 4 {
			t.Fatalf("total = %+v, want the llm_calls sums %d in, %d out over 4 calls", all, in, out)
		}
		// Real list prices per million tokens: gpt-4o-mini 0.15 / 0.60, gpt-4o 2.50 / 10.00.
		prices := map[string]chat.Price{"mini": {In: 0.15, Out: 0.60}, "big": {In: 2.50, Out: 10.00}}
		byUser := RollUp(rows, ByUser, prices)
		want := map[string]float64{
			"discord:ann": 2*(1.234567*0.15+0.345678*0.60) + (0.5*2.50 + 0.1*10.00), // 0.7851837 + 2.25
			"discord:bob": 0.01*2.50 + 0.002*10.00,                                  // 0.045
		}
		if len(byUser) != 2 || byUser[0].Key != "discord:ann" {
			t.Fatalf("by user = %+v, want ann first (she costs more)", byUser)
		}
		for _, u := range byUser {
			if math.Abs(u.Cost-want[u.Key]) > 1e-9 {
				t.Errorf("%s costs %.9f, want %.9f", u.Key, u.Cost, want[u.Key])
			}
		}
		if byModel := RollUp(rows, ByModel, prices); len(byModel) != 2 || byModel[0].Key != "big" || byModel[1].Calls != 2 {
			t.Errorf("by model = %+v", byModel)
		}
		mine, err := s.Usage.Usage(ctx, UsageFilter{Platform: "discord", UserID: "bob"})
		if err != nil || len(mine) != 1 || mine[0].ChatID != "g1" || mine[0].TokensIn != 10_000 {
			t.Errorf("bob's usage = %+v, %v", mine, err)
		}
	})
}
