package pipeline

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"sync/atomic"
	"testing"

	"relaybot/internal/testkit/llm"
	"relaybot/pipeline/quota"
	"relaybot/policy"
	"relaybot/store"
)

// BenchmarkTurn measures one whole turn through the pipeline: access, queue, history read, user
// message saved, a streamed 100-token answer from the fake model (every 4th turn with an echo
// tool round), the final answer handed to the reply, and the turn saved in SQLite. Conversations
// are spread over 64 users so turns run in parallel as they would in a busy bot.
func BenchmarkTurn(b *testing.B) {
	benchTurns(b, newBenchHarness(b, Options{}))
}

// BenchmarkTurnWithQuota is BenchmarkTurn with a daily quota per user and per chat: every model
// call checks both and reserves its tokens before its request.
func BenchmarkTurnWithQuota(b *testing.B) {
	checks := &countedUsage{}
	h := newBenchHarness(b, Options{Quotas: quota.Policy{User: policy.Limits{TokensPerDay: 1 << 40}, Chat: policy.Limits{TokensPerDay: 1 << 40}},
		Usage: checks})
	checks.log = h.store.Usage
	benchTurns(b, h)
	// Each turn checks the user's and the chat's quota before it begins (its calls check them in
	// the ledger's reservation).
	if n := checks.n.Load(); n < int64(2*b.N) {
		b.Fatalf("%d usage queries for %d turns: the quotas were not checked before each turn", n, b.N)
	}
}

// countedUsage counts the usage queries made of log.
type countedUsage struct {
	log quota.UsageLog
	n   atomic.Int64
}

func (c *countedUsage) Usage(ctx context.Context, f store.UsageFilter) ([]store.UsageRow, error) {
	c.n.Add(1)
	return c.log.Usage(ctx, f)
}

func benchTurns(b *testing.B, h *harness) {
	h.llm.SetHandler(llm.Generator(llm.Generate{Tokens: 100, ToolShare: 0.25}))
	var seq atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			n := seq.Add(1)
			user := strconv.FormatInt(n%64, 10)
			out := &recResponder{stream: true}
			h.p.Handle(b.Context(), privateMsg(user, strconv.FormatInt(n, 10), "hello"), out)
			if final, ok := out.Reply(0).Final(); !ok || final == "" {
				b.Fatalf("turn %d: no answer", n)
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(h.llm.RequestCount())/float64(b.N), "model_calls/turn")
}

func newBenchHarness(b *testing.B, opts Options) *harness {
	opts.Queue.Settle, opts.Queue.Size = -1, 1000
	h := newHarness(b, opts)
	h.p.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	return h
}
