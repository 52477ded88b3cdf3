package web

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"

	"relaybot/adapters"
	"relaybot/chat"
)

// The web chat spends no platform budget on a preview: each update of the answer reaches the
// page's conversation as it comes, the first one included, with no time passing in between.
func TestEveryPreviewReachesThePageAsItComes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, err := New(Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conv := c.newConv("0123456789abcdef", "secret")
		c.mu.Lock()
		c.admitLocked(conv)
		c.mu.Unlock()
		ctx := context.Background()
		r := c.engine.NewReply(ctx, chat.Ref{Platform: chat.Web, ChatID: conv.id}, adapters.SendOptions{})
		var b strings.Builder
		for i := range 40 {
			b.WriteString("word ")
			r.Update(b.String())
			synctest.Wait() // every goroutine waits: nothing but a timer could still move
			conv.mu.Lock()
			var shown string
			if n := len(conv.msgs); n > 0 {
				shown = conv.msgs[n-1].Text
			}
			conv.mu.Unlock()
			if shown != strings.TrimSpace(b.String()) {
				t.Fatalf("update %d: the page shows %q, want the newest text %q without waiting", i+1, shown, strings.TrimSpace(b.String()))
			}
		}
		if err := r.Finish(ctx, b.String(), nil); err != nil {
			t.Fatal(err)
		}
	})
}
