package lifecycle

import (
	"context"
	"sync"
	"testing"
	"time"
)

// TestALatestJobReplacesTheOneOfItsKeyAfterItReturned gives a job under a key before the part
// runs (it waits for the part), then a second under the same key while the first runs: the first
// is cancelled and the second starts only once the first has returned; a job of another key runs
// beside them, and stopping the part waits for every job.
func TestALatestJobReplacesTheOneOfItsKeyAfterItReturned(t *testing.T) {
	l := NewLatest()
	var mu sync.Mutex
	var steps []string
	step := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		steps = append(steps, s)
	}
	firstRunning, otherRunning := make(chan struct{}), make(chan struct{})
	release := make(chan struct{})
	l.Start("memory", func(ctx context.Context) {
		step("first started")
		close(firstRunning)
		<-ctx.Done()
		<-release // still busy a while after its cancellation
		step("first returned")
	})
	ctx, cancel := context.WithCancel(context.Background())
	ended := make(chan error, 1)
	go func() { ended <- l.Part("reindex").Run(ctx) }()
	<-firstRunning
	l.Start("knowledge", func(ctx context.Context) {
		close(otherRunning)
		<-ctx.Done()
	})
	<-otherRunning
	secondDone := make(chan struct{})
	l.Start("memory", func(context.Context) {
		step("second started")
		close(secondDone)
	})
	close(release)
	select {
	case <-secondDone:
	case <-time.After(30 * time.Second):
		t.Fatal("the replacing job never ran")
	}
	mu.Lock()
	got := append([]string(nil), steps...)
	mu.Unlock()
	want := []string{"first started", "first returned", "second started"}
	if len(got) != len(want) {
		t.Fatalf("steps %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("steps %q, want %q: the replacing job ran beside the one it replaced", got, want)
		}
	}
	cancel()
	select {
	case err := <-ended:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the part did not return after its context ended: a job was left running")
	}
	l.Start("memory", func(context.Context) { t.Error("a job given after the part ended ran") })
}
