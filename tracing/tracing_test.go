package tracing

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"relaybot/adapters/delivery"
	"relaybot/chat"
	"relaybot/pipeline"
)

// failingExporter is a collector that is down.
type failingExporter struct{}

func (failingExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error {
	return errors.New("connection refused")
}
func (failingExporter) Shutdown(context.Context) error { return nil }

// A collector that is down costs a log line a minute, however many batches fail, and the batch
// processor is never told of the failure (so the SDK's global handler never hears of it).
func TestADeadCollectorIsLoggedAtMostOnceAMinute(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs bytes.Buffer
		e := &quietExporter{SpanExporter: failingExporter{}, log: slog.New(slog.NewTextHandler(&logs, nil))}
		lines := func() int { return strings.Count(logs.String(), "spans not exported") }
		for range 50 {
			if err := e.ExportSpans(context.Background(), make([]sdktrace.ReadOnlySpan, 3)); err != nil {
				t.Fatalf("ExportSpans = %v; the batch processor must not see the failure", err)
			}
			time.Sleep(time.Second)
		}
		if n := lines(); n != 1 {
			t.Fatalf("%d log lines for 50 failed batches in 50 s, want 1:\n%s", n, logs.String())
		}
		time.Sleep(15 * time.Second)
		_ = e.ExportSpans(context.Background(), make([]sdktrace.ReadOnlySpan, 3))
		if n := lines(); n != 2 || !strings.Contains(logs.String(), "batches=50 spans=150") {
			t.Fatalf("after a minute: %d lines, want 2 counting the 50 batches lost since the first line:\n%s", n, logs.String())
		}
	})
}

// Export is off unless asked for by the config or the environment, and OTEL_SDK_DISABLED wins.
func TestExportIsOnWhenConfiguredOrTheEnvironmentNamesACollector(t *testing.T) {
	tests := []struct {
		enabled bool
		env     map[string]string
		want    bool
	}{
		{false, nil, false},
		{true, nil, true},
		{false, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, true},
		{false, map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, true},
		{true, map[string]string{"OTEL_SDK_DISABLED": "true"}, false},
	}
	for _, tc := range tests {
		tr, err := New(context.Background(), Options{Enabled: tc.enabled, Getenv: func(k string) string { return tc.env[k] }})
		if err != nil {
			t.Fatal(err)
		}
		if tr.Exporting() != tc.want {
			t.Errorf("enabled %v, env %v: exporting %v, want %v", tc.enabled, tc.env, tr.Exporting(), tc.want)
		}
		_ = tr.Shutdown(context.Background())
	}
}

// Without export the turn still gets its deliveries for the timeline, typing left out, and no
// trace id.
func TestATurnKeepsItsDeliveriesWithoutExport(t *testing.T) {
	tr, err := New(context.Background(), Options{Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	turns, deliveries := tr.Turns(nil), tr.Deliveries(nil)
	ref := chat.Ref{Platform: chat.Telegram, ChatID: "1"}
	ctx := turns.TurnStarted(context.Background(), pipeline.TurnStart{TurnID: 1, Chat: ref, Begun: time.Now()})
	at := time.Now()
	deliveries.Observe(ctx, delivery.Event{Kind: delivery.EventSend, Chat: ref, At: at, Took: 20 * time.Millisecond})
	deliveries.Observe(ctx, delivery.Event{Kind: delivery.EventTyping, Chat: ref, At: at})
	deliveries.Observe(ctx, delivery.Event{Kind: delivery.EventRateLimited, Chat: ref, At: at, RetryAfter: 2 * time.Second, Final: true})
	deliveries.Observe(context.Background(), delivery.Event{Kind: delivery.EventEdit, Chat: ref, At: at}) // no turn
	end := &pipeline.TurnFinish{TurnID: 1, Status: chat.StatusOK}
	turns.TurnFinished(ctx, end, time.Second)
	want := []chat.Delivery{{Kind: "send", At: at, TookMS: 20}, {Kind: "rate_limited", At: at, WaitMS: 2000, Final: true}}
	if len(end.Deliveries) != len(want) || end.Deliveries[0] != want[0] || end.Deliveries[1] != want[1] {
		t.Fatalf("deliveries %+v, want %+v", end.Deliveries, want)
	}
	if end.TraceID != "" {
		t.Fatalf("trace id %q without export", end.TraceID)
	}
}
