package discord_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"relaybot/adapters"
	"relaybot/adapters/discord"
	dtk "relaybot/internal/testkit/discord"
)

// BenchmarkStreamedReply streams a 1,500-character answer (60 updates, 25 ms apart, like the
// runner's 8-chunk flushes of a fast model) into 1 or 100 channels at once and reports edits
// per reply, the 429s Discord answered, and the time from the model's last token (Finish) to
// the final text delivered, p50 and p99.
//
//	go test -run '^$' -bench StreamedReply -benchtime 3x ./adapters/discord/
func BenchmarkStreamedReply(b *testing.B) {
	for _, channels := range []int{1, 100} {
		b.Run(fmt.Sprintf("channels=%d", channels), func(b *testing.B) { benchReplies(b, channels) })
	}
}

func benchReplies(b *testing.B, channels int) {
	full := text(1500)
	var (
		mu  sync.Mutex
		lat []time.Duration
	)
	hs := start(b, func(o *discord.Options) {}, func(ctx context.Context, in adapters.Inbound, out adapters.Responder) {
		r := out.NewReply(ctx)
		streamInto(r, full, 25, 25*time.Millisecond)
		t0 := time.Now()
		if err := r.Finish(ctx, full, nil); err != nil {
			b.Errorf("Finish in %s: %v", in.Chat, err)
		}
		d := time.Since(t0)
		mu.Lock()
		lat = append(lat, d)
		mu.Unlock()
	})
	b.ResetTimer()
	for iter := 0; iter < b.N; iter++ {
		for c := 0; c < channels; c++ {
			ch := fmt.Sprintf("7%05d%012d", iter, c)
			if _, err := hs.srv.Post(dtk.UserMessage{ChannelID: ch, AuthorID: userID, Content: "go"}); err != nil {
				b.Fatal(err)
			}
		}
		for c := 0; c < channels; c++ {
			hs.next()
		}
	}
	b.StopTimer()

	replies := b.N * channels
	var edits, limited, sends int
	for _, c := range hs.srv.CallsTo(dtk.RouteCreateMessage, dtk.RouteEditMessage) {
		switch {
		case c.Status == 429:
			limited++
		case c.Route == dtk.RouteEditMessage:
			edits++
		default:
			sends++
		}
	}
	for iter := 0; iter < b.N; iter++ {
		for c := 0; c < channels; c++ {
			ch := fmt.Sprintf("7%05d%012d", iter, c)
			if got := hs.botText(ch); got != full {
				b.Fatalf("channel %s did not get the whole answer", ch)
			}
		}
	}
	slices.Sort(lat)
	pct := func(p float64) float64 {
		return float64(lat[int(p*float64(len(lat)-1))]) / float64(time.Millisecond)
	}
	b.ReportMetric(float64(edits)/float64(replies), "edits/reply")
	b.ReportMetric(float64(sends)/float64(replies), "sends/reply")
	b.ReportMetric(float64(limited), "429s")
	b.ReportMetric(pct(0.50), "final-p50-ms")
	b.ReportMetric(pct(0.99), "final-p99-ms")
}
