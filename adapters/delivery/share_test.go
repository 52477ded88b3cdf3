package delivery

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"relaybot/adapters"
)

// TestReplicasShareTheBotWideBudget gives one engine's scheduler a third of a budget of three
// requests, as one of three replicas: the second request waits until the share grows back.
func TestReplicasShareTheBotWideBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScheduler(adapters.Limits{Global: adapters.Rate{N: 3, Per: time.Hour}}, nil, time.Millisecond)
		defer s.close()
		s.shareGlobal(3)
		grant(t, s, true)()

		granted := make(chan struct{})
		go func() {
			release, err := s.acquire(context.Background(), testChat, true, poolFree)
			if err == nil {
				release()
			}
			close(granted)
		}()
		synctest.Wait()
		select {
		case <-granted:
			t.Fatal("a replica with a third of a 3-request budget sent a second request in the window")
		default:
		}

		s.shareGlobal(1) // the other replicas left
		synctest.Wait()
		select {
		case <-granted:
		default:
			t.Fatal("the waiting request was not sent once the replica had the whole budget again")
		}
	})
}

// TestReplicasShareBothPools gives one of three replicas a third of a free budget of three and
// of a paid one of six: one preview and two sends go in the window, the next of each waits
// until the other replicas leave, and neither pool lends its places to the other.
func TestReplicasShareBothPools(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScheduler(adapters.Limits{Global: adapters.Rate{N: 3, Per: time.Hour}}, nil, time.Millisecond).
			withPaid(adapters.Rate{N: 6, Per: time.Hour})
		defer s.close()
		s.shareGlobal(3)
		take := func(p pool) chan struct{} {
			granted := make(chan struct{})
			go func() {
				release, err := s.acquire(context.Background(), testChat, true, p)
				if err == nil {
					release()
				}
				close(granted)
			}()
			return granted
		}
		isDone := func(ch chan struct{}) bool {
			select {
			case <-ch:
				return true
			default:
				return false
			}
		}
		for _, p := range []pool{poolFree, poolPaid, poolPaid} {
			ch := take(p)
			synctest.Wait()
			if !isDone(ch) {
				t.Fatalf("a request in pool %d waited within the replica's share", p)
			}
		}
		free, paid := take(poolFree), take(poolPaid)
		synctest.Wait()
		if isDone(free) {
			t.Error("a replica with a third of a free budget of 3 made a second free request in the window")
		}
		if isDone(paid) {
			t.Error("a replica with a third of a paid budget of 6 made a third paid request in the window")
		}
		s.shareGlobal(1) // the other replicas left
		synctest.Wait()
		if !isDone(free) || !isDone(paid) {
			t.Fatalf("waiting requests not sent once the replica had both whole budgets again (free %v, paid %v)", isDone(free), isDone(paid))
		}
	})
}
