package telegram

import (
	"context"
	"strconv"
	"sync"
	"testing"

	"relaybot/adapters"
	"relaybot/adapters/adapterstest"
	"relaybot/chat"
	tk "relaybot/internal/testkit/telegram"
	"relaybot/internal/testkit/wait"
)

// A question's button data replayed from a bot message in another group is refused, in one
// process and when the press lands on another replica than the asker's: the presser gets an
// alert saying so, even Ann (whom the question's rules accept), the question's Stray hears who
// tried and where, nobody's rights are asked of the other group, and the question stays open for
// Ann's press in its own group.
func TestAPressOfOneGroupsQuestionFromAnotherGroupIsRefused(t *testing.T) {
	other := tk.Chat{ID: -100300, Type: "supergroup", Title: "elsewhere"}
	for _, replicas := range []bool{false, true} {
		t.Run(map[bool]string{false: "one process", true: "another replica"}[replicas], func(t *testing.T) {
			book := &adapterstest.Book{}
			e := newEnv(t, tk.Options{}, func(o *Options) {
				if replicas {
					o.Questions = book
				}
			})
			defer startRun(t, e.ad, newCollector())()
			asker := e.ad
			if replicas {
				var err error
				asker, err = New(Options{Token: e.srv.Token(), APIEndpoint: e.srv.Endpoint(), Questions: book, RetryAfterUnit: unit})
				if err != nil {
					t.Fatal(err)
				}
				defer asker.Engine().Close()
			}
			e.srv.Send(tk.Inbound{Chat: group, From: ann, Text: "hello"}) // the chats exist on the server
			e.srv.Send(tk.Inbound{Chat: other, From: ann, Text: "hello"})
			ref := chat.Ref{Platform: chat.Telegram, ChatID: strconv.FormatInt(group.ID, 10)}
			otherRef := chat.Ref{Platform: chat.Telegram, ChatID: strconv.FormatInt(other.ID, 10)}

			var mu sync.Mutex
			var strays []adapters.Answer
			q := approveOrDeny
			q.Stray = func(a adapters.Answer) { mu.Lock(); strays = append(strays, a); mu.Unlock() }
			done := make(chan asked, 1)
			go func() {
				ans, err := askResponder{a: asker, chat: ref}.Ask(t.Context(), q, annDecides)
				done <- asked{ans, err}
			}()
			qA := e.question(t, group.ID)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			ask(ctx, askResponder{a: e.ad, chat: otherRef}) // a bot message with buttons in the other group
			qB := e.question(t, other.ID)

			id := e.srv.Press(other, ann, qB.ID, qA.Buttons[0].CallbackData)
			var got tk.CallbackAnswer
			wait.For(t, "the answer to the replayed press", func() bool {
				var ok bool
				got, ok = e.srv.Answer(id)
				return ok
			})
			if got.Text != adapters.StrayPress || !got.ShowAlert {
				t.Fatalf("a press of group A's question from group B was answered %+v, want an alert: %q", got, adapters.StrayPress)
			}
			select {
			case r := <-done:
				t.Fatalf("the question took the press from another group: Ask = %+v, %v", r.ans, r.err)
			default:
			}
			mu.Lock()
			if len(strays) != 1 || strays[0].UserID != "7" || strays[0].Chat != otherRef || strays[0].Choice != "approve" {
				t.Errorf("Stray heard %+v, want Ann's approve from %v", strays, otherRef)
			}
			mu.Unlock()
			for _, c := range e.srv.Calls() {
				if c.Method == "getChatMember" && c.Params["chat_id"] == otherRef.ChatID && !replicas {
					t.Errorf("the presser's rights were asked of the other group: %+v", c.Params)
				}
			}
			if r := e.approve(t, qA, done); r.UserID != "7" || r.Chat != ref {
				t.Fatalf("Ann's press in the question's group gave %+v", r)
			}
		})
	}
}
