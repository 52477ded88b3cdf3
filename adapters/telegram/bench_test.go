package telegram

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"relaybot/adapters"
	"relaybot/chat"
	tk "relaybot/internal/testkit/telegram"
)

// BenchmarkDelivery streams one answer per chat into 1, 100 and 1,000 chats at once against
// the testkit server with Telegram's limits, and reports edits per reply, 429s received and
// the time from the model's last token (the Finish call) to the final text delivered.
//
//	go test ./adapters/telegram -run '^$' -bench Delivery -benchtime 1x -timeout 30m
func BenchmarkDelivery(b *testing.B) {
	for _, chats := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("chats=%d", chats), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				benchOnce(b, chats)
			}
		})
	}
}

func benchOnce(b *testing.B, chats int) {
	b.StopTimer()
	e := newEnv(b, tk.Options{}, nil)
	refs := make([]chat.Ref, chats)
	for i := range refs {
		refs[i] = e.chat(int64(5000+i), 0)
	}
	ctx := context.Background()
	lat := make([]time.Duration, chats)
	var wg sync.WaitGroup
	b.StartTimer()
	start := time.Now()
	for i := range refs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := e.ad.Engine().NewReply(ctx, refs[i], adapters.SendOptions{})
			// 400 tokens at 100 tokens/s: a 4-second answer, an update every 8 tokens.
			final := stream(r, answer(400), 10*time.Millisecond)
			t0 := time.Now()
			if err := r.Finish(ctx, final, nil); err != nil {
				b.Error(err)
			}
			lat[i] = time.Since(t0)
		}()
	}
	wg.Wait()
	total := time.Since(start)
	b.StopTimer()
	slices.Sort(lat)
	st := e.counters.Snapshot()
	b.ReportMetric(float64(st.Edits)/float64(chats), "edits/reply")
	b.ReportMetric(float64(e.count("", 429)), "429s")
	b.ReportMetric(float64(lat[len(lat)/2])/1e6, "final-p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100])/1e6, "final-p99-ms")
	b.ReportMetric(total.Seconds(), "wall-s")
	for i := range refs {
		got := e.botTexts(int64(5000 + i))
		if len(got) == 0 {
			b.Fatalf("chat %d got nothing", i)
		}
	}
	b.StartTimer()
}
