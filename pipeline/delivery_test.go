package pipeline

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"relaybot/adapters"
	"relaybot/adapters/delivery"
	"relaybot/adapters/delivery/deliverytest"
	"relaybot/adapters/telegram"
	"relaybot/chat"
	"relaybot/internal/testkit/llm"
	tk "relaybot/internal/testkit/telegram"
	"relaybot/internal/testkit/wait"
	"relaybot/pipeline/history"
	"relaybot/store"
)

// retryUnit is one second of retry_after on the test server and in the adapter: 150 units are
// two and a half "minutes" of Telegram time.
const retryUnit = 10 * time.Millisecond

// runTelegram connects a Telegram adapter to srv, runs it with h's pipeline as its handler and
// stops it when the test ends.
func runTelegram(t *testing.T, h *harness, srv *tk.Server, tune func(*telegram.Options)) {
	t.Helper()
	opts := telegram.Options{
		Token:          srv.Token(),
		APIEndpoint:    srv.Endpoint(),
		PollTimeout:    time.Second,
		RetryAfterUnit: retryUnit,
	}
	if tune != nil {
		tune(&opts)
	}
	ad, err := telegram.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ad.Run(ctx, h.p) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("telegram Run: %v", err)
		}
	})
}

// waitTurn waits until turn 1 has ended and returns it.
func waitTurn(t *testing.T, h *harness) store.Turn {
	t.Helper()
	var turn store.Turn
	wait.For(t, "the turn to be saved", func() bool {
		var err error
		turn, err = h.store.Turns.Turn(context.Background(), 1)
		return err == nil && turn.Status != store.TurnRunning
	})
	return turn
}

// A final answer that Telegram holds back with 429s for longer than the turn's own deadline
// (and than a minute of Telegram time) still arrives, and the turn is saved ok.
func TestFinalWaitsOutLongRateLimits(t *testing.T) {
	srv, err := tk.New(tk.Options{RetryAfterUnit: retryUnit})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	h := newHarness(t, Options{Queue: QueueOptions{TurnTimeout: 500 * time.Millisecond}})
	runTelegram(t, h, srv, nil)
	const chatID = 4242
	srv.AddFault(tk.Fault{Kind: tk.Fault429, Method: "sendMessage", ChatID: chatID, RetryAfter: 150})
	h.llm.Push(llm.Reply{Chunks: []llm.Chunk{{Content: "The answer, "}, {Content: "late but whole."}}})
	srv.Send(tk.Inbound{Chat: tk.Chat{ID: chatID, Type: "private"}, From: tk.User{ID: chatID, FirstName: "Ann"}, Text: "question"})

	turn := waitTurn(t, h)
	if turn.Status != store.TurnOK || turn.Error != "" {
		t.Fatalf("turn = %s %q, want ok without error", turn.Status, turn.Error)
	}
	var texts []string
	for _, m := range srv.BotMessages(chatID) {
		texts = append(texts, m.Text)
	}
	if len(texts) != 1 || texts[0] != "The answer, late but whole." {
		t.Fatalf("bot messages = %q, want the whole answer once", texts)
	}
	// The server refuses every sendMessage to the chatID until retry_after is over, so a single
	// 429 before the delivery shows the final waited it out rather than knocking again early.
	var refused, delivered int
	for _, c := range srv.Calls() {
		if c.Method != "sendMessage" || c.ChatID != chatID {
			continue
		}
		switch c.Code {
		case 429:
			refused++
		case 200:
			delivered++
		}
	}
	if refused != 1 || delivered != 1 {
		t.Fatalf("sendMessage refused %d times and delivered %d times, want once each: the final knocked again before retry_after was over", refused, delivered)
	}
}

// A final answer Telegram refuses for good is saved as a failed delivery: status error, the
// delivery error in the turn's error, one finished turn for the metrics and one failed request in
// the delivery engine's events (the failure is counted once, not also by the pipeline).
func TestUndeliverableFinalIsRecorded(t *testing.T) {
	srv, err := tk.New(tk.Options{RetryAfterUnit: retryUnit})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	turns := &turnCounter{}
	h := newHarness(t, Options{Observer: turns})
	events := &deliverytest.Counters{}
	runTelegram(t, h, srv, func(o *telegram.Options) {
		o.Delivery = delivery.Options{Observer: events, Retry: delivery.RetryPolicy{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond}}
	})
	const chatID = 4343
	srv.AddFault(tk.Fault{Kind: tk.Fault5xx, Method: "sendMessage", ChatID: chatID, Times: 1000})
	h.llm.Push(llm.Reply{Chunks: []llm.Chunk{{Content: "Nobody will read this."}}})
	srv.Send(tk.Inbound{Chat: tk.Chat{ID: chatID, Type: "private"}, From: tk.User{ID: chatID, FirstName: "Ann"}, Text: "question"})

	turn := waitTurn(t, h)
	if turn.Status != store.TurnError || !strings.HasPrefix(turn.Error, "delivery failed: ") {
		t.Fatalf("turn = %s %q, want error \"delivery failed: …\"", turn.Status, turn.Error)
	}
	if got := turns.statuses(); len(got) != 1 || got[0] != store.TurnError {
		t.Fatalf("turns observed = %v, want one %s", got, store.TurnError)
	}
	if n := events.Snapshot().Failures; n != 1 {
		t.Fatalf("failed delivery requests observed = %d, want 1", n)
	}
	if got := srv.BotMessages(chatID); len(got) != 0 {
		t.Fatalf("bot messages = %v, want none", got)
	}
	// The model's answer is kept: the conversation's history has it.
	id := strconv.Itoa(chatID)
	msgs := h.history(history.KeyOf(adapters.Inbound{Chat: chat.Ref{Platform: chat.Telegram, ChatID: id}, Kind: adapters.Private, UserID: id}, false))
	if len(msgs) != 2 || msgs[1].Content != "Nobody will read this." {
		t.Fatalf("history = %+v, want the question and the answer", msgs)
	}
}

// At shutdown a final answer Telegram still holds back is given up ShutdownDeliverWait after
// the grace period, and the turn says it was not delivered.
func TestShutdownBoundsHeldFinal(t *testing.T) {
	srv, err := tk.New(tk.Options{RetryAfterUnit: retryUnit})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	h := newHarness(t, Options{ShutdownDeliverWait: 100 * time.Millisecond})
	runTelegram(t, h, srv, nil)
	const chatID = 4444
	// Held back for 10,000 Telegram seconds: far past the grace period.
	srv.AddFault(tk.Fault{Kind: tk.Fault429, Method: "sendMessage", ChatID: chatID, RetryAfter: 10000})
	h.llm.Push(llm.Reply{Chunks: []llm.Chunk{{Content: "Too late."}}})
	srv.Send(tk.Inbound{Chat: tk.Chat{ID: chatID, Type: "private"}, From: tk.User{ID: chatID, FirstName: "Ann"}, Text: "question"})
	wait.For(t, "the final to be held back", func() bool {
		for _, c := range srv.Calls() {
			if c.Method == "sendMessage" && c.ChatID == chatID && c.Code == 429 {
				return true
			}
		}
		return false
	})
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // no grace left
	if err := h.p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	turn := waitTurn(t, h)
	if turn.Status != store.TurnError || !strings.HasPrefix(turn.Error, "delivery failed: ") {
		t.Fatalf("turn = %s %q, want error \"delivery failed: …\"", turn.Status, turn.Error)
	}
}

// turnCounter is a pipeline Observer that keeps the statuses of finished turns.
type turnCounter struct {
	mu   sync.Mutex
	seen []chat.Status
}

func (c *turnCounter) TurnStarted(ctx context.Context, _ TurnStart) context.Context { return ctx }

func (c *turnCounter) TurnFinished(_ context.Context, end *TurnFinish, _ time.Duration) {
	c.mu.Lock()
	c.seen = append(c.seen, end.Status)
	c.mu.Unlock()
}

func (c *turnCounter) statuses() []chat.Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.seen)
}
