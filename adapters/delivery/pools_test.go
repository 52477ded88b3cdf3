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
	drafts     bool // the chats stream as drafts (private chats); else by a message and its edits

	mu        sync.Mutex
	freeTimes []time.Time // drafts and edits
	paidTimes []time.Time // sends
	limited   int
	maxFree   int                  // the most drafts and edits in any second
	shown     int                  // drafts and edits made
	sentAt    map[string]time.Time // each chat's latest message sent
	firstAt   map[string]time.Time // each chat's first message
	lastAt    map[string]time.Time // each chat's latest message sent or edited
	next      int
}

func newPaidPlatform(drafts bool) *paidPlatform {
	return &paidPlatform{free: 30, paid: 1000, drafts: drafts,
		sentAt: map[string]time.Time{}, firstAt: map[string]time.Time{}, lastAt: map[string]time.Time{}}
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
	now := time.Now()
	p.sentAt[c.ChatID], p.lastAt[c.ChatID] = now, now
	if _, ok := p.firstAt[c.ChatID]; !ok {
		p.firstAt[c.ChatID] = now
	}
	return adapters.MessageRef{Chat: c, ID: strconv.Itoa(p.next)}, nil
}

func (p *paidPlatform) Edit(_ context.Context, msg adapters.MessageRef, _ string) error {
	if err := p.take(false); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lastAt[msg.Chat.ChatID] = time.Now()
	return nil
}

func (p *paidPlatform) SendFiles(context.Context, chat.Ref, []chat.File, string, adapters.SendOptions) (adapters.MessageRef, error) {
	return adapters.MessageRef{}, fmt.Errorf("no files in this test")
}

func (p *paidPlatform) Typing(context.Context, chat.Ref) error { return nil }

func (p *paidPlatform) DraftsIn(chat.Ref) bool { return p.drafts }

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
		p := newPaidPlatform(true)
		e := newPaidEngine(p)
		defer e.Close()
		const chats = 100
		start := time.Now()
		ended := streamAnswers(t, e, chats)

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

func newPaidEngine(p *paidPlatform) *Engine {
	lim := adapters.Limits{MaxLen: 4096, Unit: adapters.UTF16,
		PerChat: adapters.Rate{N: 3, Per: 3 * time.Second}, Global: adapters.Rate{N: 30, Per: time.Second}}
	return New(p, lim, Options{Paid: adapters.Rate{N: 1000, Per: time.Second}})
}

// streamAnswers streams a 2-second answer into each of n chats at once, finishes them all, and
// returns when the answers ended (the finals may come later). Its callers run it inside a
// synctest bubble: its sleeps are the bubble's fake time, not the machine's.
func streamAnswers(t *testing.T, e *Engine, n int) (ended time.Time) {
	var wg sync.WaitGroup
	for i := range n {
		r := e.NewReply(context.Background(), chat.Ref{Platform: "test", ChatID: strconv.Itoa(i + 1)}, adapters.SendOptions{})
		wg.Go(func() {
			text := ""
			for tok := range 40 { // 20 tokens a second
				text += fmt.Sprintf("tok%d ", tok)
				r.Update(text)
				time.Sleep(50 * time.Millisecond)
			}
			if err := r.Finish(context.Background(), text+"end", nil); err != nil {
				t.Error(err)
			}
		})
	}
	time.Sleep(2 * time.Second)
	ended = time.Now()
	wg.Wait()
	return ended
}

// TestGroupsStartOnlyTheMessagesTheFreePoolCanFinish streams 100 group answers at once with
// paid broadcast: each message a preview starts must get its final text by an edit, which only
// the free 30 a second carry. As many groups as those 30 see text early; the others get their
// answer as one paid message; every final arrives within about a second of the answers' end,
// without a 429, instead of 100 final edits queued for over three seconds.
func TestGroupsStartOnlyTheMessagesTheFreePoolCanFinish(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPaidPlatform(false)
		e := newPaidEngine(p)
		defer e.Close()
		const chats = 100
		ended := streamAnswers(t, e, chats)

		p.mu.Lock()
		defer p.mu.Unlock()
		if p.limited != 0 {
			t.Errorf("%d requests were refused with 429", p.limited)
		}
		early := 0
		for _, at := range p.firstAt {
			if at.Before(ended) {
				early++
			}
		}
		if early < 25 {
			t.Errorf("%d of %d groups saw text before the answer ended, want about as many as the free 30 a second finish", early, chats)
		}
		if len(p.lastAt) != chats {
			t.Fatalf("%d of %d groups got their answer", len(p.lastAt), chats)
		}
		var latest time.Duration
		for _, at := range p.lastAt {
			latest = max(latest, at.Sub(ended))
		}
		if latest > 1500*time.Millisecond {
			t.Errorf("the last group got its final text %v after the answer ended: final edits queued in the free 30 a second", latest)
		}
	})
}
