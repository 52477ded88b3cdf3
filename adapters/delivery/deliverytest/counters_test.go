package deliverytest

import (
	"context"
	"sync"
	"testing"

	"relaybot/adapters/delivery"
)

func TestCountersCountEveryEventByKindFromManyGoroutines(t *testing.T) {
	var c Counters
	kinds := []delivery.EventKind{delivery.EventSend, delivery.EventEdit, delivery.EventEdit, delivery.EventRateLimited, delivery.EventFailed}
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			for _, k := range kinds {
				c.Observe(context.Background(), delivery.Event{Kind: k})
			}
		})
	}
	wg.Wait()
	want := Stats{Sends: 10, Edits: 20, RateLimited: 10, Failures: 10}
	if got := c.Snapshot(); got != want {
		t.Fatalf("Snapshot = %+v, want %+v", got, want)
	}
}
