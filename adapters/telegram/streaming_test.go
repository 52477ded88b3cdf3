package telegram

import (
	"context"
	"relaybot/internal/testkit/wait"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"relaybot/adapters"
	"relaybot/adapters/delivery"
	tk "relaybot/internal/testkit/telegram"
)

func withDrafts(o *Options) { o.Drafts = true }

// A long answer in a private chat streams through Telegram's drafts, one draft id per part,
// each with the native Stop button that keeps the text; every part is persisted by a message
// carrying its final text (the first while the model still writes), and no message is edited.
func TestPrivateChatStreamsThroughDraftsThenPersistsEachPart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, tk.Options{InMemory: true}, withDrafts)
		chat := e.chat(101, 0)
		ctx := context.Background()
		r := e.ad.Engine().NewReply(ctx, chat, adapters.SendOptions{ReplyTo: "1", Stoppable: true})
		// About 12,000 characters over 12 s: several preview slots per part at Telegram's pace.
		final := stream(r, answer(2400), 5*time.Millisecond)
		modelEnd := time.Now()
		if err := r.Finish(ctx, final, nil); err != nil {
			t.Fatal(err)
		}
		assertWhole(t, e.botTexts(101), final, 3)
		drafts := e.srv.Drafts(101)
		ids := map[int64]bool{}
		for _, d := range drafts {
			ids[d.ID] = true
			if !d.CanStop || !d.KeepOnStop {
				t.Errorf("draft %d shows no Stop button that keeps the text (can_stop %v, keep_on_stop %v)", d.ID, d.CanStop, d.KeepOnStop)
			}
		}
		if len(ids) < 2 {
			t.Errorf("%d drafts with %d ids: the answer did not stream through one draft per part", len(drafts), len(ids))
		}
		if n := e.count("editMessageText", 200); n != 0 {
			t.Errorf("%d edits: a private chat with drafts should not stream by edits", n)
		}
		persisted := 0
		for _, c := range e.srv.Calls() {
			if c.Method == "sendMessage" && c.Code == 200 && c.Time.Before(modelEnd) {
				persisted++
			}
		}
		if persisted == 0 {
			t.Error("no part was persisted while the model wrote: the user watched one draft until the end")
		}
		if _, ok := e.srv.CurrentDraft(101); ok {
			t.Error("a draft is still shown after the final messages")
		}
		checkBudget(t, e.srv.Calls())
	})
}

// A draft refused in the middle of an answer (the bot or chat takes no drafts) falls back to
// messages and edits for the rest of the process, says so once, and loses no text.
func TestRefusedDraftFallsBackToEditsWithoutLosingText(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, tk.Options{InMemory: true}, withDrafts)
		chat := e.chat(102, 0)
		ctx := context.Background()
		r := e.ad.Engine().NewReply(ctx, chat, adapters.SendOptions{})
		toks := answer(600)
		var b strings.Builder
		for i, s := range toks {
			b.WriteString(s)
			if (i+1)%8 == 0 {
				r.Update(b.String())
			}
			if i == 100 {
				wait.For(t, "a first draft", func() bool { return len(e.srv.Drafts(102)) > 0 })
				e.srv.AddFault(tk.Fault{Kind: tk.FaultDraftRefused, Method: "sendMessageDraft", Times: 100})
			}
			if i == 200 {
				// Refused mid-answer: the rest of the answer streams after the fallback.
				wait.For(t, "a draft refused", func() bool { return e.count("sendMessageDraft", 400) > 0 })
			}
		}
		final := b.String()
		wait.For(t, "the refused draft to be shown as a message", func() bool { return len(e.srv.BotMessages(102)) > 0 })
		if err := r.Finish(ctx, final, nil); err != nil {
			t.Fatal(err)
		}
		assertWhole(t, e.botTexts(102), final, 1)
		// A second answer in another private chat does not try drafts again.
		other := e.chat(103, 0)
		before := e.count("sendMessageDraft", 400)
		r2 := e.ad.Engine().NewReply(ctx, other, adapters.SendOptions{})
		r2.Update("second answer, streaming")
		wait.For(t, "the second answer's preview", func() bool { return len(e.srv.BotMessages(103)) > 0 })
		if err := r2.Finish(ctx, "second answer, streamed", nil); err != nil {
			t.Fatal(err)
		}
		if n := e.count("sendMessageDraft", 400) - before; n != 0 || len(e.srv.Drafts(103)) != 0 {
			t.Errorf("drafts were tried again after the refusal (%d refused)", n)
		}
		if n := strings.Count(e.logs.String(), "drafts refused"); n != 1 {
			t.Errorf("the refusal was logged %d times, want once:\n%s", n, e.logs.String())
		}
	})
}

// Before a tool runs, the draft becomes a message: a tool may run longer than Telegram shows
// a draft, and the user must not watch the text vanish.
func TestToolRoundPersistsTheDraftFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, tk.Options{InMemory: true}, withDrafts)
		chat := e.chat(104, 0)
		ctx := context.Background()
		r := e.ad.Engine().NewReply(ctx, chat, adapters.SendOptions{})
		r.Update("Let me look that up.")
		wait.For(t, "the draft", func() bool { d, ok := e.srv.CurrentDraft(104); return ok && d.Text == "Let me look that up." })
		if len(e.srv.BotMessages(104)) != 0 {
			t.Fatal("a message was sent although the answer streams as a draft")
		}
		r.Working(true) // a tool starts
		wait.For(t, "the draft persisted as a message", func() bool {
			ms := e.srv.BotMessages(104)
			return len(ms) == 1 && ms[0].Text == "Let me look that up."
		})
		r.Working(false)
		final := "Let me look that up.\n\nIt is 21 °C in Paris."
		if err := r.Finish(ctx, final, nil); err != nil {
			t.Fatal(err)
		}
		assertTexts(t, e.botTexts(104), want(final))
	})
}

// stopHandler streams an answer for every message until told to stop, and hands every stop
// command to the test.
type stopHandler struct {
	stops   chan adapters.Inbound
	replies chan adapters.Reply
}

func (h *stopHandler) Handle(ctx context.Context, in adapters.Inbound, out adapters.Responder) {
	if in.Command == "stop" {
		h.stops <- in
		return
	}
	r := out.NewReply(ctx)
	r.Update("A long answer that is still being written")
	h.replies <- r
}

func (h *stopHandler) nextStop(t *testing.T) adapters.Inbound {
	t.Helper()
	select {
	case in := <-h.stops:
		return in
	case <-time.After(20 * time.Second):
		t.Fatal("no stop reached the handler")
		return adapters.Inbound{}
	}
}

func (h *stopHandler) nextReply(t *testing.T) adapters.Reply {
	t.Helper()
	select {
	case r := <-h.replies:
		return r
	case <-time.After(20 * time.Second):
		t.Fatal("no reply started")
		return nil
	}
}

// The Stop button of a draft (stopped_message_generation) reaches the handler as /stop from the
// chat's user, exactly as typing /stop would.
func TestDraftStopButtonIsTheStopCommand(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, tk.Options{InMemory: true}, withDrafts)
		h := &stopHandler{stops: make(chan adapters.Inbound, 4), replies: make(chan adapters.Reply, 4)}
		stop := startRun(t, e.ad, h)
		defer stop()
		e.srv.Send(tk.Inbound{Chat: tk.Chat{ID: 7, Type: "private"}, From: ann, Text: "write a poem"})
		r := h.nextReply(t)
		wait.For(t, "a draft with a Stop button", func() bool { d, ok := e.srv.CurrentDraft(7); return ok && d.CanStop })
		if !e.srv.PressDraftStop(7) {
			t.Fatal("the draft has no Stop button")
		}
		in := h.nextStop(t)
		if in.Chat.ChatID != "7" || in.UserID != "7" || in.Kind != adapters.Private {
			t.Errorf("stop = %+v, want /stop from user 7 in the private chat 7", in)
		}
		if err := r.Finish(context.Background(), "A long answer that was", nil); err != nil {
			t.Fatal(err)
		}
	})
}

// A reply streamed by edits (a group; drafts are for private chats) carries an inline Stop
// button while it streams; pressing it is /stop from whoever pressed (so the pipeline refuses
// a bystander as for /stop), the press is answered, and the final edit takes the button off.
func TestInlineStopButtonStopsAndGoesWithTheFinalEdit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, tk.Options{InMemory: true}, withDrafts)
		h := &stopHandler{stops: make(chan adapters.Inbound, 4), replies: make(chan adapters.Reply, 4)}
		stop := startRun(t, e.ad, h)
		defer stop()
		e.srv.Send(tk.Inbound{Chat: group, From: ann, Text: "@" + e.srv.BotUsername() + " write a poem"})
		r := h.nextReply(t)
		var msg tk.Message
		wait.For(t, "the streaming message with a Stop button", func() bool {
			ms := e.srv.BotMessages(group.ID)
			if len(ms) == 1 && len(ms[0].Buttons) == 1 {
				msg = ms[0]
				return true
			}
			return false
		})
		if len(e.srv.Drafts(group.ID)) != 0 {
			t.Error("a group got drafts")
		}
		// The button stays through streaming edits.
		r.Update("A long answer that is still being written, and more")
		wait.For(t, "the streaming edit", func() bool {
			ms := e.srv.BotMessages(group.ID)
			return strings.HasSuffix(ms[0].Text, "and more")
		})
		if ms := e.srv.BotMessages(group.ID); len(ms[0].Buttons) != 1 {
			t.Fatal("a streaming edit took the Stop button off")
		}
		id, err := e.srv.PressButton(group.ID, msg.ID, bob, msg.Buttons[0].CallbackData)
		if err != nil {
			t.Fatal(err)
		}
		in := h.nextStop(t)
		if in.UserID != "8" || in.Chat.ChatID != "-100200" || in.Kind != adapters.Group {
			t.Errorf("stop = %+v, want /stop from Bob (8) in the group", in)
		}
		wait.For(t, "the button press answered", func() bool { _, ok := e.srv.CallbackAnswered(id); return ok })
		if err := r.Finish(context.Background(), "A long answer that was", nil); err != nil {
			t.Fatal(err)
		}
		ms := e.srv.BotMessages(group.ID)
		if len(ms) != 1 || ms[0].Text != "A long answer that was" || len(ms[0].Buttons) != 0 {
			t.Errorf("after the final: %+v, want the final text without buttons", ms)
		}
	})
}

// assertWhole asserts the chat's messages carry the whole final text, in order and once, in
// at least n messages of at most Telegram's length (where a streamed answer was cut is the
// previews' choice: a clean boundary, possibly before the one a final split would pick).
func assertWhole(t *testing.T, got []string, final string, n int) {
	t.Helper()
	if len(got) < n {
		t.Fatalf("the chat shows %d bot messages, want at least %d", len(got), n)
	}
	for i, m := range got {
		if l := delivery.Length(m, adapters.UTF16); l > Limits().MaxLen {
			t.Errorf("message %d has %d units", i, l)
		}
	}
	whole, _ := Render(final)
	if g, w := strings.Fields(strings.Join(got, "\n")), strings.Fields(whole); !slices.Equal(g, w) {
		t.Fatalf("the messages do not carry the whole answer in order, once:\n got %d words\nwant %d words", len(g), len(w))
	}
}
