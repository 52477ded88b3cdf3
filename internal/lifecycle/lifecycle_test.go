package lifecycle

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// order records the steps of a shutdown as the parts see them.
type order struct {
	mu    sync.Mutex
	steps []string
}

func (o *order) add(s string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.steps = append(o.steps, s)
}

func (o *order) get() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.steps)
}

// waiting is a part that runs until its context ends, then records that it stopped.
func waiting(o *order, name string, started *sync.WaitGroup) Part {
	started.Add(1)
	return Part{Name: name, Run: func(ctx context.Context) error {
		started.Done()
		<-ctx.Done()
		o.add(name + " stopped")
		return nil
	}}
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func TestShutdownStopsReceiversThenDrainsThenStopsTheRest(t *testing.T) {
	var o order
	var started sync.WaitGroup
	ctx, cancel := context.WithCancel(context.Background())
	plan := Plan{
		Receivers:  []Part{waiting(&o, "telegram", &started)},
		Background: []Part{waiting(&o, "admin", &started)},
		Drain: func(ctx context.Context) error {
			o.add("drain")
			return nil
		},
		Grace: time.Minute,
		Log:   quiet,
	}
	done := make(chan error, 1)
	go func() { done <- Run(ctx, plan) }()
	started.Wait()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v after a clean stop, want nil", err)
	}
	got := o.get()
	// The receiver may record its stop before or after the drain begins; the admin listener
	// stops only once both are done.
	if len(got) != 3 || got[2] != "admin stopped" || !slices.Contains(got, "drain") || !slices.Contains(got, "telegram stopped") {
		t.Fatalf("shutdown steps %v, want the receiver stopped and the turns drained before the admin listener stops", got)
	}
}

func TestAFailingPartShutsTheServerDownNamingIt(t *testing.T) {
	var o order
	var started sync.WaitGroup
	plan := Plan{
		Receivers:  []Part{{Name: "discord", Run: func(context.Context) error { return errors.New("gateway refused the token") }}},
		Background: []Part{waiting(&o, "admin", &started)},
		Log:        quiet,
	}
	err := Run(context.Background(), plan)
	if err == nil || !strings.Contains(err.Error(), "discord: gateway refused the token") {
		t.Fatalf("Run = %v, want the failure named by its part", err)
	}
	if got := o.get(); !slices.Equal(got, []string{"admin stopped"}) {
		t.Fatalf("steps %v, want the other parts stopped too", got)
	}
}

func TestASecondSignalEndsTheGracePeriodAtOnce(t *testing.T) {
	hurry := make(chan os.Signal, 1)
	ctx, cancel := context.WithCancel(context.Background())
	drained := make(chan error, 1)
	plan := Plan{
		Drain: func(ctx context.Context) error {
			hurry <- os.Interrupt // the second Ctrl-C, once the shutdown began
			<-ctx.Done()
			drained <- ctx.Err()
			return nil
		},
		Grace: time.Hour,
		Hurry: hurry,
		Log:   quiet,
	}
	hurry <- os.Interrupt // the signal that started the shutdown is not a second one
	cancel()
	if err := Run(ctx, plan); err != nil {
		t.Fatal(err)
	}
	if err := <-drained; !errors.Is(err, context.Canceled) {
		t.Fatalf("the drain ended with %v, want it cancelled by the second signal, not the hour of grace", err)
	}
}
