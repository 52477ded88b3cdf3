package telegram

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"relaybot/adapters"
	tk "relaybot/internal/testkit/telegram"
)

// streamAsTheRunner feeds toks to r at the runner's cadence, one token per tick: the first
// token at once (it is visible text), then every eighth; it returns the whole text and when
// the first token came.
func streamAsTheRunner(r adapters.Reply, toks []string, tick time.Duration) (text string, first time.Time) {
	var b strings.Builder
	for i, s := range toks {
		if i > 0 {
			time.Sleep(tick)
		}
		b.WriteString(s)
		if i == 0 {
			first = time.Now()
		}
		if i == 0 || (i+1)%8 == 0 {
			r.Update(b.String())
		}
	}
	return b.String(), first
}

// draftTimes returns when each draft with text was shown, and the 429s drafts got.
func draftTimes(calls []tk.Call) (shown []time.Time, limited []time.Time) {
	for _, c := range calls {
		if c.Method != "sendMessageDraft" {
			continue
		}
		switch c.Code {
		case 200:
			shown = append(shown, c.Time)
		case 429:
			limited = append(limited, c.Time)
		}
	}
	return shown, limited
}

// longestGap is the longest time between consecutive times.
func longestGap(ts []time.Time) (longest time.Duration) {
	for i := 1; i < len(ts); i++ {
		longest = max(longest, ts[i].Sub(ts[i-1]))
	}
	return longest
}

// A 9,000-character answer in a private chat, at 5 and 20 ms a token: the first words show as
// a draft the moment the model's first token arrives, the draft moves at least every half
// second without one 429, and the answer arrives whole and once.
func TestPrivateChatDraftsKeepUpWithTheModel(t *testing.T) {
	for _, tick := range []time.Duration{5 * time.Millisecond, 20 * time.Millisecond} {
		t.Run(tick.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t, tk.Options{InMemory: true}, withDrafts)
				chat := e.chat(101, 0)
				ctx := context.Background()
				r := e.ad.Engine().NewReply(ctx, chat, adapters.SendOptions{ReplyTo: "1", Stoppable: true})
				final, first := streamAsTheRunner(r, answer(1200), tick) // about 9,000 characters
				if err := r.Finish(ctx, final, nil); err != nil {
					t.Fatal(err)
				}
				assertWhole(t, e.botTexts(101), final, 2)
				shown, limited := draftTimes(e.srv.Calls())
				if len(shown) == 0 || shown[0].Sub(first) > tick {
					t.Fatalf("the first draft showed %v after the model's first token, want within one token (%v)", shown[0].Sub(first), tick)
				}
				if len(limited) != 0 {
					t.Errorf("%d drafts got a 429", len(limited))
				}
				// The part persisted when it outgrows a message comes between two drafts.
				if g := longestGap(shown); g >= 500*time.Millisecond {
					t.Errorf("the draft stood still for %v while the model wrote, want under 500 ms", g)
				}
				checkBudget(t, e.srv.Calls())
			})
		})
	}
}

// A 429 on a draft is waited out, the chat's drafts go further apart after it, and no text is
// lost: the answer arrives whole and once.
func TestA429OnADraftIsWaitedOutAndSlowsTheDrafts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, tk.Options{InMemory: true}, withDrafts)
		chat := e.chat(101, 0)
		ctx := context.Background()
		r := e.ad.Engine().NewReply(ctx, chat, adapters.SendOptions{ReplyTo: "1", Stoppable: true})
		e.srv.AddFault(tk.Fault{Kind: tk.Fault429, Method: "sendMessageDraft", RetryAfter: 25}) // 25 units: 0.5 s
		final, _ := streamAsTheRunner(r, answer(400), 10*time.Millisecond)
		if err := r.Finish(ctx, final, nil); err != nil {
			t.Fatal(err)
		}
		assertWhole(t, e.botTexts(101), final, 1)
		shown, limited := draftTimes(e.srv.Calls())
		if len(limited) != 1 {
			t.Fatalf("%d drafts got a 429, want the one injected (the wait was not respected)", len(limited))
		}
		var after []time.Time
		for _, s := range shown {
			if s.After(limited[0]) {
				after = append(after, s)
			}
		}
		if len(after) < 3 {
			t.Fatalf("%d drafts after the 429: the answer stopped streaming", len(after))
		}
		if d := after[0].Sub(limited[0]); d < 500*time.Millisecond {
			t.Errorf("the next draft went %v after the 429, want its retry_after (500 ms) waited out", d)
		}
		for i := 1; i < len(after); i++ {
			if g := after[i].Sub(after[i-1]); g < 500*time.Millisecond {
				t.Errorf("drafts after the 429 came %v apart, want the widened interval (500 ms)", g)
			}
		}
		if got := e.ad.Engine().DraftInterval(chat); got != 500*time.Millisecond {
			t.Errorf("draft interval after a 429: %v, want 500ms", got)
		}
	})
}
