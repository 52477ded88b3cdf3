package delivery

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"relaybot/adapters"
	"relaybot/chat"
)

// nullMessenger answers every request at once, so a benchmark measures the engine alone.
type nullMessenger struct {
	sends, edits atomic.Int64
}

func (m *nullMessenger) Send(_ context.Context, c chat.Ref, _ string, _ adapters.SendOptions) (adapters.MessageRef, error) {
	m.sends.Add(1)
	return adapters.MessageRef{Chat: c, ID: "1"}, nil
}

func (m *nullMessenger) Edit(context.Context, adapters.MessageRef, string) error {
	m.edits.Add(1)
	return nil
}

func (m *nullMessenger) SendFiles(_ context.Context, c chat.Ref, _ []chat.File, _ string, _ adapters.SendOptions) (adapters.MessageRef, error) {
	return adapters.MessageRef{Chat: c, ID: "1"}, nil
}

func (m *nullMessenger) Typing(context.Context, chat.Ref) error { return nil }

// BenchmarkReply streams one 100-token answer per op through the engine (an Update per token,
// then Finish) into 1,000 chats in turn, 64 replies at once, against a platform without limits
// that answers at once: the engine's own CPU and allocations per reply.
//
//	go test ./adapters/delivery -run '^$' -bench Reply -benchmem
func BenchmarkReply(b *testing.B) {
	m := &nullMessenger{}
	e := New(m, adapters.Limits{MaxLen: 4096, Unit: adapters.UTF16}, Options{})
	defer e.Close()
	const tokens = 100
	var seq atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(32) // 64 replies at once on 2 cores
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var text strings.Builder
		for pb.Next() {
			n := seq.Add(1)
			c := chat.Ref{Platform: "bench", ChatID: strconv.FormatInt(n%1000, 10)}
			r := e.NewReply(b.Context(), c, adapters.SendOptions{})
			text.Reset()
			for range tokens {
				text.WriteString("tok ")
				r.Update(text.String())
			}
			if err := r.Finish(b.Context(), text.String(), nil); err != nil {
				b.Fatalf("reply %d: %v", n, err)
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(m.sends.Load()+m.edits.Load())/float64(b.N), "requests/reply")
}
