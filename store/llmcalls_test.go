package store

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	"relaybot/chat"
)

// Many replicas reserving model calls of one user at once under a quota that fits three
// reservations: exactly three start, whatever the interleaving; a settled call counts with what
// it cost, and a call outside a turn (/compact) counts like any other.
func TestStartLLMCallReservesAtomically(t *testing.T) {
	forEachDriver(t, func(t *testing.T, driver string) {
		opts := testOptions(t, driver)
		first := openTest(t, opts)
		stores := []*Database{first}
		if driver == DriverPostgres {
			// Two replicas on one database.
			opts.Instance = "other"
			stores = append(stores, openTest(t, opts))
		}
		ctx := context.Background()
		day := time.Now().UTC().Truncate(24 * time.Hour)
		check := QuotaCheck{Filter: UsageFilter{Platform: "telegram", UserID: "7", Since: day}, Tokens: 1000}
		start := func(s *Database, in, out int) (int64, error) {
			return s.ModelCalls.StartLLMCall(ctx, LLMCallStart{Platform: "telegram", ChatID: "c", UserID: "7", Checks: []QuotaCheck{check},
				Call: chat.ModelCall{Model: "m", TokensIn: in, TokensOut: out, StartedAt: time.Now()}})
		}
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			started []int64
			refused int
		)
		for i := range 12 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				id, err := start(stores[i%len(stores)], 100, 250) // 350 reserved: three fit under 1000
				mu.Lock()
				defer mu.Unlock()
				var over *OverQuotaError
				switch {
				case errors.As(err, &over):
					refused++
				case err != nil:
					t.Error(err)
				default:
					started = append(started, id)
				}
			}()
		}
		wg.Wait()
		if len(started) != 3 || refused != 9 {
			t.Fatalf("%d calls started and %d refused, want 3 and 9", len(started), refused)
		}
		rows, err := first.Usage.Usage(ctx, check.Filter)
		if err != nil {
			t.Fatal(err)
		}
		if u := RollUp(rows, ByAll, nil); u[0].TokensIn+u[0].TokensOut != 1050 || u[0].Estimated != 3 {
			t.Fatalf("usage while running = %+v, want the three reservations, estimated", u[0])
		}
		for _, id := range started {
			if err := first.ModelCalls.FinishLLMCall(ctx, id, chat.ModelCall{Model: "m", Status: "ok", TokensIn: 100, TokensOut: 20}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := start(first, 100, 250); err != nil {
			t.Fatalf("a call after the others settled at 360 tokens: %v", err)
		}
		rows, _ = first.Usage.Usage(ctx, check.Filter)
		if u := RollUp(rows, ByAll, nil); u[0].TokensIn+u[0].TokensOut != 360+350 || u[0].Estimated != 1 {
			t.Fatalf("usage after settling = %+v, want 360 settled and one reservation of 350", u[0])
		}
	})
}

// A model call left running by a replica that is gone is settled by Recover at what it
// reserved, marked estimated; a settled call is not changed by a late FinishLLMCall.
func TestRecoverSettlesRunningModelCalls(t *testing.T) {
	forEachDriver(t, func(t *testing.T, driver string) {
		s := newStore(t, driver)
		ctx := context.Background()
		id, err := s.ModelCalls.StartLLMCall(ctx, LLMCallStart{Platform: "telegram", ChatID: "c", UserID: "7",
			Call: chat.ModelCall{Model: "m", TokensIn: 300, TokensOut: 2048, StartedAt: time.Now()}})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.Turns.Recover(ctx); err != nil {
			t.Fatal(err)
		}
		if n := count(t, s, "llm_calls", "id = ? AND status = ? AND estimated AND tokens_in = 300 AND tokens_out = 2048", id, LLMCallInterrupted); n != 1 {
			t.Fatalf("the crashed call was not settled interrupted at its reservation")
		}
		if err := s.ModelCalls.FinishLLMCall(ctx, id, chat.ModelCall{Model: "m", Status: "ok", TokensIn: 1, TokensOut: 1}); err != nil {
			t.Fatal(err)
		}
		if n := count(t, s, "llm_calls", "id = ? AND status = ?", id, LLMCallInterrupted); n != 1 {
			t.Fatalf("a late finish changed a recovered call")
		}
		// Retention removes calls outside turns too.
		if _, err := s.Retention.Sweep(ctx, time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if n := count(t, s, "llm_calls", ""); n != 0 {
			t.Fatalf("%d model calls outside turns survived retention", n)
		}
	})
}

// Upgrading a database with model calls keeps them counted against the user and chat of their
// turn, and going back down and up again keeps them too.
func TestLedgerMigrationKeepsEarlierCalls(t *testing.T) {
	forEachDriver(t, func(t *testing.T, driver string) {
		ctx := context.Background()
		s, err := Open(ctx, testOptions(t, driver))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		p, err := s.provider()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.UpTo(ctx, 15); err != nil {
			t.Fatal(err)
		}
		at := dbTime(time.Now())
		for _, q := range []struct {
			sql  string
			args []any
		}{
			{"INSERT INTO conversations (id, platform, chat_id, created_at) VALUES (1, 'telegram', 'c1', ?)", []any{at}},
			{"INSERT INTO turns (id, conversation_id, user_id, status, started_at) VALUES (1, 1, 'ann', 'ok', ?)", []any{at}},
			{"INSERT INTO llm_calls (turn_id, seq, model, status, tokens_in, tokens_out, started_at) VALUES (1, 0, 'm', 'ok', 120, 30, ?)", []any{at}},
		} {
			if err := s.w.Exec(q.sql, q.args...).Error; err != nil {
				t.Fatalf("%s: %v", q.sql, err)
			}
		}
		check := func(when string) {
			t.Helper()
			rows, err := s.Usage.Usage(ctx, UsageFilter{Platform: "telegram", UserID: "ann"})
			if err != nil {
				t.Fatal(err)
			}
			if len(rows) != 1 || rows[0].ChatID != "c1" || rows[0].TokensIn != 120 || rows[0].TokensOut != 30 || rows[0].Estimated != 0 {
				t.Fatalf("%s: usage of ann = %+v, want the earlier call of chat c1 (120 in, 30 out)", when, rows)
			}
		}
		if err := s.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		check("after the upgrade")
		if _, err := p.DownTo(ctx, 15); err != nil {
			t.Fatalf("down to 15: %v", err)
		}
		if err := s.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		check("after going down and up again")
	})
}

// A turn's call is settled with the turn's next write, not in a commit of its own: the first
// call's end goes with the second call's start (whose quota check counts it at what it cost),
// the second's with the turn's end. A turn of two calls is four commits, not six.
func TestACallIsSettledWithItsTurnsNextWrite(t *testing.T) {
	forEachDriver(t, func(t *testing.T, driver string) {
		s := newStore(t, driver)
		ctx := context.Background()
		c, err := s.Conversations.Conversation(ctx, chat.Key{Platform: "telegram", ChatID: "c"})
		if err != nil {
			t.Fatal(err)
		}
		before := s.turns.commits.Load()
		turn, err := s.Turns.StartTurn(ctx, TurnStart{ConversationID: c.ID, UserID: "7", UserMessage: chat.Message{Content: "hi"}})
		if err != nil {
			t.Fatal(err)
		}
		day := time.Now().UTC().Truncate(24 * time.Hour)
		check := QuotaCheck{Filter: UsageFilter{Platform: "telegram", UserID: "7", Since: day}, Tokens: 1000}
		first, err := s.ModelCalls.StartLLMCall(ctx, LLMCallStart{TurnID: turn, Platform: "telegram", ChatID: "c", UserID: "7",
			Checks: []QuotaCheck{check}, Call: chat.ModelCall{Model: "m", TokensIn: 100, TokensOut: 800, StartedAt: time.Now()}})
		if err != nil {
			t.Fatal(err)
		}
		// 900 reserved: a second reservation of 900 fits only once the first is settled at 120.
		second, err := s.ModelCalls.StartLLMCall(ctx, LLMCallStart{TurnID: turn, Seq: 1, Platform: "telegram", ChatID: "c", UserID: "7",
			Checks: []QuotaCheck{check}, Call: chat.ModelCall{Model: "m", TokensIn: 100, TokensOut: 800, StartedAt: time.Now()},
			Settle: []LLMCallSettle{{ID: first, Call: chat.ModelCall{Model: "m", Status: "ok", TokensIn: 100, TokensOut: 20}}}})
		if err != nil {
			t.Fatalf("the second call was refused although the first cost 120 of its 900 tokens: %v", err)
		}
		err = s.Turns.FinishTurn(ctx, TurnEnd{TurnID: turn, Status: TurnOK, Messages: []chat.Message{{Role: RoleAssistant, Content: "hello"}},
			Settle: []LLMCallSettle{{ID: second, Call: chat.ModelCall{Model: "m", Status: "ok", TokensIn: 130, TokensOut: 30}}}})
		if err != nil {
			t.Fatal(err)
		}
		if n := count(t, s, "llm_calls", "turn_id = ? AND status = 'ok' AND NOT estimated", turn); n != 2 {
			t.Fatalf("%d of the turn's 2 calls settled", n)
		}
		rows, err := s.Usage.Usage(ctx, check.Filter)
		if err != nil {
			t.Fatal(err)
		}
		if u := RollUp(rows, ByAll, nil); u[0].TokensIn+u[0].TokensOut != 280 {
			t.Fatalf("usage after the turn = %+v, want the 280 tokens the calls cost", u[0])
		}
		// On PostgreSQL a call with quota checks commits apart from the group writer (its
		// advisory locks), so only SQLite counts all four.
		if n := s.turns.commits.Load() - before; driver == DriverSQLite && n != 4 {
			t.Fatalf("a turn of two model calls took %d commits, want 4", n)
		}
	})
}

// A call's cached prompt tokens are kept with it, shown in usage and its timeline, and priced at
// the cache's price: a cost quota counts what the provider bills, not the full price.
func TestCachedTokensAreStoredAndBilledAtTheCachesPrice(t *testing.T) {
	forEachDriver(t, func(t *testing.T, driver string) {
		ctx := context.Background()
		s := newStore(t, driver)
		day := time.Now().UTC().Truncate(24 * time.Hour)
		prices := map[string]chat.Price{"m": {In: 2, CachedIn: 0.2, CacheWrite: 2.5, Out: 8}}
		check := QuotaCheck{Filter: UsageFilter{Platform: "telegram", UserID: "7", Since: day}, Cost: 0.01}
		start := func() (int64, error) {
			return s.ModelCalls.StartLLMCall(ctx, LLMCallStart{Platform: "telegram", ChatID: "c", UserID: "7",
				Checks: []QuotaCheck{check}, Prices: prices, Call: chat.ModelCall{Model: "m", TokensIn: 10, StartedAt: time.Now()}})
		}
		id, err := start()
		if err != nil {
			t.Fatal(err)
		}
		// 4,000 prompt tokens, 3,000 from the cache and 500 written to it, 100 out:
		// 500×2 + 3000×0.2 + 500×2.5 + 100×8 = 3,650 per million = 0.00365, under the 0.01 quota
		// (at full price, 4000×2 + 100×8 = 0.0088, it would be too).
		call := chat.ModelCall{Model: "m", Status: "ok", TokensIn: 4000, CachedIn: 3000, CacheWriteIn: 500, TokensOut: 100}
		if err := s.ModelCalls.FinishLLMCall(ctx, id, call); err != nil {
			t.Fatal(err)
		}
		rows, err := s.Usage.Usage(ctx, check.Filter)
		if err != nil {
			t.Fatal(err)
		}
		u := RollUp(rows, ByAll, prices)[0]
		if u.TokensIn != 4000 || u.CachedTokens != 3000 || u.CacheWriteTokens != 500 || math.Abs(u.Cost-0.00365) > 1e-12 {
			t.Fatalf("usage = %+v, want 4000 in of which 3000 cached and 500 written, costing 0.00365", u)
		}
		// Two more such calls start (0.00365 and 0.0073 used before them), a fourth does not
		// (0.01095). At full price (0.0088 a call) the third would have been refused.
		for range 2 {
			id, err := start()
			if err != nil {
				t.Fatalf("a call under the billed cost was refused: %v", err)
			}
			if err := s.ModelCalls.FinishLLMCall(ctx, id, call); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := start(); !errors.As(err, new(*OverQuotaError)) {
			t.Fatalf("a call over the billed cost started: %v", err)
		}
	})
}

// TestAnImageCallIsReservedBilledAndCountedPerImage: an image call reserves its images (a quota
// sees them while it runs), settles with the images delivered, and usage prices them per image;
// a failed one settles with none and costs nothing.
func TestAnImageCallIsReservedBilledAndCountedPerImage(t *testing.T) {
	forEachDriver(t, func(t *testing.T, driver string) {
		ctx := context.Background()
		s := newStore(t, driver)
		day := time.Now().UTC().Truncate(24 * time.Hour)
		prices := map[string]chat.Price{"gpt-image-1": {PerImage: 0.04}}
		check := QuotaCheck{Filter: UsageFilter{Platform: "telegram", UserID: "7", Since: day}, Cost: 0.1}
		start := func() (int64, error) {
			return s.ModelCalls.StartLLMCall(ctx, LLMCallStart{Platform: "telegram", ChatID: "c", UserID: "7",
				Checks: []QuotaCheck{check}, Prices: prices, Call: chat.ModelCall{Model: "gpt-image-1", Images: 1, StartedAt: time.Now()}})
		}
		usage := func() UsageTotal {
			rows, err := s.Usage.Usage(ctx, check.Filter)
			if err != nil {
				t.Fatal(err)
			}
			return RollUp(rows, ByAll, prices)[0]
		}
		id, err := start()
		if err != nil {
			t.Fatal(err)
		}
		if u := usage(); u.Images != 1 || math.Abs(u.Cost-0.04) > 1e-12 {
			t.Fatalf("while it runs: %+v, want one image reserved at 0.04", u)
		}
		if err := s.ModelCalls.FinishLLMCall(ctx, id, chat.ModelCall{Model: "gpt-image-1", Status: "ok", Images: 1}); err != nil {
			t.Fatal(err)
		}
		failed, err := start()
		if err != nil {
			t.Fatal(err)
		}
		if err := s.ModelCalls.FinishLLMCall(ctx, failed, chat.ModelCall{Model: "gpt-image-1", Status: "error", Images: 0}); err != nil {
			t.Fatal(err)
		}
		if u := usage(); u.Images != 1 || u.Calls != 2 || math.Abs(u.Cost-0.04) > 1e-12 {
			t.Fatalf("after one image and one failure: %+v, want 1 image over 2 calls at 0.04", u)
		}
		// Two more images (0.04 and 0.08 used before them) start, a third (0.12) does not.
		for range 2 {
			id, err := start()
			if err != nil {
				t.Fatalf("an image under the quota was refused: %v", err)
			}
			if err := s.ModelCalls.FinishLLMCall(ctx, id, chat.ModelCall{Model: "gpt-image-1", Status: "ok", Images: 1}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := start(); !errors.As(err, new(*OverQuotaError)) {
			t.Fatalf("an image over the cost quota started: %v", err)
		}
	})
}
