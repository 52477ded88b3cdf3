package coord

import (
	"context"
	"fmt"
	"sync"
	"testing"
)

// TestEachOrphanOfADeadReplicaGoesToOneSurvivor leaves unfinished messages of a replica that is
// gone in the ledger and lets two survivors take them over at once: every message goes to exactly
// one of them, finished ones and those of live replicas to none.
func TestEachOrphanOfADeadReplicaGoesToOneSurvivor(t *testing.T) {
	ctx := context.Background()
	st, _ := pgStore(t, "")
	db := pool(t, st)
	live, err := Join(ctx, db, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer live.Leave(ctx)

	dead := NewLedger(db, "dead-replica") // no instance row: gone
	const n = 50
	for i := range n {
		if ok, err := dead.ClaimPayload(ctx, "telegram", fmt.Sprint(i), []byte(fmt.Sprintf(`{"n":%d}`, i))); err != nil || !ok {
			t.Fatalf("claim %d: %v, %v", i, ok, err)
		}
	}
	if err := dead.Done(ctx, "telegram", "0"); err != nil {
		t.Fatal(err)
	}
	if ok, err := NewLedger(db, live.ID()).ClaimPayload(ctx, "telegram", "live-1", []byte("{}")); err != nil || !ok {
		t.Fatalf("claim of a live replica: %v, %v", ok, err)
	}

	var survivors []*Ledger
	for range 2 {
		m, err := Join(ctx, db, Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Leave(ctx)
		survivors = append(survivors, NewLedger(db, m.ID()))
	}
	var mu sync.Mutex
	owner := map[string]int{}
	var wg sync.WaitGroup
	for _, l := range survivors {
		wg.Go(func() {
			for range n { // more rounds than messages: a message taken again and again fails below
				got, _, err := l.Orphans(ctx, "telegram")
				if err != nil {
					t.Error(err)
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for k := range got {
					owner[k]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(owner) != n-1 {
		t.Errorf("%d messages taken over, want the %d unfinished ones of the dead replica", len(owner), n-1)
	}
	for k, times := range owner {
		if times != 1 {
			t.Errorf("message %s taken over %d times, want once", k, times)
		}
		if k == "0" || k == "live-1" {
			t.Errorf("message %s taken over: it is finished or a live replica's", k)
		}
	}
}

// TestAMessageAdoptedAgainIsCountedAcrossSurvivors lets a replica die with a message unanswered,
// a survivor take it over and die too, and a third replica take it over: the deployment's count
// of adoptions reaches the third as 2 (the pipeline then answers with a notice, not a third
// try), and once its turn is done nobody takes it over again.
func TestAMessageAdoptedAgainIsCountedAcrossSurvivors(t *testing.T) {
	ctx := context.Background()
	st, _ := pgStore(t, "")
	db := pool(t, st)
	dead := NewLedger(db, "dead-replica") // no instance row: gone
	if ok, err := dead.ClaimPayload(ctx, "discord", "message:1", []byte(`{"v":1}`)); err != nil || !ok {
		t.Fatalf("claim: %v, %v", ok, err)
	}

	adopt := func(want int) *Member {
		t.Helper()
		m, err := Join(ctx, db, Options{})
		if err != nil {
			t.Fatal(err)
		}
		payloads, adoptions, err := NewLedger(db, m.ID()).Orphans(ctx, "discord")
		if err != nil {
			t.Fatal(err)
		}
		if string(payloads["message:1"]) != `{"v":1}` || adoptions["message:1"] != want || len(payloads) != 1 {
			t.Fatalf("survivor took over %q (adoptions %v), want the message as adoption %d", payloads, adoptions, want)
		}
		return m
	}
	first := adopt(1)
	if err := first.Leave(ctx); err != nil { // the first adopter dies in the message's turn
		t.Fatal(err)
	}
	second := adopt(2)
	defer second.Leave(ctx)
	if err := NewLedger(db, second.ID()).Done(ctx, "discord", "message:1"); err != nil {
		t.Fatal(err)
	}
	if err := second.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	third, err := Join(ctx, db, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer third.Leave(ctx)
	if payloads, _, err := NewLedger(db, third.ID()).Orphans(ctx, "discord"); err != nil || len(payloads) != 0 {
		t.Fatalf("a message whose turn is done taken over again: %q, %v", payloads, err)
	}
}
