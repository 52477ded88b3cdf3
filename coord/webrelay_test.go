package coord

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"relaybot/internal/testkit/wait"
)

// relayed collects what a relay's listener hands over, in order.
type relayed struct {
	mu     sync.Mutex
	events []string // "" for a page opened elsewhere
	chats  []string
}

func (r *relayed) add(chatID string, event []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.chats = append(r.chats, chatID)
	r.events = append(r.events, string(event))
}

func (r *relayed) all() ([]string, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.chats...), append([]string(nil), r.events...)
}

// listening starts rel's listener into a fresh relayed until the test ends and waits until
// it listens.
func listening(t testing.TB, rel *WebRelay) *relayed {
	t.Helper()
	got := &relayed{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		rel.Listen(ctx, got.add)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	wait.For(t, "the relay to listen", func() bool {
		rel.mu.Lock()
		defer rel.mu.Unlock()
		return rel.listening
	})
	return got
}

// eventOfNote returns a JSON event whose notification from rel about chatID is size bytes.
func eventOfNote(t *testing.T, rel *WebRelay, chatID string, size int, fill byte) []byte {
	t.Helper()
	empty, err := rel.note(webEvent, chatID, []byte(`{"text":""}`))
	if err != nil {
		t.Fatal(err)
	}
	n := size - len(empty)
	if n < 0 {
		t.Fatalf("a note of %d bytes cannot carry an event", size)
	}
	return []byte(`{"text":"` + strings.Repeat(string(fill), n) + `"}`)
}

// TestWebEventsOfEverySizeArriveWholeAndInOrder publishes, through one replica, events of a chat
// whose page is open on another: small ones, ones whose notification is just under, at and
// over PostgreSQL's 8000-byte payload limit, and ones far larger; each arrives whole, in the
// order sent. A chat nobody has open elsewhere is not relayed.
func TestWebEventsOfEverySizeArriveWholeAndInOrder(t *testing.T) {
	st, _ := pgStore(t, "")
	db := pool(t, st)
	joinAs(t, db, "page-replica")
	joinAs(t, db, "turn-replica")
	page := NewWebRelay(db, "page-replica", nil)
	turn := NewWebRelay(db, "turn-replica", nil)
	got := listening(t, page)
	listening(t, turn)
	ctx := context.Background()
	unwatch, err := page.Watch(ctx, "chat-1")
	if err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the open page to be recorded", func() bool {
		open, err := turn.openElsewhere(ctx, "chat-1")
		return err == nil && open
	})

	var want []string
	for i, size := range []int{100, maxNotify - 1, maxNotify, maxNotify + 1, 8000, 20_000, 300_000, 200} {
		ev := eventOfNote(t, turn, "chat-1", size, byte('a'+i))
		if err := turn.Publish(ctx, "chat-1", ev); err != nil {
			t.Fatalf("publish an event whose note is %d bytes: %v", size, err)
		}
		want = append(want, string(ev))
		// Not open anywhere else: never reaches the page's replica.
		if err := turn.Publish(ctx, "chat-2", []byte(`{"text":"elsewhere"}`)); err != nil {
			t.Fatal(err)
		}
	}
	wait.For(t, "every event to arrive", func() bool {
		_, evs := got.all()
		return len(evs) >= len(want)
	})
	chats, evs := got.all()
	if len(evs) != len(want) {
		t.Fatalf("the page's replica relayed %d events, want %d", len(evs), len(want))
	}
	for i := range want {
		if chats[i] != "chat-1" || evs[i] != want[i] {
			t.Errorf("event %d arrived as %d bytes of chat %q, want %d bytes of chat-1 (%.40q…)", i, len(evs[i]), chats[i], len(want[i]), evs[i])
		}
	}
	var large int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM web_relay_events`).Scan(&large); err != nil || large != 4 {
		t.Errorf("web_relay_events holds %d events (%v), want the 4 too large for a notification", large, err)
	}

	unwatch()
	wait.For(t, "the replica running turns to learn the page closed", func() bool {
		open, err := turn.openElsewhere(ctx, "chat-1")
		return err == nil && !open
	})
}

// TestAPageOpenedElsewhereIsTold: a replica opening its first page of a chat tells the others
// (nil event), and not itself.
func TestAPageOpenedElsewhereIsTold(t *testing.T) {
	st, _ := pgStore(t, "")
	db := pool(t, st)
	joinAs(t, db, "one")
	joinAs(t, db, "two")
	one, two := NewWebRelay(db, "one", nil), NewWebRelay(db, "two", nil)
	gotOne := listening(t, one)
	gotTwo := listening(t, two)
	ctx := context.Background()
	if _, err := one.Watch(ctx, "chat-9"); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the other replica to hear of the page", func() bool {
		_, evs := gotTwo.all()
		return len(evs) >= 1
	})
	chats, evs := gotTwo.all()
	if fmt.Sprint(chats) != "[chat-9]" || evs[0] != "" {
		t.Errorf("the other replica relayed %q for chats %q, want the page opened", evs, chats)
	}
	if _, evs := gotOne.all(); len(evs) != 0 {
		t.Errorf("the publishing replica relayed its own notifications: %q", evs)
	}
}

// BenchmarkWebRelayPublish measures what one change of a web chat costs the replica running
// its turn: with no page of the chat open on another replica (nothing but memory), with one
// open (a NOTIFY), and with one open and an event too large for a notification (a row and a
// NOTIFY).
func BenchmarkWebRelayPublish(b *testing.B) {
	st, _ := pgStore(b, "")
	db := pool(b, st)
	joinAs(b, db, "page-replica")
	joinAs(b, db, "turn-replica")
	page := NewWebRelay(db, "page-replica", nil)
	turn := NewWebRelay(db, "turn-replica", nil)
	listening(b, page)
	listening(b, turn)
	ctx := context.Background()
	if _, err := page.Watch(ctx, "watched"); err != nil {
		b.Fatal(err)
	}
	small := []byte(`{"m":{"id":"m1","role":"bot","text":"` + strings.Repeat("x", 400) + `"}}`)
	large := []byte(`{"m":{"id":"m1","role":"bot","text":"` + strings.Repeat("x", 20_000) + `"}}`)
	for _, bc := range []struct {
		name  string
		chat  string
		event []byte
	}{
		{"no page elsewhere", "alone", small},
		{"page elsewhere/400 B", "watched", small},
		{"page elsewhere/20 kB", "watched", large},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if err := turn.Publish(ctx, bc.chat, bc.event); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
