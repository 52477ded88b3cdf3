package tracing

import (
	"context"
	"errors"
	"testing"
	"time"

	"relaybot/adapters/delivery"
	"relaybot/audit"
	"relaybot/chat"
	"relaybot/internal/testkit/otlp"
	"relaybot/pipeline"
	"relaybot/tools"
)

// nopRecorder keeps no audit rows.
type nopRecorder struct{}

func (nopRecorder) Start(context.Context, *audit.Record) error  { return nil }
func (nopRecorder) Finish(context.Context, *audit.Record) error { return nil }

// BenchmarkTurnObservers is what the observers cost one turn of a tool round: the turn, two
// model calls, a tool call with an approval, three deliveries; with export on, the spans go
// through the batch processor to a loopback OTLP/HTTP receiver (the export's CPU, in this
// process, is in the figure).
func BenchmarkTurnObservers(b *testing.B) {
	for _, export := range []bool{false, true} {
		name := "off"
		if export {
			name = "on"
		}
		b.Run(name, func(b *testing.B) {
			opts := Options{Getenv: func(string) string { return "" },
				Models: map[string]Model{"main": {Model: "gpt-test", ServerAddress: "api.example"}}}
			if export {
				rcv := otlp.New()
				rcv.CountOnly()
				defer rcv.Close()
				opts.Enabled, opts.Endpoint = true, rcv.URL
			}
			tr, err := New(context.Background(), opts)
			if err != nil {
				b.Fatal(err)
			}
			defer func() {
				if err := tr.Shutdown(context.Background()); err != nil && !errors.Is(err, context.Canceled) {
					b.Fatal(err)
				}
			}()
			turns, models, deliveries := tr.Turns(nil), tr.Models(nil), tr.Deliveries(nil)
			rec := tr.Recorder(nopRecorder{})
			ref := chat.Ref{Platform: chat.Telegram, ChatID: "42"}
			b.ReportAllocs()
			for i := range b.N {
				now := time.Now()
				ctx := turns.TurnStarted(context.Background(), pipeline.TurnStart{TurnID: int64(i), ConversationID: 7, Chat: ref, UserID: "u", Text: "hi", Begun: now})
				models.ModelCallFinished(ctx, chat.ModelCall{Model: "main", RequestModel: "gpt-test", ResponseModel: "gpt-test-1", Round: 1,
					StartedAt: now, TimeToFirstToken: time.Millisecond, Duration: 2 * time.Millisecond, TokensIn: 100, TokensOut: 20, FinishReason: "tool_calls", Status: chat.StatusOK})
				r := &audit.Record{TurnID: int64(i), ToolName: "echo", ToolCallID: "call_1", Source: audit.SourceMCP, Server: "kit", Round: 1, StartedAt: now, ApprovalRequired: true}
				_ = rec.Start(ctx, r)
				_ = rec.(tools.CallContexter).CallContext(ctx, r)
				r.Status, r.Decision, r.DecidedAt, r.FinishedAt = audit.StatusOK, "approved", now, now
				_ = rec.Finish(ctx, r)
				models.ModelCallFinished(ctx, chat.ModelCall{Model: "main", RequestModel: "gpt-test", Round: 2,
					StartedAt: now, TimeToFirstToken: time.Millisecond, Duration: 2 * time.Millisecond, TokensIn: 130, TokensOut: 100, FinishReason: "stop", Status: chat.StatusOK})
				deliveries.Observe(ctx, delivery.Event{Kind: delivery.EventSend, Chat: ref, At: now, Took: time.Millisecond})
				deliveries.Observe(ctx, delivery.Event{Kind: delivery.EventEdit, Chat: ref, At: now, Took: time.Millisecond})
				deliveries.Observe(ctx, delivery.Event{Kind: delivery.EventEdit, Chat: ref, At: now, Took: time.Millisecond, Final: true})
				turns.TurnFinished(ctx, &pipeline.TurnFinish{TurnID: int64(i), Status: chat.StatusOK, Model: "main", Rounds: 2}, time.Second)
			}
		})
	}
}
