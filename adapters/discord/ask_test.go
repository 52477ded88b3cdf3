package discord_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"relaybot/adapters"
	"relaybot/adapters/discord"
	dtk "relaybot/internal/testkit/discord"
)

var approveOrDeny = adapters.Question{Text: "Run echo?", Choices: []adapters.Choice{{ID: "approve", Label: "Approve"}, {ID: "deny", Label: "Deny"}}}

// askerDecides lets only the user who asked answer.
func askerDecides(a adapters.Answer) (bool, string) {
	if a.UserID != userID {
		return false, "Only the asker may answer."
	}
	return true, "Run echo? " + a.Choice + "d by " + a.UserName
}

type asked struct {
	ans adapters.Answer
	err error
}

// ask asks the question through out on its own goroutine.
func ask(ctx context.Context, t testing.TB, out adapters.Responder) chan asked {
	t.Helper()
	a, ok := out.(adapters.Asker)
	if !ok {
		t.Fatal("the responder of a message cannot ask questions")
	}
	done := make(chan asked, 1)
	go func() {
		ans, err := a.Ask(ctx, approveOrDeny, askerDecides)
		done <- asked{ans, err}
	}()
	return done
}

// question waits for the question's message with its buttons.
func (hs *harness) question(ch string) dtk.Message {
	hs.t.Helper()
	var q dtk.Message
	hs.waitFor("the question with its buttons", func() bool {
		for _, m := range hs.srv.BotMessages(ch) {
			if strings.HasPrefix(m.Content, "Run echo?") && len(m.Buttons) == 2 {
				q = m
				return true
			}
		}
		return false
	})
	return q
}

// approve presses the question's Approve button as the asker and returns Ask's answer.
func (hs *harness) approve(q dtk.Message, done chan asked) adapters.Answer {
	hs.t.Helper()
	if _, err := hs.srv.ClickButton(q.ID, q.Buttons[0].CustomID, userID, nil); err != nil {
		hs.t.Fatal(err)
	}
	select {
	case r := <-done:
		if r.err != nil {
			hs.t.Fatalf("Ask: %v", r.err)
		}
		return r.ans
	case <-time.After(20 * time.Second):
		hs.t.Fatal("the asker's approval never reached Ask")
		return adapters.Answer{}
	}
}

// shows waits until message id shows text and no buttons.
func (hs *harness) shows(id, text string) {
	hs.t.Helper()
	hs.waitFor("the question showing "+text, func() bool {
		m, ok := hs.srv.Message(id)
		return ok && m.Content == text && len(m.Buttons) == 0
	})
}

// A question asked while the channel's budget is spent (five notices in a row) waits for its
// place in the delivery engine's budget instead of drawing a 429, and still works. The test
// fails when the question goes past the engine, as it did through a loop of its own.
func TestAQuestionWaitsForTheChannelsBudget(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		hs := startInBubble(t, nil, nil)
		ch := "500000000000000101"
		_, rc := hs.post(dtk.UserMessage{ChannelID: ch, GuildID: guildID, Content: "<@" + hs.srv.BotID() + "> run echo", MentionBot: true})
		for _, text := range []string{"one", "two", "three", "four", "five"} {
			if err := rc.out.Notice(hs.ctx, text); err != nil {
				t.Fatal(err)
			}
		}
		done := ask(hs.ctx, t, rc.out)
		q := hs.question(ch)
		checkBudget(t, hs.srv, ch)
		if ans := hs.approve(q, done); ans.Choice != "approve" || ans.UserID != userID {
			t.Fatalf("Ask = %+v, want the asker's approval", ans)
		}
		hs.shows(q.ID, "Run echo? approved by user"+userID)
		checkBudget(t, hs.srv, ch)
	})
}

// A 429 on the question's post, or on the edit that closes it unanswered, is retried once its
// retry_after has passed: the question is posted once and works, or closes without buttons.
func TestA429OnAQuestionIsRetried(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		close bool // the turn ends before anyone answers; the 429 falls on the closing edit
	}{
		{"on the post", false},
		{"on the closing edit", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				hs := startInBubble(t, nil, nil)
				ch := "500000000000000102"
				_, rc := hs.post(dtk.UserMessage{ChannelID: ch, GuildID: guildID, Content: "<@" + hs.srv.BotID() + "> run echo", MentionBot: true})
				if !tc.close {
					hs.srv.Storm(ch, 1, 300*time.Millisecond)
				}
				ctx, cancel := context.WithCancel(hs.ctx)
				defer cancel()
				done := ask(ctx, t, rc.out)
				q := hs.question(ch)
				want := "Run echo? approved by user" + userID
				if tc.close {
					want = "Run echo?" + adapters.ClosedText
					hs.srv.Storm(ch, 1, 300*time.Millisecond)
					cancel()
					if r := <-done; r.err == nil {
						t.Fatalf("Ask = %+v after the turn ended, want the context's error", r.ans)
					}
				} else if ans := hs.approve(q, done); ans.Choice != "approve" {
					t.Fatalf("Ask = %+v, want the asker's approval", ans)
				}
				hs.shows(q.ID, want)
				if n := len(hs.srv.BotMessages(ch)); n != 1 {
					t.Errorf("%d bot messages in the channel, want the one question", n)
				}
				if limited := limitedCalls(hs.srv, dtk.RouteCreateMessage, dtk.RouteEditMessage); limited != 1 {
					t.Errorf("%d 429s answered, want the one injected", limited)
				}
			})
		})
	}
}

// A 429 on the answer to an interaction (an approval press, a Stop press, a slash command's
// response filled in) is retried after its retry_after, within Discord's 3 s for the first
// answer: the user sees the answer as without the 429.
func TestA429OnAnInteractionAnswerIsRetried(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		route dtk.Route
		run   func(hs *harness, ch string)
	}{
		{"an approval press", dtk.RouteInteractionCallback, func(hs *harness, ch string) {
			_, rc := hs.post(dtk.UserMessage{ChannelID: ch, GuildID: guildID, Content: "<@" + hs.srv.BotID() + "> run echo", MentionBot: true})
			done := ask(hs.ctx, hs.t, rc.out)
			q := hs.question(ch)
			hs.srv.ProxyRateLimit(dtk.RouteInteractionCallback, 1, time.Second)
			if ans := hs.approve(q, done); ans.Choice != "approve" {
				hs.t.Fatalf("Ask = %+v, want the asker's approval", ans)
			}
			hs.shows(q.ID, "Run echo? approved by user"+userID)
		}},
		{"a Stop press", dtk.RouteInteractionCallback, func(hs *harness, ch string) {
			_, rc := hs.post(dtk.UserMessage{ChannelID: ch, GuildID: guildID, Content: "<@" + hs.srv.BotID() + "> go", MentionBot: true})
			r := rc.out.NewReply(hs.ctx)
			r.Update("A long answer in progress")
			hs.waitFor("the streaming message", func() bool { return len(hs.srv.BotMessages(ch)) == 1 })
			msg := hs.srv.BotMessages(ch)[0]
			hs.srv.ProxyRateLimit(dtk.RouteInteractionCallback, 1, time.Second)
			if _, err := hs.srv.ClickButton(msg.ID, discord.StopButtonID, userID, nil); err != nil {
				hs.t.Fatal(err)
			}
			if stop := hs.next(); stop.in.Command != "stop" {
				hs.t.Fatalf("the press reached the handler as %+v", stop.in)
			}
			hs.waitFor("the Stop button gone", func() bool { m, _ := hs.srv.Message(msg.ID); return len(m.Buttons) == 0 })
			if err := r.Finish(hs.ctx, "A long answer", nil); err != nil {
				hs.t.Fatal(err)
			}
		}},
		{"a slash command's response", dtk.RouteWebhookEdit, func(hs *harness, ch string) {
			hs.waitFor("command registration", func() bool { return len(hs.srv.Commands()) > 0 })
			hs.srv.ProxyRateLimit(dtk.RouteWebhookEdit, 1, time.Second)
			it, err := hs.srv.SlashCommand(ch, guildID, "reset", userID, nil)
			if err != nil {
				hs.t.Fatal(err)
			}
			hs.next()
			hs.waitFor("the command's answer", func() bool {
				m, ok := hs.srv.InteractionResponse(it)
				return ok && m.Content == "Conversation reset."
			})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				hs := startInBubble(t, func(o *discord.Options) { o.RegisterCommands = true }, resetAnswers)
				ch := "500000000000000103"
				tc.run(hs, ch)
				if limited := limitedCalls(hs.srv, tc.route); limited != 1 {
					t.Errorf("%d 429s answered on %s, want the one injected", limited, tc.route)
				}
			})
		})
	}
}

// resetAnswers answers /reset as the pipeline does.
func resetAnswers(ctx context.Context, in adapters.Inbound, out adapters.Responder) {
	if in.Command == "reset" {
		_ = out.Notice(ctx, "Conversation reset.")
	}
}

// Answers to interactions take no place in the channel's budget: with the channel held for
// ten minutes by a 429 its reply drew, a press of a question's button and a slash command in
// that channel are still answered (Discord drops an interaction not answered within 3 s). The
// test fails when interaction answers queue behind the channel's messages.
func TestInteractionAnswersDoNotWaitForABusyChannel(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		hs := startInBubble(t, func(o *discord.Options) { o.RegisterCommands = true }, resetAnswers)
		ch := "500000000000000104"
		_, rc := hs.post(dtk.UserMessage{ChannelID: ch, GuildID: guildID, Content: "<@" + hs.srv.BotID() + "> run echo", MentionBot: true})
		done := ask(hs.ctx, t, rc.out)
		q := hs.question(ch)

		hs.srv.Storm(ch, 1, 10*time.Minute)
		r := rc.out.NewReply(hs.ctx)
		r.Update("an answer the channel has no room for")
		hs.waitFor("the reply's 429", func() bool { return limitedCalls(hs.srv, dtk.RouteCreateMessage) > 0 })

		if ans := hs.approve(q, done); ans.Choice != "approve" {
			t.Fatalf("Ask = %+v, want the asker's approval", ans)
		}
		hs.shows(q.ID, "Run echo? approved by user"+userID)
		hs.waitFor("command registration", func() bool { return len(hs.srv.Commands()) > 0 })
		it, err := hs.srv.SlashCommand(ch, guildID, "reset", userID, nil)
		if err != nil {
			t.Fatal(err)
		}
		hs.next()
		hs.waitFor("the command's answer", func() bool {
			m, ok := hs.srv.InteractionResponse(it)
			return ok && m.Content == "Conversation reset."
		})
		ctx, cancel := context.WithTimeout(hs.ctx, 100*time.Millisecond)
		defer cancel()
		if err := r.Finish(ctx, "the end", nil); err == nil {
			t.Error("the reply's final went out while the channel was held")
		}
	})
}

// A question's text is shown as written: the model's arguments in it cannot make Discord
// render a masked link, bold text, a heading or a spoiler; the answered question stays escaped.
func TestAQuestionsMarkdownIsShownAsWritten(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		hs := startInBubble(t, nil, nil)
		ch := "500000000000000141"
		_, rc := hs.post(dtk.UserMessage{ChannelID: ch, GuildID: guildID, Content: "<@" + hs.srv.BotID() + "> run echo", MentionBot: true})
		q := adapters.Question{Text: "Run echo? path: [safe.txt](https://evil.example) **ok** ||x||",
			Choices: approveOrDeny.Choices}
		done := make(chan asked, 1)
		go func() {
			ans, err := rc.out.(adapters.Asker).Ask(hs.ctx, q, askerDecides)
			done <- asked{ans, err}
		}()
		m := hs.question(ch)
		want := `Run echo? path\: \[safe.txt\]\(https\://evil.example\) \*\*ok\*\* \|\|x\|\|`
		if m.Content != want {
			t.Fatalf("question content %q, want %q", m.Content, want)
		}
		hs.approve(m, done)
	})
}
