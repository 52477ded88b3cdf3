package telegram

import (
	"context"
	"errors"
	"sync"
	"testing"

	"relaybot/adapters"
	"relaybot/chat"
	tk "relaybot/internal/testkit/telegram"
	"relaybot/internal/testkit/wait"
)

// pairBook is the question book two replicas share, in memory: a press one of them carries is
// settled by the question the other opened, as coord.Questions does through the database.
type pairBook struct {
	mu     sync.Mutex
	settle map[string]func(adapters.Press) adapters.Verdict
	down   bool // the asker cannot be reached
}

func (b *pairBook) Open(_ context.Context, q adapters.BookedQuestion, settle func(adapters.Press) adapters.Verdict) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.settle[q.ID] = settle
	return nil
}

func (b *pairBook) Posted(context.Context, string, string) {}

func (b *pairBook) Close(_ context.Context, id string, _ bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.settle, id)
}

func (b *pairBook) Press(_ context.Context, p adapters.Press) (adapters.Verdict, error) {
	b.mu.Lock()
	settle, down := b.settle[p.Question], b.down
	b.mu.Unlock()
	switch {
	case down:
		return adapters.Verdict{}, errors.New("the replica that asked does not answer")
	case settle == nil:
		return adapters.Verdict{Closed: true}, nil
	}
	return settle(p), nil
}

// Presses of a question that another replica's turn asked reach this replica (it polls; the
// asker does not): each is carried to the asker, whose rules decide, and answered here with the
// verdict — a bystander's refusal as an alert (the question keeps its buttons), Ann's approval
// without a word while the asker shows the decision on the question, a press of a question whose
// turn ended as closed, and a press whose asker cannot be reached with a request to press again.
func TestAPressLandingOnAnotherReplicaIsAnsweredWithTheAskersVerdict(t *testing.T) {
	book := &pairBook{settle: map[string]func(adapters.Press) adapters.Verdict{}}
	e := newEnv(t, tk.Options{}, func(o *Options) { o.Questions = book })
	defer startRun(t, e.ad, newCollector())()
	asker, err := New(Options{Token: e.srv.Token(), APIEndpoint: e.srv.Endpoint(), Questions: book, RetryAfterUnit: unit})
	if err != nil {
		t.Fatal(err)
	}
	defer asker.Engine().Close()
	ref := chat.Ref{Platform: chat.Telegram, ChatID: "-100200"}
	e.srv.Send(tk.Inbound{Chat: group, From: ann, Text: "hello"}) // the chat exists on the server
	wait.For(t, "the group to exist", func() bool { return len(e.srv.Calls()) > 0 })
	out := askResponder{a: asker, chat: ref}
	pressed := func(q tk.Message, who tk.User, button int) tk.CallbackAnswer {
		t.Helper()
		id := e.srv.Press(group, who, q.ID, q.Buttons[button].CallbackData)
		var got tk.CallbackAnswer
		wait.For(t, "the press's answer", func() bool {
			var ok bool
			got, ok = e.srv.Answer(id)
			return ok
		})
		return got
	}

	done := ask(t.Context(), out)
	q := e.question(t, group.ID)
	if got := pressed(q, bob, 0); got.Text != "Only Ann may answer." || !got.ShowAlert {
		t.Fatalf("Bob's press answered %+v, want the asker's refusal as an alert", got)
	}
	if got := pressed(q, ann, 0); got.Text != "" {
		t.Fatalf("Ann's press answered %+v, want no text", got)
	}
	if r := <-done; r.err != nil || r.ans.UserID != "7" || r.ans.Choice != "approve" {
		t.Fatalf("Ask = %+v, %v; want Ann's approval", r.ans, r.err)
	}
	wait.For(t, "the asker to show the decision without buttons", func() bool {
		for _, m := range e.srv.BotMessages(group.ID) {
			if m.ID == q.ID {
				return m.Text == "Run echo? approved by ann" && len(m.Buttons) == 0
			}
		}
		return false
	})

	ctx, cancel := context.WithCancel(t.Context())
	done = ask(ctx, out)
	q2 := waitQuestion(t, e, q.ID)
	book.mu.Lock()
	book.down = true
	book.mu.Unlock()
	if got := pressed(q2, ann, 0); got.Text != adapters.UnrelayedPress || !got.ShowAlert {
		t.Fatalf("a press whose asker cannot be reached answered %+v, want a request to press again", got)
	}
	book.mu.Lock()
	book.down = false
	book.mu.Unlock()
	cancel()
	<-done
	if got := pressed(q2, ann, 0); got.Text != adapters.ClosedPress {
		t.Fatalf("a press of a question whose turn ended answered %+v, want %q", got, adapters.ClosedPress)
	}
}

// waitQuestion waits for a question message other than the one with id before.
func waitQuestion(t *testing.T, e *env, before int) tk.Message {
	t.Helper()
	var q tk.Message
	wait.For(t, "the second question with its buttons", func() bool {
		for _, m := range e.srv.BotMessages(group.ID) {
			if m.ID != before && len(m.Buttons) == 2 {
				q = m
				return true
			}
		}
		return false
	})
	return q
}
