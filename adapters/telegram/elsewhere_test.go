package telegram

import (
	"context"
	"net/http"
	"testing"
	"testing/synctest"

	"relaybot/adapters"
	"relaybot/adapters/adapterstest"
	"relaybot/chat"
	tk "relaybot/internal/testkit/telegram"
	"relaybot/internal/testkit/wait"
)

// Presses of a question that another replica's turn asked reach this replica (it polls; the
// asker does not): each is carried to the asker, whose rules decide, and answered here with the
// verdict — a bystander's refusal as an alert (the question keeps its buttons), Ann's approval
// without a word while the asker shows the decision on the question, a press of a question whose
// turn ended as closed, and a press whose asker cannot be reached with a request to press again.
func TestAPressLandingOnAnotherReplicaIsAnsweredWithTheAskersVerdict(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		book := &adapterstest.Book{}
		e := newEnv(t, tk.Options{InMemory: true}, func(o *Options) { o.Questions = book })
		defer startRun(t, e.ad, newCollector())()
		tr := &http.Transport{DialContext: e.srv.Dial}
		defer tr.CloseIdleConnections()
		asker, err := New(Options{Token: e.srv.Token(), APIEndpoint: e.srv.Endpoint(), Questions: book, RetryAfterUnit: unit,
			HTTPClient: &http.Client{Transport: tr}})
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
		book.Down(true)
		if got := pressed(q2, ann, 0); got.Text != adapters.UnrelayedPress || !got.ShowAlert {
			t.Fatalf("a press whose asker cannot be reached answered %+v, want a request to press again", got)
		}
		book.Down(false)
		cancel()
		<-done
		if got := pressed(q2, ann, 0); got.Text != adapters.ClosedPress {
			t.Fatalf("a press of a question whose turn ended answered %+v, want %q", got, adapters.ClosedPress)
		}
	})
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

// A toggling press of a question another replica's turn asked redraws the question's keyboard
// in place: the replica that asked edits it (editMessageReplyMarkup), the press is answered
// here without a word, and no message is posted for it.
func TestARedrawingPressOnAnotherReplicaRedrawsTheKeyboardInPlace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		book := &adapterstest.Book{}
		e := newEnv(t, tk.Options{InMemory: true}, func(o *Options) { o.Questions = book })
		defer startRun(t, e.ad, newCollector())()
		tr := &http.Transport{DialContext: e.srv.Dial}
		defer tr.CloseIdleConnections()
		asker, err := New(Options{Token: e.srv.Token(), APIEndpoint: e.srv.Endpoint(), Questions: book, RetryAfterUnit: unit,
			HTTPClient: &http.Client{Transport: tr}})
		if err != nil {
			t.Fatal(err)
		}
		defer asker.Engine().Close()
		e.srv.Send(tk.Inbound{Chat: group, From: ann, Text: "hello"}) // the chat exists on the server
		wait.For(t, "the group to exist", func() bool { return len(e.srv.Calls()) > 0 })
		out := askResponder{a: asker, chat: chat.Ref{Platform: chat.Telegram, ChatID: "-100200"}}
		choices := func(tuna string) []adapters.Choice {
			return []adapters.Choice{{ID: "v0", Label: tuna}, {ID: "done", Label: "Done"}}
		}
		marked := false
		done := make(chan error, 1)
		go func() {
			_, err := out.AskRedraw(t.Context(), adapters.Question{Text: "Run echo? Pick", Choices: choices("Tuna")},
				func(a adapters.Answer) adapters.Decision {
					if a.Choice == "done" {
						return adapters.Decision{Accept: true, Text: "Run echo? Picked"}
					}
					marked = !marked
					return adapters.Decision{Redraw: choices(map[bool]string{true: "✓ Tuna", false: "Tuna"}[marked])}
				})
			done <- err
		}()
		q := e.question(t, group.ID)
		id := e.srv.Press(group, ann, q.ID, q.Buttons[0].CallbackData)
		wait.For(t, "the toggle answered without a word and the keyboard redrawn", func() bool {
			a, answered := e.srv.Answer(id)
			for _, m := range e.srv.BotMessages(group.ID) {
				if m.ID == q.ID {
					return answered && a.Text == "" && len(m.Buttons) == 2 && m.Buttons[0].Text == "✓ Tuna"
				}
			}
			return false
		})
		if n := e.questions(group.ID); n != 1 {
			t.Fatalf("%d question messages, want the one redrawn in place", n)
		}
		e.srv.Press(group, ann, q.ID, q.Buttons[1].CallbackData)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		wait.For(t, "the asker to show the decision without buttons", func() bool {
			for _, m := range e.srv.BotMessages(group.ID) {
				if m.ID == q.ID {
					return m.Text == "Run echo? Picked" && len(m.Buttons) == 0
				}
			}
			return false
		})
	})
}
