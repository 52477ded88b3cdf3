package telegram

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"

	"relaybot/adapters"
	tk "relaybot/internal/testkit/telegram"
	"relaybot/internal/testkit/wait"
)

// asking is a Handler that hands every message's Responder to the test.
type asking struct{ outs chan adapters.Responder }

func (h asking) Handle(ctx context.Context, _ adapters.Inbound, out adapters.Responder) {
	h.outs <- out
	<-ctx.Done() // the turn lasts as long as the test's adapter runs
}

func (h asking) next(t *testing.T) adapters.Asker {
	t.Helper()
	select {
	case out := <-h.outs:
		a, ok := out.(adapters.Asker)
		if !ok {
			t.Fatal("the responder of a message cannot ask questions")
		}
		return a
	case <-t.Context().Done():
		t.Fatal("no message reached the handler")
		return nil
	}
}

var approveOrDeny = adapters.Question{Text: "Run echo?", Choices: []adapters.Choice{{ID: "approve", Label: "Approve"}, {ID: "deny", Label: "Deny"}}}

func annDecides(a adapters.Answer) (bool, string) {
	if a.UserID != "7" {
		return false, "Only Ann may answer."
	}
	return true, "Run echo? " + a.Choice + "d by " + a.UserName
}

// asked is the result of one Ask.
type asked struct {
	ans adapters.Answer
	err error
}

func ask(ctx context.Context, a adapters.Asker) chan asked {
	done := make(chan asked, 1)
	go func() {
		ans, err := a.Ask(ctx, approveOrDeny, annDecides)
		done <- asked{ans, err}
	}()
	return done
}

// question waits for the question's message with its keyboard and returns it.
func (e *env) question(t *testing.T, chatID int64) tk.Message {
	t.Helper()
	var q tk.Message
	wait.For(t, "the question with its buttons", func() bool {
		for _, m := range e.srv.BotMessages(chatID) {
			if strings.HasPrefix(m.Text, "Run echo?") && len(m.Buttons) == 2 {
				q = m
				return true
			}
		}
		return false
	})
	return q
}

// questions counts the bot's question messages in a chat.
func (e *env) questions(chatID int64) int {
	n := 0
	for _, m := range e.srv.BotMessages(chatID) {
		if strings.HasPrefix(m.Text, "Run echo?") {
			n++
		}
	}
	return n
}

// limited counts the 429s the server answered in a chat.
func (e *env) limited(chatID int64) int {
	n := 0
	for _, c := range e.srv.Calls() {
		if c.ChatID == chatID && c.Code == 429 {
			n++
		}
	}
	return n
}

// press presses the question's button for choice as Ann and waits for Ask's answer.
func (e *env) approve(t *testing.T, q tk.Message, done chan asked) adapters.Answer {
	t.Helper()
	if _, err := e.srv.PressButton(group.ID, q.ID, ann, q.Buttons[0].CallbackData); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatalf("Ask: %v", r.err)
		}
		return r.ans
	case <-t.Context().Done():
		t.Fatal("Ann's approval never reached Ask")
		return adapters.Answer{}
	}
}

// A question asked while the group's budget is spent (three notices in a row) waits for its
// place in the delivery engine's budget instead of drawing a 429, and still works: Ann's
// press approves it and the question shows the decision without its buttons. The test fails
// when the question goes past the engine, as it did through a loop of its own.
func TestAQuestionWaitsForTheChatsBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, tk.Options{InMemory: true}, nil)
		h := asking{outs: make(chan adapters.Responder, 1)}
		defer startRun(t, e.ad, h)()
		e.srv.Send(tk.Inbound{Chat: group, From: ann, Text: "@" + e.srv.BotUsername() + " run echo"})
		asker := h.next(t)
		for _, text := range []string{"one", "two", "three"} {
			if err := asker.(adapters.Responder).Notice(t.Context(), text); err != nil {
				t.Fatal(err)
			}
		}
		done := ask(t.Context(), asker)
		q := e.question(t, group.ID)
		if n := e.limited(group.ID); n != 0 {
			t.Fatalf("the server answered %d requests in the group with 429: the question did not wait for the chat's budget", n)
		}
		if ans := e.approve(t, q, done); ans.Choice != "approve" || ans.UserID != "7" {
			t.Fatalf("Ask = %+v, want Ann's approval", ans)
		}
		wait.For(t, "the decided question", func() bool {
			m := e.srv.BotMessages(group.ID)[3]
			return m.Text == "Run echo? approved by ann" && len(m.Buttons) == 0
		})
		if n := e.limited(group.ID); n != 0 {
			t.Errorf("the server answered %d requests in the group with 429", n)
		}
		wait.For(t, "the press answered through the delivery engine", func() bool { return e.counters.Snapshot().Interactions == 1 })
	})
}

// A 429 on the question's post, or on the edit that closes it unanswered, is retried once its
// retry_after has passed: the question is posted once and works, or closes as the user would
// expect, without its buttons.
func TestA429OnAQuestionIsRetried(t *testing.T) {
	for _, tc := range []struct {
		name   string
		method string // the request answered with a 429
		close  bool   // the turn ends before anyone answers
	}{
		{"on the post", "sendMessage", false},
		{"on the closing edit", "editMessageText", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t, tk.Options{InMemory: true}, nil)
				h := asking{outs: make(chan adapters.Responder, 1)}
				defer startRun(t, e.ad, h)()
				e.srv.Send(tk.Inbound{Chat: group, From: ann, Text: "@" + e.srv.BotUsername() + " run echo"})
				asker := h.next(t)
				e.srv.AddFault(tk.Fault{Kind: tk.Fault429, Method: tc.method, ChatID: group.ID, RetryAfter: 2})
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				done := ask(ctx, asker)
				q := e.question(t, group.ID)
				if !tc.close {
					if ans := e.approve(t, q, done); ans.Choice != "approve" {
						t.Fatalf("Ask = %+v, want Ann's approval", ans)
					}
				} else {
					cancel()
					if r := <-done; r.err == nil {
						t.Fatalf("Ask = %+v after the turn ended, want the context's error", r.ans)
					}
				}
				want := "Run echo? approved by ann"
				if tc.close {
					want = "Run echo?" + adapters.ClosedText
				}
				wait.For(t, "the question's last text without buttons", func() bool {
					m := e.srv.BotMessages(group.ID)[0]
					return m.Text == want && len(m.Buttons) == 0
				})
				if n := e.questions(group.ID); n != 1 {
					t.Errorf("%d questions posted, want 1", n)
				}
				if n := e.count(tc.method, 429); n != 1 {
					t.Errorf("%d 429s answered to %s, want the one injected", n, tc.method)
				}
				if st := e.counters.Snapshot(); st.RateLimited != 1 {
					t.Errorf("the engine saw %d 429s, want 1", st.RateLimited)
				}
			})
		})
	}
}
