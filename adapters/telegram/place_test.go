package telegram

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"relaybot/adapters"
	"relaybot/internal/testkit/logbuf"
	tk "relaybot/internal/testkit/telegram"
)

// memLedger is a deployment's inbound ledger held in memory: the first claim of a key takes it.
type memLedger struct {
	mu    sync.Mutex
	taken map[string]bool
}

func (l *memLedger) Claim(_ context.Context, platform, key string) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.taken == nil {
		l.taken = map[string]bool{}
	}
	if l.taken[platform+" "+key] {
		return false, nil
	}
	l.taken[platform+" "+key] = true
	return true, nil
}

// hookPost is a webhook post of update body, as Telegram sends it.
func hookPost(body string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/tg", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("X-Telegram-Bot-Api-Secret-Token", "s3cret")
	return r
}

// TestAWebhookUpdateIsAnsweredOnceItsMessageHasItsPlace: Telegram posts a chat's next update
// only once the webhook answered this one, and a load balancer may take it to another replica.
// With replicas sharing the bot, the webhook answers a message only once the pipeline says it
// has its place in the deployment's turn queue, so the next one queues behind it; after
// adapters.PlaceWait, or when Telegram gives up on the request, it answers as it did before.
// What takes no place (a repeat, a pressed button, any update of a process alone) is answered
// at once.
func TestAWebhookUpdateIsAnsweredOnceItsMessageHasItsPlace(t *testing.T) {
	const msg = `{"update_id":41,"message":{"message_id":5,"from":{"id":7,"first_name":"Ann"},"chat":{"id":70,"type":"private"},"date":1,"text":"first"}}`
	const press = `{"update_id":42,"callback_query":{"id":"cb1","from":{"id":7,"first_name":"Ann"},"data":"x"}}`
	for _, tt := range []struct {
		name   string
		shared bool   // a Ledger: replicas share the bot
		before string // an update posted (and answered) first
		body   string
		// dispatched: the update reaches the pipeline; held: its answer waits for Placed.
		dispatched, held bool
		// never: nobody calls Placed; cancel: Telegram gives up on the request meanwhile.
		never, cancel bool
	}{
		{name: "a message, replicas sharing the bot", shared: true, body: msg, dispatched: true, held: true},
		{name: "a message nobody places, replicas sharing the bot", shared: true, body: msg, dispatched: true, held: true, never: true},
		{name: "a message whose request Telegram gives up on", shared: true, body: msg, dispatched: true, held: true, never: true, cancel: true},
		{name: "a message, one process", body: msg, dispatched: true},
		{name: "a message posted again", shared: true, before: msg, body: msg},
		{name: "a pressed button", shared: true, body: press},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				logs := &logbuf.Buffer{}
				a := &Adapter{opts: Options{WebhookSecret: "s3cret"}, log: slog.New(slog.NewTextHandler(logs, nil))}
				if tt.shared {
					a.opts.Ledger = &memLedger{}
				}
				places := make(chan func(), 2)
				h := &webhookHandler{a: a, maxBody: 1 << 20, seen: newRecentIDs(16),
					dispatch: func(_ int64, _ *message, _ int, placed func()) { places <- placed },
					act:      func(*update) {}}
				if tt.before != "" {
					rec := httptest.NewRecorder()
					go func() {
						if placed := <-places; placed != nil {
							placed()
						}
					}()
					h.ServeHTTP(rec, hookPost(tt.before))
					synctest.Wait()
				}
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				rec := httptest.NewRecorder()
				answered := make(chan struct{})
				began := time.Now()
				go func() {
					defer close(answered)
					h.ServeHTTP(rec, hookPost(tt.body).WithContext(ctx))
				}()
				synctest.Wait()
				var placed func()
				select {
				case placed = <-places:
					if !tt.dispatched {
						t.Fatal("the update reached the pipeline, want it taken once and not as a message")
					}
				default:
					if tt.dispatched {
						t.Fatal("the message never reached the pipeline")
					}
				}
				select {
				case <-answered:
					if tt.held {
						t.Fatalf("Telegram heard of the update (%d) before its message had its place: the chat's next message may run first", rec.Code)
					}
				default:
					if !tt.held {
						t.Fatal("the webhook holds its answer to an update that takes no place in the turn queue")
					}
					switch {
					case tt.cancel:
						cancel()
					case tt.never:
						time.Sleep(adapters.PlaceWait - time.Millisecond)
						synctest.Wait()
						select {
						case <-answered:
							t.Fatalf("answered after %v, want the whole %v for the message's place", time.Since(began), adapters.PlaceWait)
						default:
						}
					default:
						placed()
					}
					<-answered
				}
				if rec.Code != http.StatusOK {
					t.Fatalf("the webhook answered %d, want 200 (Telegram would send the update again)", rec.Code)
				}
				if warned := strings.Contains(logs.String(), "before its message had its place"); warned != tt.never {
					t.Errorf("warning logged: %v, want %v:\n%s", warned, tt.never, logs)
				}
			})
		})
	}
}

// TestAWebhookWithReplicasAnswersAtOnceWhatTakesNoPlace runs the adapter by webhook with a
// deployment's ledger: an update for nobody (a group message not addressed to the bot) and a
// message whose handler never says it has its place are answered as soon as the adapter knows,
// not after adapters.PlaceWait: Telegram posts the next update at once, and no answer is logged
// as given before its place.
func TestAWebhookWithReplicasAnswersAtOnceWhatTakesNoPlace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, _ := newWebhookEnv(t, func(o *Options) { o.Ledger = &memLedger{} })
		col := newCollector() // never calls Placed
		stop := startRun(t, e.ad, col)
		defer stop()
		e.srv.Send(tk.Inbound{Chat: group, From: ann, Text: "chatting among ourselves"})
		for i := range 3 {
			e.srv.Send(tk.Inbound{Chat: tk.Chat{ID: 71}, From: ann, Text: fmt.Sprintf("question %d", i)})
		}
		for i := range 3 {
			if got := col.next(t); got.Text != fmt.Sprintf("question %d", i) {
				t.Fatalf("handler got %q, want question %d", got.Text, i)
			}
		}
		if strings.Contains(e.logs.String(), "before its message had its place") {
			t.Errorf("an update was held for a place it never takes:\n%s", e.logs)
		}
	})
}
