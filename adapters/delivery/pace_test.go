package delivery

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"relaybot/adapters"
	"relaybot/chat"
)

// timedDrafter is a private chat that shows drafts after a round trip of rtt, remembers when
// each was shown, and answers the drafts whose number is in limited with a 429.
type timedDrafter struct {
	recorder
	rtt     time.Duration
	limited map[int]time.Duration // draft number (from 1) → retry_after

	mu     sync.Mutex
	n      int
	drafts []timedDraft
	sends  []timedDraft
}

type timedDraft struct {
	at   time.Time
	text string
}

func (d *timedDrafter) DraftsIn(chat.Ref) bool { return true }

func (d *timedDrafter) Draft(_ context.Context, _ chat.Ref, _ int64, text string, _ bool) error {
	time.Sleep(d.rtt)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.n++
	if ra, ok := d.limited[d.n]; ok {
		return &adapters.RateLimitError{RetryAfter: ra}
	}
	d.drafts = append(d.drafts, timedDraft{time.Now(), text})
	return nil
}

func (d *timedDrafter) Send(ctx context.Context, c chat.Ref, text string, o adapters.SendOptions) (adapters.MessageRef, error) {
	time.Sleep(d.rtt)
	d.mu.Lock()
	d.sends = append(d.sends, timedDraft{time.Now(), text})
	d.mu.Unlock()
	return d.recorder.Send(ctx, c, text, o)
}

// sent returns the messages sent so far.
func (d *timedDrafter) sent() []timedDraft {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.sends)
}

// streamWords updates r with one more word every every, for n words, and returns the text.
func streamWords(r adapters.Reply, n int, every time.Duration) string {
	var b strings.Builder
	for range n {
		b.WriteString("word ")
		r.Update(b.String())
		time.Sleep(every)
	}
	return b.String()
}

// gaps returns the longest and shortest time between consecutive drafts.
func gaps(ds []timedDraft) (longest, shortest time.Duration) {
	shortest = time.Hour
	for i := 1; i < len(ds); i++ {
		g := ds[i].at.Sub(ds[i-1].at)
		longest, shortest = max(longest, g), min(shortest, g)
	}
	return longest, shortest
}

// In a private chat the drafts follow the round trip, not the chat's budget for messages: the
// first words show with the first update, the next draft goes a quarter of a second after the
// one before (never sooner, never much later), each with text that changed, and the final
// message still goes at once when the answer ends (the drafts took none of its budget).
func TestDraftsFollowTheRoundTripNotTheMessageBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &timedDrafter{recorder: recorder{first: make(chan struct{})}, rtt: 30 * time.Millisecond}
		e := New(m, adapters.Limits{MaxLen: 4096, Unit: adapters.UTF16, PerChat: adapters.Rate{N: 3, Per: 3 * time.Second},
			Global: adapters.Rate{N: 30, Per: time.Second}}, Options{})
		defer e.Close()
		c := chat.Ref{Platform: "test", ChatID: "1"}
		r := e.NewReply(context.Background(), c, adapters.SendOptions{})
		start := time.Now()
		text := streamWords(r, 150, 20*time.Millisecond) // 3 s of answer
		end := time.Now()
		if err := r.Finish(context.Background(), text, nil); err != nil {
			t.Fatal(err)
		}
		if len(m.drafts) == 0 || m.drafts[0].at.Sub(start) > m.rtt {
			t.Fatalf("the first words showed %v after the model's first update, want one round trip (%v)", m.drafts[0].at.Sub(start), m.rtt)
		}
		longest, shortest := gaps(m.drafts)
		if shortest < 250*time.Millisecond || longest >= 500*time.Millisecond {
			t.Errorf("drafts came %v to %v apart, want at least 250 ms and under 500 ms", shortest, longest)
		}
		for i := 1; i < len(m.drafts); i++ {
			if m.drafts[i].text == m.drafts[i-1].text {
				t.Errorf("draft %d repeats the text of the one before", i)
			}
		}
		if len(m.sends) != 1 || m.sends[0].text != strings.TrimSpace(text) || m.sends[0].at.Sub(end) > 2*m.rtt {
			t.Errorf("final: %d messages, the last %v after the answer ended; want the whole answer once, after the draft in flight and its own round trip", len(m.sends), m.sends[len(m.sends)-1].at.Sub(end))
		}
	})
}

// A 429 on a draft is waited out, widens the chat's draft interval, and loses no text: the next
// draft shows everything the refused one had and more.
func TestA429OnADraftWidensThePaceAndLosesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &timedDrafter{recorder: recorder{first: make(chan struct{})}, rtt: 10 * time.Millisecond,
			limited: map[int]time.Duration{3: time.Second}}
		e := New(m, adapters.Limits{MaxLen: 4096, Unit: adapters.UTF16, PerChat: adapters.Rate{N: 3, Per: 3 * time.Second}}, Options{})
		defer e.Close()
		c := chat.Ref{Platform: "test", ChatID: "1"}
		r := e.NewReply(context.Background(), c, adapters.SendOptions{})
		var refusedAt time.Time
		var refused string
		var b strings.Builder
		for range 200 {
			b.WriteString("word ")
			r.Update(b.String())
			time.Sleep(20 * time.Millisecond)
			m.mu.Lock()
			if m.n >= 3 && refusedAt.IsZero() {
				refusedAt, refused = time.Now(), b.String()
			}
			m.mu.Unlock()
		}
		if err := r.Finish(context.Background(), b.String(), nil); err != nil {
			t.Fatal(err)
		}
		if got := e.DraftInterval(c); got != 500*time.Millisecond {
			t.Errorf("draft interval after a 429: %v, want 500ms", got)
		}
		if len(m.drafts) < 4 {
			t.Fatalf("only %d drafts shown", len(m.drafts))
		}
		after := m.drafts[2] // the first shown after the refused third
		if after.at.Sub(refusedAt) < time.Second-40*time.Millisecond {
			t.Errorf("a draft went %v after the 429, want its retry_after (1s) waited out", after.at.Sub(refusedAt))
		}
		if !strings.HasPrefix(after.text, strings.TrimSpace(refused[:len(refused)-len("word ")])) {
			t.Errorf("the draft after the 429 lost text: %d characters, the refused one had about %d", len(after.text), len(refused))
		}
		_, shortest := gaps(m.drafts[2:])
		if shortest < 500*time.Millisecond {
			t.Errorf("drafts after the 429 came %v apart, want the widened 500 ms", shortest)
		}
		if len(m.sends) != 1 || m.sends[0].text != strings.TrimSpace(b.String()) {
			t.Errorf("the answer arrived as %d messages (%d of %d characters first), want it whole and once", len(m.sends), len(m.sends[0].text), b.Len())
		}
	})
}

// In a chat that streams by edits the first words go out as a message the moment they come when
// the chat's budget has room; when it has none (three messages just sent in a chat of three in
// three seconds), they wait for the budget as before: the first text costs no request the
// budget could not take.
func TestTheFirstWordsGoAtOnceOnlyWhereTheBudgetHasRoom(t *testing.T) {
	for _, full := range []bool{false, true} {
		name := map[bool]string{false: "room", true: "no room"}[full]
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := &timedDrafter{recorder: recorder{first: make(chan struct{})}}
				e := New(edits{m}, adapters.Limits{MaxLen: 4096, Unit: adapters.UTF16, PerChat: adapters.Rate{N: 3, Per: 3 * time.Second}}, Options{})
				defer e.Close()
				c := chat.Ref{Platform: "test", ChatID: "1"}
				if full {
					for range 3 {
						if err := e.NewReply(context.Background(), c, adapters.SendOptions{}).Finish(context.Background(), "earlier", nil); err != nil {
							t.Fatal(err)
						}
					}
				}
				r := e.NewReply(context.Background(), c, adapters.SendOptions{})
				before := len(m.sent())
				start := time.Now()
				r.Update("The first words")
				synctest.Wait()
				sentNow := len(m.sent()) > before
				if sentNow == full {
					t.Fatalf("with %s in the chat's budget the first words went out at once: %v", name, sentNow)
				}
				if full {
					time.Sleep(4 * time.Second)
					sends := m.sent()
					if len(sends) == before {
						t.Fatal("the first words never went out")
					}
					if d := sends[before].at.Sub(start); d < 3*time.Second {
						t.Errorf("the first words went out %v after they came, want once the budget had room (3 s)", d)
					}
				}
				if err := r.Finish(context.Background(), "The first words and the rest", nil); err != nil {
					t.Fatal(err)
				}
			})
		})
	}
}

// edits is a chat that streams by edits (no drafts).
type edits struct{ *timedDrafter }

func (edits) DraftsIn(chat.Ref) bool { return false }

// chatDrafter records which chat each draft went to.
type chatDrafter struct {
	recorder
	mu    sync.Mutex
	chats []string
}

func (d *chatDrafter) DraftsIn(chat.Ref) bool { return true }

func (d *chatDrafter) Draft(_ context.Context, c chat.Ref, _ int64, _ string, _ bool) error {
	d.mu.Lock()
	d.chats = append(d.chats, c.ChatID)
	d.mu.Unlock()
	return nil
}

// When the bot-wide pool is busy with the drafts of answers under way, a new answer's first
// words go next, before the drafts that were waiting longer: at 50 private chats, drafts in
// arrival order held a new answer's first text behind one draft of every other chat.
func TestANewAnswersFirstWordsGoBeforeTheDraftsOfOthers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &chatDrafter{recorder: recorder{first: make(chan struct{})}}
		e := New(m, adapters.Limits{MaxLen: 4096, Unit: adapters.UTF16, Global: adapters.Rate{N: 3, Per: time.Second}}, Options{})
		defer e.Close()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var replies []adapters.Reply
		for i := range 4 {
			replies = append(replies, e.NewReply(ctx, chat.Ref{Platform: "test", ChatID: fmt.Sprint(i)}, adapters.SendOptions{}))
		}
		text := "word"
		more := func(n int) {
			for range n {
				text += " word"
				for _, r := range replies {
					r.Update(text)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
		more(40) // every chat has shown its first words and waits with more
		m.mu.Lock()
		before := len(m.chats)
		shown := map[string]bool{}
		for _, c := range m.chats {
			shown[c] = true
		}
		m.mu.Unlock()
		if len(shown) != len(replies) {
			t.Fatalf("only chats %v showed drafts: the test needs every answer under way", shown)
		}
		late := e.NewReply(ctx, chat.Ref{Platform: "test", ChatID: "new"}, adapters.SendOptions{})
		late.Update("The first words")
		more(20)
		m.mu.Lock()
		next := slices.Clone(m.chats[before:])
		m.mu.Unlock()
		if len(next) == 0 || next[0] != "new" {
			t.Errorf("drafts after the new answer began went to chats %v; want its first words first", next)
		}
	})
}
