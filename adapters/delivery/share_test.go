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
