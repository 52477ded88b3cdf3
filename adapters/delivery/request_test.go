package delivery

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"relaybot/adapters"
	"relaybot/chat"
)

// platform is a chat platform that paces like the real ones: at most rate requests in any span
// of rate.Per per chat, and a 429 with retry_after to the request over it, as Telegram and
// Discord answer. It records every request and every 429 it answered.
type platform struct {
	rate adapters.Rate

	mu     sync.Mutex
	hist   map[string][]time.Time
	calls  []string
	limits int     // 429s answered
	script []error // answers to give before pacing, in order (a 429 the platform holds for reasons of its own)
	at     []time.Time
}

func newPlatform(rate adapters.Rate) *platform {
	return &platform{rate: rate, hist: map[string][]time.Time{}}
}

// request is one request in chat c, named what.
func (p *platform) request(c chat.Ref, what string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	p.calls = append(p.calls, what)
	p.at = append(p.at, now)
	if len(p.script) > 0 {
		err := p.script[0]
		p.script = p.script[1:]
		if err != nil {
			p.limits++
			return err
		}
	}
	if p.rate.N <= 0 {
		return nil
	}
	k := c.String()
	var keep []time.Time
	for _, t := range p.hist[k] {
		if now.Sub(t) < p.rate.Per {
			keep = append(keep, t)
		}
	}
	if len(keep) >= p.rate.N {
		p.hist[k] = keep
		p.limits++
		return &adapters.RateLimitError{RetryAfter: keep[0].Add(p.rate.Per).Sub(now), Err: errors.New("429 Too Many Requests")}
	}
	p.hist[k] = append(keep, now)
	return nil
}

func (p *platform) stats() (calls []string, limits int, at []time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.calls...), p.limits, append([]time.Time(nil), p.at...)
}

// platformMessenger sends a reply's messages to a platform.
type platformMessenger struct {
	p *platform
	n sync.Mutex
	i int
}

func (m *platformMessenger) Send(_ context.Context, c chat.Ref, text string, _ adapters.SendOptions) (adapters.MessageRef, error) {
	if err := m.p.request(c, "send "+text); err != nil {
		return adapters.MessageRef{}, err
	}
	m.n.Lock()
	defer m.n.Unlock()
	m.i++
	return adapters.MessageRef{Chat: c, ID: fmt.Sprint("m", m.i)}, nil
}

func (m *platformMessenger) Edit(_ context.Context, msg adapters.MessageRef, text string) error {
	return m.p.request(msg.Chat, "edit "+msg.ID+" "+text)
}

func (m *platformMessenger) SendFiles(_ context.Context, c chat.Ref, _ []chat.File, caption string, _ adapters.SendOptions) (adapters.MessageRef, error) {
	return adapters.MessageRef{}, m.p.request(c, "files "+caption)
}

func (m *platformMessenger) Typing(context.Context, chat.Ref) error { return nil }

var busyChat = chat.Ref{Platform: "test", ChatID: "-7"}

// A question posted while a reply streams into the same chat and the chat's budget is spent
// waits for its place in the budget: the platform answers no request of either with a 429,
// and the question goes out ahead of the previews waiting with it.
func TestAQuestionWaitsForItsTurnInTheChatsBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rate := adapters.Rate{N: 3, Per: time.Second}
		p := newPlatform(rate)
		e := New(&platformMessenger{p: p}, adapters.Limits{MaxLen: 1000, PerChat: rate}, Options{})
		defer e.Close()
		// Three notices spend the chat's budget; a reply streams behind them.
		for i := range 3 {
			if err := e.Notice(context.Background(), busyChat, fmt.Sprint("notice ", i), adapters.SendOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		r := e.NewReply(context.Background(), busyChat, adapters.SendOptions{})
		text := ""
		for i := range 20 {
			text += fmt.Sprint(" word", i)
			r.Update(text)
		}
		synctest.Wait() // the preview waits for its place
		err := e.Do(context.Background(), Request{Chat: busyChat, Class: ClassMessage, Kind: EventSend,
			Run: func(context.Context) error { return p.request(busyChat, "question") }})
		if err != nil {
			t.Fatalf("question: %v", err)
		}
		if err := r.Finish(context.Background(), text+" end", nil); err != nil {
			t.Fatal(err)
		}
		calls, limits, _ := p.stats()
		if limits != 0 {
			t.Errorf("the platform answered %d requests with 429 %q: the question did not wait for its place in the chat's budget", limits, calls)
		}
		if calls[3] != "question" {
			t.Errorf("requests %q: the question did not go ahead of the waiting preview", calls)
		}
	})
}

// A 429 on a question (a message) or on an interaction's answer is retried once its
// retry_after has passed, and not before; a 429 on a message holds the chat's other messages
// too, as the platform does.
func TestA429IsRetriedAfterItsRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		name  string
		class Class
		// holdsChat: the 429 holds the chat's other messages (a notice right after it waits).
		holdsChat bool
	}{
		{"a question", ClassMessage, true},
		{"an interaction's answer", ClassInteraction, false},
		{"a lookup", ClassBotWide, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := newPlatform(adapters.Rate{})
				p.script = []error{&adapters.RateLimitError{RetryAfter: 2 * time.Second, Err: errors.New("429")}}
				e := New(&platformMessenger{p: p}, adapters.Limits{MaxLen: 1000, PerChat: adapters.Rate{N: 5, Per: time.Second}}, Options{})
				defer e.Close()
				done := make(chan error, 1)
				go func() {
					done <- e.Do(context.Background(), Request{Chat: busyChat, Class: tc.class, Kind: EventInteraction,
						Run: func(context.Context) error { return p.request(busyChat, "answer") }})
				}()
				synctest.Wait() // the 429 came back; the retry waits
				if err := e.Notice(context.Background(), busyChat, "notice", adapters.SendOptions{}); err != nil {
					t.Fatal(err)
				}
				if err := <-done; err != nil {
					t.Fatalf("Do after a 429: %v", err)
				}
				calls, _, at := p.stats()
				retry, notice := -1, -1
				for i, c := range calls {
					switch {
					case c == "answer" && i > 0:
						retry = i
					case c == "send notice":
						notice = i
					}
				}
				if retry < 0 {
					t.Fatalf("requests %q: the rate-limited request was never made again", calls)
				}
				if waited := at[retry].Sub(at[0]); waited < 2*time.Second {
					t.Errorf("retried %s after the 429, before its retry_after of 2s", waited)
				}
				if held := at[notice].Sub(at[0]) >= 2*time.Second; held != tc.holdsChat {
					t.Errorf("the chat's notice went %s after the 429; want it held: %v", at[notice].Sub(at[0]), tc.holdsChat)
				}
			})
		})
	}
}

// busyEngine returns a platform that never refuses and an engine delivering to it whose chat
// busyChat has spent its window (two messages an hour) and half the bot's global window (four
// an hour); the engine is closed when the test ends.
func busyEngine(t *testing.T) (*platform, *Engine) {
	t.Helper()
	p := newPlatform(adapters.Rate{})
	lim := adapters.Limits{MaxLen: 1000, PerChat: adapters.Rate{N: 2, Per: time.Hour}, Global: adapters.Rate{N: 4, Per: time.Hour}}
	e := New(&platformMessenger{p: p}, lim, Options{})
	t.Cleanup(e.Close)
	for i := range 2 {
		if err := e.Notice(context.Background(), busyChat, fmt.Sprint("notice ", i), adapters.SendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return p, e
}

// An answer to an interaction takes no place in the engine's windows: with the chat's window
// full, the chat held by a 429 and the bot's global window full, it goes out at once (Discord
// drops an interaction not answered within 3 s), and it leaves the windows as they were.
func TestAnInteractionIsNotQueuedBehindTheChatsMessages(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, e := busyEngine(t)
		other := chat.Ref{Platform: "test", ChatID: "8"}
		if err := e.Notice(context.Background(), other, "elsewhere", adapters.SendOptions{}); err != nil {
			t.Fatal(err)
		}
		e.sched.block(busyChat, false, time.Hour, poolFree)
		r := e.NewReply(context.Background(), busyChat, adapters.SendOptions{})
		r.Update("a preview waiting for its place")
		synctest.Wait()
		doAtOnce(t, e, p, busyChat, ClassInteraction, 10, "answer")
		// The windows are as full as before: a final message in the other chat still finds
		// the global window's last place.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := e.Notice(ctx, other, "final", adapters.SendOptions{}); err != nil {
			t.Fatalf("a final after the answers: %v (the answers took places in the window)", err)
		}
		ctx, cancel = context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := r.Finish(ctx, "the end", nil); err == nil {
			t.Error("the reply's final went out while the chat was held")
		}
	})
}

// doAtOnce makes n requests of class in chat c, one after another, named what and their
// index, and fails the test unless each succeeds without waiting in the engine (in a synctest
// bubble, where waiting moves the clock).
func doAtOnce(t *testing.T, e *Engine, p *platform, c chat.Ref, class Class, n int, what string) {
	t.Helper()
	start := time.Now()
	for i := range n {
		err := e.Do(context.Background(), Request{Chat: c, Class: class,
			Run: func(context.Context) error { return p.request(c, fmt.Sprint(what, " ", i)) }})
		if err != nil {
			t.Fatalf("%s %d: %v", what, i, err)
		}
	}
	if waited := time.Since(start); waited != 0 {
		t.Fatalf("the %d requests (%s) waited %s behind the chat's messages", n, what, waited)
	}
}

// A request the platform counts against the bot but that is no message in a chat (a Discord
// channel lookup) waits for a place in the bot's global budget and in nothing else: with the
// chat's window full and the chat held by a 429 it goes at once while the global window has
// room, it takes a place there, and once the window is full the next one waits, as a request
// made with Place does.
func TestABotWideRequestWaitsForTheGlobalBudgetOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, e := busyEngine(t)
		e.sched.block(busyChat, false, time.Hour, poolFree)
		bot := chat.Ref{Platform: "test"}
		doAtOnce(t, e, p, bot, ClassBotWide, 2, "lookup")
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		err := e.Do(ctx, Request{Chat: bot, Class: ClassBotWide, Kind: EventLookup,
			Run: func(context.Context) error { return p.request(bot, "lookup over the budget") }})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("a lookup with the global window full: %v, want it to wait (until its deadline)", err)
		}
		if _, err := e.Place(ctx, bot, ClassBotWide); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Place with the global window full: %v, want it to wait (until its deadline)", err)
		}
		if calls, _, _ := p.stats(); len(calls) != 4 {
			t.Errorf("requests %q, want the two notices and the two lookups within the global budget", calls)
		}
	})
}

// A 429 whose wait outlasts the request's deadline (an interaction's 3 s) is returned at once:
// no retry could follow it in time.
func TestA429PastTheDeadlineIsReturnedAtOnce(t *testing.T) {
	for _, class := range []Class{ClassMessage, ClassInteraction, ClassBotWide} {
		t.Run(fmt.Sprint("class ", class), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := newPlatform(adapters.Rate{})
				p.script = []error{&adapters.RateLimitError{RetryAfter: 5 * time.Second, Err: errors.New("429")}}
				e := New(&platformMessenger{p: p}, adapters.Limits{MaxLen: 1000}, Options{})
				defer e.Close()
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				defer cancel()
				start := time.Now()
				err := e.Do(ctx, Request{Chat: busyChat, Class: class, Run: func(context.Context) error { return p.request(busyChat, "answer") }})
				var rl *adapters.RateLimitError
				if !errors.As(err, &rl) {
					t.Fatalf("Do = %v, want the 429", err)
				}
				if waited := time.Since(start); waited != 0 {
					t.Errorf("waited %s for a retry that could not be made", waited)
				}
				if calls, _, _ := p.stats(); len(calls) != 1 {
					t.Errorf("requests %q, want the one", calls)
				}
			})
		})
	}
}

// A 429 that says the whole bot is limited, answered to an interaction, holds the bot's
// messages in every chat for its retry_after.
func TestAGlobal429OnAnInteractionHoldsTheBotsMessages(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPlatform(adapters.Rate{})
		p.script = []error{&adapters.RateLimitError{RetryAfter: 2 * time.Second, Global: true, Err: errors.New("429")}}
		e := New(&platformMessenger{p: p}, adapters.Limits{MaxLen: 1000, Global: adapters.Rate{N: 50, Per: time.Second}}, Options{})
		defer e.Close()
		done := make(chan error, 1)
		go func() {
			done <- e.Do(context.Background(), Request{Chat: busyChat, Class: ClassInteraction, Run: func(context.Context) error { return p.request(busyChat, "answer") }})
		}()
		synctest.Wait() // the 429 came back
		start := time.Now()
		if err := e.Notice(context.Background(), chat.Ref{Platform: "test", ChatID: "8"}, "elsewhere", adapters.SendOptions{}); err != nil {
			t.Fatal(err)
		}
		if waited := time.Since(start); waited < 2*time.Second {
			t.Errorf("a message in another chat went %s after a global 429 of 2s", waited)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}

// A closed engine makes no request of any class.
func TestDoOnAClosedEngineFails(t *testing.T) {
	for _, class := range []Class{ClassMessage, ClassInteraction, ClassBotWide} {
		p := newPlatform(adapters.Rate{})
		e := New(&platformMessenger{p: p}, adapters.Limits{MaxLen: 1000}, Options{})
		e.Close()
		err := e.Do(context.Background(), Request{Chat: busyChat, Class: class, Run: func(context.Context) error { return p.request(busyChat, "late") }})
		if !errors.Is(err, ErrClosed) {
			t.Errorf("class %d: Do = %v, want ErrClosed", class, err)
		}
		if calls, _, _ := p.stats(); len(calls) != 0 {
			t.Errorf("class %d: requests %q after Close", class, calls)
		}
	}
}

// A detached request (a question's post) that has begun runs to its answer when its context
// ends meanwhile, so the caller learns the message it posted; one that has not begun is not
// made.
func TestADetachedRequestRunsToItsAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := New(&platformMessenger{p: newPlatform(adapters.Rate{})}, adapters.Limits{MaxLen: 1000}, Options{})
		defer e.Close()
		ctx, cancel := context.WithCancel(context.Background())
		var cut error
		err := e.Do(ctx, Request{Chat: busyChat, Class: ClassMessage, Detached: true, Run: func(rctx context.Context) error {
			cancel() // the turn ends while the post is on its way
			time.Sleep(time.Second)
			cut = rctx.Err()
			return nil
		}})
		if err != nil || cut != nil {
			t.Fatalf("Do = %v, the try's context ended with %v; want the post to finish", err, cut)
		}
		err = e.Do(ctx, Request{Chat: busyChat, Class: ClassMessage, Detached: true, Run: func(context.Context) error {
			t.Error("a request was made after its context ended")
			return nil
		}})
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Do after the end = %v, want the context's error", err)
		}
	})
}
