package delivery

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"relaybot/adapters"
	"relaybot/chat"
)

// paidPlatform is a platform with a paid broadcast, as Telegram counts it: new messages carry
// paid broadcast and may go up to paid a second; drafts and edits stay within free a second.
// A request over its window is refused with a 429, as the platform does.
type paidPlatform struct {
	free, paid int

	mu        sync.Mutex
	freeTimes []time.Time // drafts and edits
	paidTimes []time.Time // sends
	limited   int
	maxFree   int // the most drafts and edits in any second
	shown     int // drafts and edits made
	sentAt    map[string]time.Time
	next      int
}

func (p *paidPlatform) take(paid bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	times, limit := &p.freeTimes, p.free
	if paid {
		times, limit = &p.paidTimes, p.paid
	}
	i := 0
	for i < len(*times) && now.Sub((*times)[i]) >= time.Second {
		i++
	}
	*times = (*times)[i:]
	if len(*times) >= limit {
		p.limited++
		return &adapters.RateLimitError{RetryAfter: time.Second}
	}
	*times = append(*times, now)
	if !paid {
		p.maxFree = max(p.maxFree, len(*times))
		p.shown++
	}
	return nil
}

func (p *paidPlatform) Send(_ context.Context, c chat.Ref, text string, _ adapters.SendOptions) (adapters.MessageRef, error) {
	if err := p.take(true); err != nil {
		return adapters.MessageRef{}, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.next++
	p.sentAt[c.ChatID] = time.Now()
	return adapters.MessageRef{Chat: c, ID: strconv.Itoa(p.next)}, nil
}

func (p *paidPlatform) Edit(context.Context, adapters.MessageRef, string) error { return p.take(false) }

func (p *paidPlatform) SendFiles(context.Context, chat.Ref, []chat.File, string, adapters.SendOptions) (adapters.MessageRef, error) {
	return adapters.MessageRef{}, fmt.Errorf("no files in this test")
}

func (p *paidPlatform) Typing(context.Context, chat.Ref) error { return nil }

func (p *paidPlatform) DraftsIn(chat.Ref) bool { return true }

func (p *paidPlatform) Draft(context.Context, chat.Ref, int64, string, bool) error {
	return p.take(false)
}

// TestPaidPoolLeavesTheFree30ToPreviews streams 100 private chats' answers at once on a
// platform that takes 30 drafts a second and 1,000 paid sends: the drafts flow at up to the
// free 30 a second (most chats see text before the answer ends) without a 429, and the
// hundred final messages all go out the moment the answers end, on the paid budget, not
// queued behind the previews' 30 a second.
func TestPaidPoolLeavesTheFree30ToPreviews(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &paidPlatform{free: 30, paid: 1000, sentAt: map[string]time.Time{}}
		lim := adapters.Limits{MaxLen: 4096, Unit: adapters.UTF16,
			PerChat: adapters.Rate{N: 3, Per: 3 * time.Second}, Global: adapters.Rate{N: 30, Per: time.Second}}
		e := New(p, lim, Options{Paid: adapters.Rate{N: 1000, Per: time.Second}})
		defer e.Close()
		const chats = 100
		var wg sync.WaitGroup
		for i := range chats {
			r := e.NewReply(context.Background(), chat.Ref{Platform: "test", ChatID: strconv.Itoa(i + 1)}, adapters.SendOptions{})
			wg.Go(func() {
				text := ""
				for tok := range 40 { // a 2-second answer, 20 tokens a second
					text += fmt.Sprintf("tok%d ", tok)
					r.Update(text)
					time.Sleep(50 * time.Millisecond)
				}
				if err := r.Finish(context.Background(), text+"end", nil); err != nil {
					t.Error(err)
				}
			})
		}
		start := time.Now()
		time.Sleep(2 * time.Second)
		ended := time.Now()
		wg.Wait()

		p.mu.Lock()
		defer p.mu.Unlock()
		if p.limited != 0 {
			t.Errorf("%d requests were refused with 429", p.limited)
		}
		if p.maxFree > 30 {
			t.Errorf("%d drafts in one second, over the free 30", p.maxFree)
		}
		if len(p.sentAt) != chats {
			t.Fatalf("%d of %d chats got their final message", len(p.sentAt), chats)
		}
		for c, at := range p.sentAt {
			if late := at.Sub(ended); late > 100*time.Millisecond {
				t.Errorf("chat %s got its final message %v after the answer ended: finals waited behind the previews", c, late)
			}
		}
		if n := p.shown; n < 25*2 { // 2 s of streaming at nearly the free 30 a second
			t.Errorf("%d drafts in %v of streaming, want close to 30 a second: previews are held below the free budget", n, ended.Sub(start))
		}
	})
}
