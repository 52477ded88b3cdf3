package delivery

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"relaybot/adapters"
	"relaybot/chat"
)

// typingCounter is a recorder that counts typing indicators.
type typingCounter struct {
	recorder
	typing atomic.Int32
}

func (m *typingCounter) Typing(context.Context, chat.Ref) error {
	m.typing.Add(1)
	return nil
}

// Working(true) while the indicator already shows (the pipeline calls it for every tool that
// starts) must not send it again: only the renewal interval or an off-then-on change does.
func TestWorkingRepeatsDoNotResendTyping(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &typingCounter{recorder: recorder{first: make(chan struct{})}}
		e := New(m, adapters.Limits{MaxLen: 100}, Options{TypingInterval: time.Hour})
		defer e.Close()
		r := e.NewReply(context.Background(), chat.Ref{Platform: "test", ChatID: "1"}, adapters.SendOptions{})
		r.Working(true)
		synctest.Wait()
		if n := m.typing.Load(); n != 1 {
			t.Fatalf("%d typing requests after Working(true), want 1", n)
		}
		for range 5 {
			r.Working(true)
		}
		time.Sleep(time.Minute) // well short of the renewal interval
		synctest.Wait()
		if n := m.typing.Load(); n != 1 {
			t.Fatalf("%d typing requests for one stretch of work, want 1", n)
		}
		// Off and on again (text was shown in between) shows it again.
		r.Working(false)
		r.Working(true)
		synctest.Wait()
		if n := m.typing.Load(); n != 2 {
			t.Fatalf("%d typing requests after off and on again, want 2", n)
		}
		if err := r.Finish(context.Background(), "done", nil); err != nil {
			t.Fatal(err)
		}
	})
}

// gatedSend is a recorder whose first Send waits until released, so a preview can be in
// flight while the reply finishes.
type gatedSend struct {
	recorder
	entered, release chan struct{}
	once             sync.Once
}

func (m *gatedSend) Send(ctx context.Context, chat chat.Ref, text string, o adapters.SendOptions) (adapters.MessageRef, error) {
	m.once.Do(func() {
		close(m.entered)
		<-m.release
	})
	return m.recorder.Send(ctx, chat, text, o)
}

// Finish while the first preview is still being sent: the final text goes into that message
// (no second message), later Updates and a second Finish send nothing.
func TestFinishWhilePreviewInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &gatedSend{recorder: recorder{first: make(chan struct{})}, entered: make(chan struct{}), release: make(chan struct{})}
		e := New(m, adapters.Limits{MaxLen: 100}, Options{})
		r := e.NewReply(context.Background(), chat.Ref{Platform: "test", ChatID: "1"}, adapters.SendOptions{})
		r.Update("hello")
		<-m.entered
		done := make(chan error, 1)
		go func() { done <- r.Finish(context.Background(), "hello world", nil) }()
		synctest.Wait() // Finish is waiting for the preview in flight
		select {
		case err := <-done:
			t.Fatalf("Finish returned (%v) while the first preview was still being sent", err)
		default:
		}
		r.Update("hello wor") // an Update racing with the Finish: it must not win
		close(m.release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		r.Update("after the end")
		if err := r.Finish(context.Background(), "again", nil); err == nil {
			t.Error("a second Finish succeeded")
		}
		e.Close()
		lines := m.lines()
		sends := 0
		for _, l := range lines {
			if strings.HasPrefix(l, "send ") {
				sends++
			}
		}
		if sends != 1 || lines[len(lines)-1] != "edit m1 hello world" {
			t.Fatalf("requests %q, want one send and the final text edited into it last", lines)
		}
	})
}

// Close while replies still stream (a shutdown): Updates and Working calls racing with Close
// start no goroutine Close does not wait for. Run with -race, which reports the WaitGroup
// misuse this used to be.
func TestCloseWhileStreaming(t *testing.T) {
	for range 300 {
		m := &typingCounter{recorder: recorder{first: make(chan struct{})}}
		e := New(m, adapters.Limits{MaxLen: 100}, Options{})
		r := e.NewReply(context.Background(), chat.Ref{Platform: "test", ChatID: "1"}, adapters.SendOptions{})
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			r.Update("partial")
			r.Working(true)
		}()
		go func() {
			defer wg.Done()
			e.Close()
		}()
		wg.Wait()
		e.Close()
		// Once Close has returned, nothing is started any more.
		r.Update("after close")
		r.Working(false)
		r.Working(true)
		r.mu.Lock()
		started := r.running || r.typingRunning
		r.mu.Unlock()
		if started {
			t.Fatal("a delivery goroutine started after Close")
		}
	}
}

// A long answer streamed at a steady pace reaches its final text in one request, however its
// length falls: a part about to outgrow its message by the next preview is finished early, so
// the model's end never finds two messages behind (the second request would wait up to a
// whole preview interval for the chat's budget).
func TestFinalTextOfARollingAnswerTakesOneRequest(t *testing.T) {
	for total := 2000; total <= 3400; total += 70 {
		t.Run(fmt.Sprint(total), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := &recorder{first: make(chan struct{})}
				e := New(m, adapters.Limits{MaxLen: 1000, Unit: adapters.Runes, PerChat: adapters.Rate{N: 3, Per: 3 * time.Second}}, Options{})
				defer e.Close()
				r := e.NewReply(context.Background(), chat.Ref{Platform: "test", ChatID: "1"}, adapters.SendOptions{})
				var b strings.Builder
				for b.Len() < total {
					b.WriteString("word word word word word word ") // 30 characters every 100 ms
					r.Update(b.String())
					time.Sleep(100 * time.Millisecond)
				}
				synctest.Wait()
				before := len(m.lines())
				if err := r.Finish(context.Background(), b.String(), nil); err != nil {
					t.Fatal(err)
				}
				if n := len(m.lines()) - before; n > 1 {
					t.Errorf("the final text took %d requests after the model ended: %q", n, m.lines()[before:])
				}
				var words []string
				for _, l := range m.lines() {
					words = append(words, strings.Fields(l)...)
				}
				if strings.Count(strings.Join(words, " "), "word") < strings.Count(b.String(), "word") {
					t.Error("words are missing from what was sent")
				}
			})
		})
	}
}

// A preview waiting for its chat's next slot when the answer ends: the final text replaces
// it (the waiting preview is never sent), and the chat's next answer still gets its slots.
func TestFinishWhileAPreviewWaitsForItsSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &recorder{first: make(chan struct{})}
		e := New(m, adapters.Limits{MaxLen: 100, PerChat: adapters.Rate{N: 1, Per: time.Second}}, Options{})
		defer e.Close()
		c := chat.Ref{Platform: "test", ChatID: "1"}
		r := e.NewReply(context.Background(), c, adapters.SendOptions{})
		r.Update("one")
		synctest.Wait()
		r.Update("one two") // the chat's slot is spent: this preview waits
		synctest.Wait()
		if err := r.Finish(context.Background(), "one two three", nil); err != nil {
			t.Fatal(err)
		}
		next := e.NewReply(context.Background(), c, adapters.SendOptions{})
		if err := next.Finish(context.Background(), "second answer", nil); err != nil {
			t.Fatal(err)
		}
		want := []string{"send one", "edit m1 one two three", "send second answer"}
		if got := m.lines(); !slices.Equal(got, want) {
			t.Fatalf("requests %q, want %q", got, want)
		}
	})
}

// The typing indicator counts against the bot's global limit (Discord counts every request): it
// is shown only when the global window has a place free at once, never makes an answer wait, and
// does not hold back the first preview that follows it.
func TestTypingTakesAFreeGlobalPlaceOrIsSkipped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &typingCounter{recorder: recorder{first: make(chan struct{})}}
		e := New(m, adapters.Limits{MaxLen: 100, Global: adapters.Rate{N: 4, Per: time.Second}}, Options{TypingInterval: time.Hour})
		defer e.Close()
		ctx := context.Background()
		chatN := func(i int) chat.Ref { return chat.Ref{Platform: "test", ChatID: fmt.Sprint(i)} }
		// Four answers fill the bot's window for a second.
		for i := range 4 {
			if err := e.NewReply(ctx, chatN(i), adapters.SendOptions{}).Finish(ctx, "answer", nil); err != nil {
				t.Fatal(err)
			}
		}
		busy := e.NewReply(ctx, chatN(10), adapters.SendOptions{})
		busy.Working(true)
		synctest.Wait()
		if n := m.typing.Load(); n != 0 {
			t.Fatalf("%d typing requests with the bot's window full, want none (it would draw a 429)", n)
		}
		if err := busy.Finish(ctx, "done", nil); err != nil {
			t.Fatal(err)
		}

		time.Sleep(5 * time.Second) // the window drains
		r := e.NewReply(ctx, chatN(11), adapters.SendOptions{})
		r.Working(true)
		synctest.Wait()
		if n := m.typing.Load(); n != 1 {
			t.Fatalf("%d typing requests with the window free, want 1", n)
		}
		sent := time.Now()
		r.Update("First words")
		synctest.Wait()
		if !slices.ContainsFunc(m.lines(), func(l string) bool { return strings.HasPrefix(l, "send First words") }) || time.Since(sent) != 0 {
			t.Fatalf("the first preview after the typing indicator: %q after %v, want it sent at once", m.lines(), time.Since(sent))
		}
		if err := r.Finish(ctx, "First words, then more.", nil); err != nil {
			t.Fatal(err)
		}
	})
}
