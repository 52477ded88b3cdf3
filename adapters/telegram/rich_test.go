package telegram

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"relaybot/adapters"
	"relaybot/adapters/markdown"
	tk "relaybot/internal/testkit/telegram"
	"relaybot/internal/testkit/wait"
)

func withRich(o *Options) { o.Rich = true }

// folds is what the pipeline puts ahead of an answer that reasoned and ran tools: reasoning
// and the finished tool lines, each folded away in a <details> block.
const folds = "<details>\n<summary>💭 Thought</summary>\n\nThe user wants the long version; look it up first.\n\n</details>\n\n" +
	"<details>\n<summary>✓ 2 tools · 1.2 s</summary>\n\n✓ web_search · 0.8 s\n✓ fetch · 0.4 s\n\n</details>\n\n"

// streamFolded streams folds and then n tokens of answer into r, one token per tick.
func streamFolded(r adapters.Reply, n int, tick time.Duration) string {
	r.Update(folds)
	toks := append([]string{folds}, answer(n)...)
	return stream(r, toks, tick)
}

// assertOneRich asserts the chat shows exactly one bot message: a rich message carrying the
// whole final text (reasoning and tool lines in collapsed <details>), and returns it.
func assertOneRich(t *testing.T, e *env, chatID int64, final string) tk.Message {
	t.Helper()
	msgs := e.srv.BotMessages(chatID)
	if len(msgs) != 1 {
		t.Fatalf("the chat shows %d bot messages, want the answer as one rich message", len(msgs))
	}
	m := msgs[0]
	if m.Rich == nil {
		t.Fatalf("the answer is a plain message (%d characters), not a rich one", len([]rune(m.Text)))
	}
	want, _ := markdown.RichHTML(final)
	if m.Rich.HTML != want {
		t.Fatalf("the rich message does not carry the whole answer:\n got %s\nwant %s", trunc(m.Rich.HTML), trunc(want))
	}
	for _, s := range []string{"<summary>💭 Thought</summary>", "<summary>✓ 2 tools · 1.2 s</summary>"} {
		if !strings.Contains(m.Rich.HTML, s) {
			t.Errorf("the rich message has no collapsed block %s", s)
		}
	}
	if strings.Contains(m.Rich.HTML, "<details open") {
		t.Error("a folded block is open in the rich message")
	}
	return m
}

// A 12,000-character answer in a private chat streams through drafts and rolled-over messages
// as before, then arrives as one rich message: it replaces the parts (a new message, since only
// a message from the bot ends the draft), which are deleted; tool lines and reasoning stay
// folded in collapsed <details>.
func TestLongAnswerArrivesAsOneRichMessageInAPrivateChat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, tk.Options{InMemory: true}, func(o *Options) { withDrafts(o); withRich(o) })
		chat := e.chat(201, 0)
		ctx := context.Background()
		r := e.ad.Engine().NewReply(ctx, chat, adapters.SendOptions{ReplyTo: "1", Stoppable: true})
		final := streamFolded(r, 2400, 2*time.Millisecond)
		if n := len([]rune(final)); n < 12000 {
			t.Fatalf("the answer has %d characters, want at least 12,000", n)
		}
		if len(e.srv.BotMessages(201)) == 0 {
			t.Fatal("no part was persisted while the answer streamed: the test does not cover rolled-over parts")
		}
		if err := r.Finish(ctx, final, nil); err != nil {
			t.Fatal(err)
		}
		m := assertOneRich(t, e, 201, final)
		if m.ReplyTo != 1 {
			t.Errorf("the rich message replies to %d, want the user's message 1", m.ReplyTo)
		}
		if len(m.Buttons) != 0 {
			t.Error("the final rich message still shows the Stop button")
		}
		if _, ok := e.srv.CurrentDraft(201); ok {
			t.Error("a draft is still shown after the rich message")
		}
		if e.count("deleteMessage", 200) == 0 {
			t.Error("no part was deleted, yet the chat shows one message")
		}
		checkBudget(t, e.srv.Calls())
	})
}

// In a group (streamed by edits), the first message of the answer becomes the rich message in
// place, so the answer stays where it began; the later parts are deleted.
func TestGroupAnswerBecomesOneRichMessageWhereItBegan(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, tk.Options{InMemory: true}, withRich)
		chat := e.chat(-202, 0)
		ctx := context.Background()
		r := e.ad.Engine().NewReply(ctx, chat, adapters.SendOptions{})
		final := streamFolded(r, 1600, time.Millisecond)
		wait.For(t, "the answer to roll over into a second message", func() bool { return len(e.srv.BotMessages(-202)) >= 2 })
		first := e.srv.BotMessages(-202)[0].ID
		if err := r.Finish(ctx, final, nil); err != nil {
			t.Fatal(err)
		}
		m := assertOneRich(t, e, -202, final)
		if m.ID != first {
			t.Errorf("the rich message is message %d, want the answer's first message %d edited in place", m.ID, first)
		}
		if n := e.count("sendRichMessage", 200); n != 0 {
			t.Errorf("%d rich messages sent: the first message should have been edited", n)
		}
	})
}

// A chat where Telegram refuses rich messages gets the answer as today's entity messages,
// whole, and the next answer there goes straight to them; another chat still tries.
func TestRefusedRichMessageFallsBackAndIsRememberedForTheChat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, tk.Options{InMemory: true}, withRich)
		ctx := context.Background()
		chat := e.chat(203, 0)
		e.srv.AddFault(tk.Fault{Kind: tk.FaultRichRefused, ChatID: 203, Times: 100})
		r := e.ad.Engine().NewReply(ctx, chat, adapters.SendOptions{})
		final := streamFolded(r, 1600, 0)
		if err := r.Finish(ctx, final, nil); err != nil {
			t.Fatal(err)
		}
		refused := e.count("editMessageText", 400) + e.count("sendRichMessage", 400)
		if refused != 1 {
			t.Fatalf("%d rich requests refused, want the one that was tried", refused)
		}
		assertWhole(t, e.botTexts(203), final, 2)
		for _, m := range e.srv.BotMessages(203) {
			if m.Rich != nil {
				t.Fatal("a rich message was shown although the chat refuses them")
			}
		}
		r2 := e.ad.Engine().NewReply(ctx, chat, adapters.SendOptions{})
		if err := r2.Finish(ctx, "**Second** answer.", nil); err != nil {
			t.Fatal(err)
		}
		if n := e.count("editMessageText", 400) + e.count("sendRichMessage", 400); n != refused {
			t.Errorf("the next answer tried a rich message again (%d refusals)", n)
		}
		if ms := e.srv.BotMessages(203); ms[len(ms)-1].Text != "Second answer." || len(ms[len(ms)-1].Entities) == 0 {
			t.Errorf("the next answer shows %q, want it with entities", ms[len(ms)-1].Text)
		}
		other := e.chat(204, 0)
		if err := e.ad.Engine().NewReply(ctx, other, adapters.SendOptions{}).Finish(ctx, "**Hello**", nil); err != nil {
			t.Fatal(err)
		}
		if ms := e.srv.BotMessages(204); len(ms) != 1 || ms[0].Rich == nil {
			t.Error("another chat did not get a rich message: the refusal was remembered for the whole bot")
		}
		if n := strings.Count(e.logs.String(), "this chat gets plain messages"); n != 1 {
			t.Errorf("the refusal was logged %d times, want once", n)
		}
	})
}

// A Bot API that does not know rich messages (404, a server older than 10.1) turns them off
// for every chat of the bot: the answer goes out as an entity message, and no other chat tries.
func TestBotAPIWithoutRichMessagesTurnsThemOffForTheBot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, tk.Options{InMemory: true, WithoutRich: true}, withRich)
		ctx := context.Background()
		for _, id := range []int64{205, 206} {
			chat := e.chat(id, 0)
			if err := e.ad.Engine().NewReply(ctx, chat, adapters.SendOptions{}).Finish(ctx, "**Hello** there", nil); err != nil {
				t.Fatal(err)
			}
			if got := e.botTexts(id); len(got) != 1 || got[0] != "Hello there" {
				t.Fatalf("chat %d shows %q, want the answer as an entity message", id, got)
			}
		}
		if n := e.count("sendRichMessage", 404); n != 1 {
			t.Errorf("%d rich messages tried, want one: the 404 should turn them off for the bot", n)
		}
	})
}

// With telegram.rich = "off" no rich message is ever asked for.
func TestRichOffNeverSendsRichMessages(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, tk.Options{InMemory: true}, nil)
		ctx := context.Background()
		chat := e.chat(207, 0)
		r := e.ad.Engine().NewReply(ctx, chat, adapters.SendOptions{})
		final := streamFolded(r, 1600, 0)
		if err := r.Finish(ctx, final, nil); err != nil {
			t.Fatal(err)
		}
		assertWhole(t, e.botTexts(207), final, 2)
		for _, c := range e.srv.Calls() {
			if strings.Contains(c.Method, "Rich") || c.Params["rich_message"] != "" {
				t.Fatalf("a rich request was made with rich messages off: %s", c.Method)
			}
		}
	})
}

// An answer longer than one rich message (32,768 characters) is split into entity messages
// as before; one just under the limit is one rich message.
func TestRichMessageLimitIsRespected(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, tk.Options{InMemory: true}, withRich)
		ctx := context.Background()
		long := strings.Repeat("A long answer line that goes on and on.\n", 1000) // 41,000 characters
		chat := e.chat(208, 0)
		if err := e.ad.Engine().NewReply(ctx, chat, adapters.SendOptions{}).Finish(ctx, long, nil); err != nil {
			t.Fatal(err)
		}
		assertWhole(t, e.botTexts(208), long, 10)
		if n := e.count("sendRichMessage", 200) + e.count("sendRichMessage", 400); n != 0 {
			t.Errorf("%d rich messages tried for an answer over the limit", n)
		}
		fits := long[:32000]
		chat = e.chat(209, 0)
		if err := e.ad.Engine().NewReply(ctx, chat, adapters.SendOptions{}).Finish(ctx, fits, nil); err != nil {
			t.Fatal(err)
		}
		assertRichWhole(t, e, 209, fits)
	})
}

// assertRichWhole asserts the chat shows final as one rich message and nothing else.
func assertRichWhole(t *testing.T, e *env, chatID int64, final string) {
	t.Helper()
	msgs := e.srv.BotMessages(chatID)
	want, _ := markdown.RichHTML(final)
	if len(msgs) != 1 || msgs[0].Rich == nil || msgs[0].Rich.HTML != want {
		t.Fatalf("the chat shows %d bot messages, want the answer as one rich message", len(msgs))
	}
}
