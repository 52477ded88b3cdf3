package telegram

import (
	"bytes"
	"context"
	"fmt"
	"image"
	pngpkg "image/png"
	"log/slog"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"relaybot/adapters"
	"relaybot/adapters/delivery"
	"relaybot/adapters/delivery/deliverytest"
	"relaybot/chat"
	"relaybot/internal/ellipsis"
	"relaybot/internal/testkit/logbuf"
	tk "relaybot/internal/testkit/telegram"
	"relaybot/internal/testkit/wait"
)

type env struct {
	srv      *tk.Server
	ad       *Adapter
	counters *deliverytest.Counters
	logs     *logbuf.Buffer
}

const unit = 20 * time.Millisecond // one retry_after second in these tests

func newEnv(t testing.TB, sopts tk.Options, mod func(*Options)) *env {
	t.Helper()
	sopts.RetryAfterUnit = unit
	srv, err := tk.New(sopts)
	if err != nil {
		t.Fatal(err)
	}
	logs := &logbuf.Buffer{}
	counters := &deliverytest.Counters{}
	opts := Options{
		Token:          srv.Token(),
		APIEndpoint:    srv.Endpoint(),
		Stream:         true,
		PollTimeout:    time.Second,
		RetryAfterUnit: unit,
		Logger:         slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Delivery: delivery.Options{
			Observer: counters,
			Retry:    delivery.RetryPolicy{BaseDelay: 10 * time.Millisecond, MaxDelay: 50 * time.Millisecond},
		},
	}
	if sopts.InMemory {
		// In a synctest bubble: the adapter reaches the server through memory.
		tr := &http.Transport{DialContext: srv.Dial}
		t.Cleanup(tr.CloseIdleConnections) // after the server closed (below)
		opts.HTTPClient = &http.Client{Transport: tr}
	}
	if mod != nil {
		mod(&opts)
	}
	ad, err := New(opts)
	if err != nil {
		srv.Close()
		t.Fatal(err)
	}
	e := &env{srv: srv, ad: ad, counters: counters, logs: logs}
	t.Cleanup(func() {
		ad.Engine().Close()
		srv.Close()
		if strings.Contains(logs.String(), srv.Token()) {
			t.Errorf("the token appears in the logs")
		}
	})
	return e
}

// chat registers a chat on the server (as if a user wrote there first) and returns its ref.
func (e *env) chat(id int64, thread int) chat.Ref {
	c := tk.Chat{ID: id}
	if id < 0 {
		c.Type, c.IsForum = "supergroup", thread != 0
	}
	e.srv.Send(tk.Inbound{Chat: c, From: tk.User{ID: 7, FirstName: "Ann"}, Text: "hi", ThreadID: thread})
	ref := chat.Ref{Platform: chat.Telegram, ChatID: strconv.FormatInt(id, 10)}
	if thread != 0 {
		ref.ThreadID = strconv.Itoa(thread)
	}
	return ref
}

// want is what the user must see for a final markdown text: each part rendered.
func want(final string) []string {
	var out []string
	for _, p := range delivery.Split(final, Limits().MaxLen, Limits().Unit) {
		text, _ := Render(p)
		out = append(out, text)
	}
	return out
}

func (e *env) botTexts(chatID int64) []string {
	var out []string
	for _, m := range e.srv.BotMessages(chatID) {
		out = append(out, m.Text)
	}
	return out
}

func (e *env) count(method string, code int) int {
	n := 0
	for _, c := range e.srv.Calls() {
		if (method == "" || c.Method == method) && c.Code == code {
			n++
		}
	}
	return n
}

func assertTexts(t *testing.T, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("the chat shows %d bot messages, want %d:\n%q", len(got), len(want), got)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("message %d differs:\n got %q\nwant %q", i, trunc(got[i]), trunc(want[i]))
		}
	}
}

func trunc(s string) string {
	if len(s) > 300 {
		return s[:150] + " … " + s[len(s)-150:]
	}
	return s
}

// answer builds a streamed answer of n tokens with Markdown, emoji and CJK.
func answer(n int) []string {
	words := []string{"The ", "**quick** ", "brown ", "fox ", "jumps ", "over ", "`lazy` ", "dogs; ", "中文 ", "🙂 ", "and\n\n", "_then_ "}
	toks := make([]string, n)
	for i := range toks {
		toks[i] = words[i%len(words)]
	}
	return toks
}

// stream feeds tokens to r at the runner's cadence (an update every 8 tokens), one token per
// tick, and returns the whole text.
func stream(r adapters.Reply, toks []string, tick time.Duration) string {
	var b strings.Builder
	var tk *time.Ticker
	if tick > 0 {
		tk = time.NewTicker(tick)
		defer tk.Stop()
	}
	for i, s := range toks {
		if tk != nil {
			<-tk.C
		}
		b.WriteString(s)
		if (i+1)%8 == 0 {
			r.Update(b.String())
		}
	}
	return b.String()
}

func TestStreamedAnswerArrivesExactly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, tk.Options{InMemory: true}, nil)
		chat := e.chat(101, 0)
		ctx := context.Background()
		r := e.ad.Engine().NewReply(ctx, chat, adapters.SendOptions{})
		final := stream(r, answer(3000), 2*time.Millisecond) // 6 s of the bubble's clock, as long as a 1 ms tick lasted on a busy real one
		finishing := time.Now()
		if err := r.Finish(ctx, final, nil); err != nil {
			t.Fatal(err)
		}
		assertWhole(t, e.botTexts(101), final, 2)
		if n := e.count("", 429); n != 0 {
			t.Fatalf("%d requests got 429", n)
		}
		// While streaming past the limit, the answer rolled over into a second message (it did
		// not stand still as a cut head until the end).
		sends := 0
		for _, c := range e.srv.Calls() {
			if c.Method == "sendMessage" && c.Code == 200 && c.Time.Before(finishing) {
				sends++
			}
			if c.Method == "editMessageText" && strings.HasSuffix(c.Params["text"], ellipsis.Mark) {
				t.Errorf("a preview was cut with an ellipsis: %q", c.Params["text"][max(0, len(c.Params["text"])-40):])
			}
		}
		if sends < 2 {
			t.Fatalf("%d messages posted while streaming a %d-character answer: it did not roll over", sends, len(final))
		}
		st := e.counters.Snapshot()
		if st.Sends+st.Edits < 3 {
			t.Fatalf("only %d sends and %d edits: the answer was not streamed", st.Sends, st.Edits)
		}
		checkBudget(t, e.srv.Calls())
	})
}

// checkBudget asserts the calls kept Telegram's budgets: at most 30 a second overall and,
// per chat, the bucket of 3 refilled once a second.
func checkBudget(t *testing.T, calls []tk.Call) {
	t.Helper()
	var times []time.Time
	perChat := map[int64][]time.Time{}
	for _, c := range calls {
		switch c.Method {
		case "sendMessage", "editMessageText", "sendPhoto", "sendDocument":
			if c.Code == 200 {
				times = append(times, c.Time)
				perChat[c.ChatID] = append(perChat[c.ChatID], c.Time)
			}
		}
	}
	for i := range times {
		j := i
		for j < len(times) && times[j].Sub(times[i]) < time.Second {
			j++
		}
		if j-i > 30 {
			t.Fatalf("%d sends and edits within one second from %s", j-i, times[i].Format("15:04:05.000"))
		}
	}
	for chat, ts := range perChat {
		for i := range ts {
			j := i
			for j < len(ts) && ts[j].Sub(ts[i]) < 3*time.Second {
				j++
			}
			if j-i > 6 { // burst 3 + 3 refills
				t.Fatalf("chat %d: %d requests within 3 s", chat, j-i)
			}
		}
	}
}

func TestRateLimitStormEndsExact(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, tk.Options{InMemory: true}, nil)
		chat := e.chat(102, 0)
		ctx := context.Background()
		r := e.ad.Engine().NewReply(ctx, chat, adapters.SendOptions{})
		r.Update("Working on it")
		wait.For(t, "the first message", func() bool { return len(e.srv.BotMessages(102)) == 1 })
		const storm = 4
		e.srv.AddFault(tk.Fault{Kind: tk.Fault429, ChatID: 102, RetryAfter: 3, Times: storm})
		final := stream(r, answer(400), 100*time.Microsecond)
		if err := r.Finish(ctx, final, nil); err != nil {
			t.Fatalf("the turn failed on 429s: %v", err)
		}
		assertTexts(t, e.botTexts(102), want(final))
		// Each injected 429 is answered once: the engine waited retry_after before trying again
		// (a client that ignored it would collect extra 429s while the chat is blocked).
		if n := e.count("", 429); n != storm {
			t.Fatalf("%d answers were 429, want exactly the %d injected", n, storm)
		}
		if got := e.counters.Snapshot().RateLimited; got != storm {
			t.Fatalf("observer saw %d rate limits, want %d", got, storm)
		}
	})
}

// longFinal is about 9,000 characters of Markdown where code blocks, emoji and CJK sit at
// the 4,096-unit marks.
func longFinal() string {
	var b strings.Builder
	b.WriteString("# Report\n\n")
	for b.Len() < 1500 {
		b.WriteString("Plain prose paragraph with **bold** text.\n\n")
	}
	// A code block across the first limit.
	b.WriteString("```go\n")
	for i := 0; i < 130; i++ {
		fmt.Fprintf(&b, "fmt.Println(%d, \"日本語 👩‍💻\")\n", i)
	}
	b.WriteString("```\n\n")
	// Emoji and CJK lines around the second limit.
	for i := 0; i < 120; i++ {
		b.WriteString("表情 🇯🇵👍🏽🙂 漢字かな交じり ")
		if i%6 == 5 {
			b.WriteString("\n")
		}
	}
	b.WriteString("\n\n```python\nprint('end')\n```\n")
	for utf8Len(b.String()) < 9000 {
		b.WriteString("最後の段落。🙂\n")
	}
	return b.String()
}

func utf8Len(s string) int { return len([]rune(s)) }

func TestLongFinalIsSplit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, tk.Options{InMemory: true}, nil)
		chat := e.chat(103, 0)
		final := longFinal()
		if n := utf8Len(final); n < 9000 {
			t.Fatalf("fixture is only %d characters", n)
		}
		ctx := context.Background()
		if err := e.ad.Engine().Notice(ctx, chat, final, adapters.SendOptions{}); err != nil {
			t.Fatal(err)
		}
		msgs := e.srv.BotMessages(103)
		if len(msgs) < 3 {
			t.Fatalf("%d messages for a 9,000-character text", len(msgs))
		}
		var all strings.Builder
		preGo := 0
		for i, m := range msgs {
			if n := delivery.Length(m.Text, adapters.UTF16); n > 4096 {
				t.Fatalf("message %d is %d UTF-16 units", i, n)
			}
			for _, en := range m.Entities {
				if en.Type == "pre" && en.Language == "go" {
					preGo++
				}
			}
			if strings.Contains(m.Text, "```") {
				t.Fatalf("message %d shows a raw fence: a code block was split without closing it", i)
			}
			all.WriteString(m.Text)
		}
		if preGo < 2 {
			t.Fatalf("the Go block should span two messages, each with a closed and reopened fence; saw %d pre(go) entities", preGo)
		}
		whole, _ := Render(final)
		if strip(all.String()) != strip(whole) {
			t.Fatal("text was lost or reordered across the split")
		}
		assertTexts(t, e.botTexts(103), want(final))
	})
}

func strip(s string) string {
	return strings.Join(strings.Fields(s), "")
}

func TestNotModifiedCountsAsDelivered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, tk.Options{InMemory: true}, nil)
		chat := e.chat(104, 0)
		ctx := context.Background()
		r := e.ad.Engine().NewReply(ctx, chat, adapters.SendOptions{})
		r.Update("first part")
		wait.For(t, "the preview", func() bool { return len(e.srv.BotMessages(104)) == 1 })
		// The final edit is applied but its answer is lost (502); the retry then meets
		// "message is not modified", which must count as delivered.
		e.srv.AddFault(tk.Fault{Kind: tk.FaultAppliedThen5xx, Method: "editMessageText", ChatID: 104})
		final := "first part, and the rest"
		if err := r.Finish(ctx, final, nil); err != nil {
			t.Fatal(err)
		}
		assertTexts(t, e.botTexts(104), want(final))
		if e.count("editMessageText", 400) != 1 {
			t.Fatalf("expected one \"not modified\" answer, calls: %+v", e.srv.Calls())
		}
		if e.counters.Snapshot().NotModified != 1 {
			t.Fatal("not modified was not observed")
		}
	})
}

func TestDeletedMessageFallsBack(t *testing.T) {
	for _, how := range []string{"user deleted", "edit not found"} {
		t.Run(how, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t, tk.Options{InMemory: true}, nil)
				chat := e.chat(105, 0)
				ctx := context.Background()
				r := e.ad.Engine().NewReply(ctx, chat, adapters.SendOptions{})
				r.Update("streaming the answer")
				wait.For(t, "the preview", func() bool { return len(e.srv.BotMessages(105)) == 1 })
				if how == "user deleted" {
					e.srv.DeleteMessage(105, e.srv.BotMessages(105)[0].ID)
				} else {
					e.srv.AddFault(tk.Fault{Kind: tk.FaultMessageGone, ChatID: 105})
				}
				final := "streaming the answer, complete."
				if err := r.Finish(ctx, final, nil); err != nil {
					t.Fatal(err)
				}
				assertTexts(t, e.botTexts(105), want(final))
				if e.counters.Snapshot().Fallbacks != 1 {
					t.Fatal("fallback not observed")
				}
			})
		})
	}
}

func TestRejectedFormattingGoesPlain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, tk.Options{InMemory: true}, nil)
		chat := e.chat(106, 0)
		e.srv.AddFault(tk.Fault{Kind: tk.FaultEntitiesRejected, ChatID: 106, Times: 100})
		final := "a **bold** claim with `code`"
		ctx := context.Background()
		r := e.ad.Engine().NewReply(ctx, chat, adapters.SendOptions{})
		r.Update("a **bold** claim")
		if err := r.Finish(ctx, final, nil); err != nil {
			t.Fatal(err)
		}
		msgs := e.srv.BotMessages(106)
		if len(msgs) != 1 || msgs[0].Text != final || len(msgs[0].Entities) != 0 {
			t.Fatalf("want the same text plain, got %+v", msgs)
		}
	})
}

func TestToolRoundKeepsEarlierTextAndTypes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, tk.Options{InMemory: true}, func(o *Options) { o.Delivery.TypingInterval = 30 * time.Millisecond })
		chat := e.chat(107, 0)
		ctx := context.Background()
		r := e.ad.Engine().NewReply(ctx, chat, adapters.SendOptions{})
		r.Working(true) // the model thinks
		round1 := "Let me look that up."
		r.Update(round1)
		status := round1 + "\n\n⏳ web_search…"
		r.Update(status)
		wait.For(t, "the tool status on screen", func() bool {
			m := e.srv.BotMessages(107)
			return len(m) == 1 && strings.HasSuffix(m[0].Text, "web_search…")
		})
		wait.For(t, "typing while the tool runs", func() bool { return e.count("sendChatAction", 200) >= 2 })
		r.Working(false)
		done := round1 + "\n\n✓ web_search 1.2 s\n\nThe answer is **42**."
		r.Update(done)
		if err := r.Finish(ctx, done, nil); err != nil {
			t.Fatal(err)
		}
		msgs := e.srv.BotMessages(107)
		if len(msgs) != 1 {
			t.Fatalf("the tool round should continue in the same message, got %d", len(msgs))
		}
		if !strings.HasPrefix(msgs[0].Text, round1) {
			t.Fatalf("text from before the tool round is gone: %q", msgs[0].Text)
		}
		assertTexts(t, e.botTexts(107), want(done))
		for _, c := range e.srv.Calls() {
			if c.Method == "sendChatAction" && c.Params["action"] != "typing" {
				t.Fatalf("chat action %q", c.Params["action"])
			}
		}
	})
}

func TestHundredChatsStayInsideGlobalBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, tk.Options{InMemory: true}, nil)
		const n = 100
		ctx := context.Background()
		finals := make([]string, n)
		var wg sync.WaitGroup
		for i := 0; i < n; i++ {
			chat := e.chat(int64(1000+i), 0)
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := e.ad.Engine().NewReply(ctx, chat, adapters.SendOptions{})
				finals[i] = stream(r, answer(200), 2*time.Millisecond)
				if err := r.Finish(ctx, finals[i], nil); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		if n := e.count("", 429); n != 0 {
			for _, c := range e.srv.Calls() {
				if c.Code == 429 {
					t.Logf("%s %s chat %d: %s", c.Time.Format("05.000"), c.Method, c.ChatID, c.Description)
				}
			}
			t.Fatalf("%d requests got 429", n)
		}
		checkBudget(t, e.srv.Calls())
		for i := 0; i < n; i++ {
			assertTexts(t, e.botTexts(int64(1000+i)), want(finals[i]))
		}
	})
}

func TestFilesGoWithTheFinal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, tk.Options{InMemory: true}, nil)
		ref := e.chat(108, 0)
		ctx := context.Background()
		r := e.ad.Engine().NewReply(ctx, ref, adapters.SendOptions{})
		r.Update("drawing")
		wait.For(t, "the preview", func() bool { return len(e.srv.BotMessages(108)) == 1 })
		files := []chat.File{
			{Name: "chart.png", MIME: "image/png", Data: []byte("\x89PNG fake")},
			{Name: "data.csv", MIME: "text/csv", Data: []byte("a,b\n1,2\n")},
		}
		if err := r.Finish(ctx, "Here is the chart.", files); err != nil {
			t.Fatal(err)
		}
		msgs := e.srv.BotMessages(108)
		if len(msgs) != 3 || msgs[0].Text != "Here is the chart." || msgs[1].Kind != "photo" || msgs[2].Kind != "document" ||
			msgs[2].FileName != "data.csv" || string(msgs[2].Data) != "a,b\n1,2\n" {
			t.Fatalf("unexpected ref: %+v", msgs)
		}
	})
}

// An image Telegram refuses as a photo (here: sides of ratio 1:210) still arrives, as a document.
func TestRefusedPhotoGoesAsDocument(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, tk.Options{InMemory: true}, nil)
		ref := e.chat(111, 0)
		var png bytes.Buffer
		if err := pngpkg.Encode(&png, image.NewGray(image.Rect(0, 0, 2100, 10))); err != nil {
			t.Fatal(err)
		}
		files := []chat.File{{Name: "strip.png", MIME: "image/png", Data: png.Bytes()}}
		ctx := context.Background()
		if err := e.ad.Engine().NewReply(ctx, ref, adapters.SendOptions{}).Finish(ctx, "A very wide chart.", files); err != nil {
			t.Fatal(err)
		}
		msgs := e.srv.BotMessages(111)
		if len(msgs) != 2 || msgs[1].Kind != "document" || msgs[1].FileName != "strip.png" || !bytes.Equal(msgs[1].Data, png.Bytes()) {
			t.Fatalf("unexpected ref: %+v", msgs)
		}
	})
}

func TestTooLongIsSplitFurther(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, tk.Options{InMemory: true}, nil)
		chat := e.chat(110, 0)
		// Telegram counts differently than we thought once: the part is split smaller.
		e.srv.AddFault(tk.Fault{Kind: tk.FaultTooLong, ChatID: 110})
		final := strings.Repeat("A line of the final answer.\n", 100)
		if err := e.ad.Engine().Notice(context.Background(), chat, final, adapters.SendOptions{}); err != nil {
			t.Fatal(err)
		}
		var all strings.Builder
		msgs := e.srv.BotMessages(110)
		for _, m := range msgs {
			all.WriteString(m.Text)
		}
		if len(msgs) < 2 || strip(all.String()) != strip(final) {
			t.Fatalf("%d messages; text lost: %v", len(msgs), strip(all.String()) != strip(final))
		}
	})
}

func TestTemporaryFailuresAreRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, tk.Options{InMemory: true}, nil)
		chat := e.chat(109, 0)
		e.srv.AddFault(tk.Fault{Kind: tk.Fault5xx, ChatID: 109, Times: 2})
		ctx := context.Background()
		if err := e.ad.Engine().Notice(ctx, chat, "survives two 502s", adapters.SendOptions{}); err != nil {
			t.Fatal(err)
		}
		assertTexts(t, e.botTexts(109), []string{"survives two 502s"})
		// Bounded: a server that keeps failing ends the delivery with an error, token-free.
		e.srv.AddFault(tk.Fault{Kind: tk.Fault5xx, ChatID: 109, Times: 100})
		err := e.ad.Engine().Notice(ctx, chat, "never arrives", adapters.SendOptions{})
		if err == nil {
			t.Fatal("a permanently failing server should fail the delivery")
		}
		if strings.Contains(err.Error(), e.srv.Token()) {
			t.Fatalf("token in error: %v", err)
		}
	})
}

func TestNoGoroutinesLeft(t *testing.T) {
	before := runtime.NumGoroutine()
	func() {
		srv, err := tk.New(tk.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Close()
		ad, err := New(Options{Token: srv.Token(), APIEndpoint: srv.Endpoint(), PollTimeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		srv.Send(tk.Inbound{Chat: tk.Chat{ID: 5}, From: tk.User{ID: 5}, Text: "hi"})
		ctx, cancel := context.WithCancel(context.Background())
		handled := make(chan struct{})
		go func() {
			<-handled
			cancel()
		}()
		err = ad.Run(ctx, handlerFunc(func(ctx context.Context, in adapters.Inbound, out adapters.Responder) {
			r := out.NewReply(ctx)
			r.Working(true)
			r.Update("partial")
			_ = r.Finish(ctx, "done", nil)
			close(handled)
		}))
		if err != nil {
			t.Fatal(err)
		}
	}()
	wait.For(t, "goroutines to end", func() bool { return runtime.NumGoroutine() <= before+2 })
}

type handlerFunc func(context.Context, adapters.Inbound, adapters.Responder)

func (f handlerFunc) Handle(ctx context.Context, in adapters.Inbound, out adapters.Responder) {
	f(ctx, in, out)
}

func TestReplyFollowsGroupUpgradedToSupergroup(t *testing.T) {
	for _, when := range []string{"before the reply", "during the reply"} {
		t.Run(when, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t, tk.Options{InMemory: true}, nil)
				const oldID, newID = -4242, -1004242
				userMsg := e.srv.Send(tk.Inbound{Chat: tk.Chat{ID: oldID, Type: "group", Title: "team"}, From: ann, Text: "hi"})
				chat := chat.Ref{Platform: chat.Telegram, ChatID: strconv.Itoa(oldID)}
				ctx := context.Background()
				r := e.ad.Engine().NewReply(ctx, chat, adapters.SendOptions{ReplyTo: strconv.Itoa(userMsg)})
				if when == "before the reply" {
					e.srv.MigrateChat(oldID, tk.Chat{ID: newID, Title: "team"})
				}
				r.Update("streaming the answer")
				wait.For(t, "the preview", func() bool { return len(e.srv.BotMessages(oldID))+len(e.srv.BotMessages(newID)) == 1 })
				if when == "during the reply" {
					e.srv.MigrateChat(oldID, tk.Chat{ID: newID, Title: "team"})
				}
				final := "streaming the answer, complete."
				if err := r.Finish(ctx, final, nil); err != nil {
					t.Fatalf("Finish after the upgrade: %v", err)
				}
				assertTexts(t, e.botTexts(newID), want(final))
				upgraded := e.count("", 400)
				if upgraded == 0 {
					t.Fatal("the server never answered that the group was upgraded")
				}

				// A later reply to the old chat id goes straight to the supergroup.
				r = e.ad.Engine().NewReply(ctx, chat, adapters.SendOptions{})
				if err := r.Finish(ctx, "second answer", nil); err != nil {
					t.Fatalf("second reply: %v", err)
				}
				if got := e.botTexts(newID); len(got) != 2 || got[1] != "second answer" {
					t.Errorf("supergroup shows %q, want the second answer after the first", got)
				}
				if n := e.count("", 400); n != upgraded {
					t.Errorf("the second reply was sent to the old group again (%d more 400s)", n-upgraded)
				}
			})
		})
	}
}

func TestPaidBroadcastLiftsTheGlobalBudgetWithout429s(t *testing.T) {
	tests := []struct {
		name      string
		perSecond int
		paid      bool
		server    tk.Options
	}{
		// The fake takes 5 a second unpaid: only sends marked as paid broadcast pass 50 at once.
		{"paid at 1000 a second", 1000, true, tk.Options{GlobalPerSecond: 5, PaidPerSecond: 1000}},
		{"free at the default 30", 0, false, tk.Options{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t, inMemory(tt.server), func(o *Options) { o.GlobalPerSecond, o.PaidBroadcast = tt.perSecond, tt.paid })
				if got := e.ad.Limits().Global.N; got != 30 {
					t.Fatalf("drafts and edits are paced at %d a second, want Telegram's free 30", got)
				}
				const n = 50
				chats := make([]chat.Ref, n)
				for i := range chats {
					chats[i] = e.chat(int64(5000+i), 0)
				}
				var wg sync.WaitGroup
				for i, c := range chats {
					wg.Go(func() {
						if err := e.ad.Engine().Notice(context.Background(), c, fmt.Sprintf("notice %d", i), adapters.SendOptions{}); err != nil {
							t.Error(err)
						}
					})
				}
				wg.Wait()
				if got := e.count("", 429); got != 0 {
					t.Errorf("%d sends were refused with 429", got)
				}
				for _, c := range e.srv.Calls() {
					if c.Method == "sendMessage" && (c.Params["allow_paid_broadcast"] == "true") != tt.paid {
						t.Errorf("sendMessage to chat %d: allow_paid_broadcast = %q, want paid %v", c.ChatID, c.Params["allow_paid_broadcast"], tt.paid)
					}
				}
				for i := range n {
					assertTexts(t, e.botTexts(int64(5000+i)), []string{fmt.Sprintf("notice %d", i)})
				}
			})
		})
	}
}

func TestGlobalBudgetAboveThirtyNeedsPaidBroadcast(t *testing.T) {
	srv, err := tk.New(tk.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	_, err = New(Options{Token: srv.Token(), APIEndpoint: srv.Endpoint(), GlobalPerSecond: 100})
	if err == nil || !strings.Contains(err.Error(), "needs paid broadcast") {
		t.Fatalf("New with 100 a second unpaid: err = %v, want it refused for lack of paid broadcast", err)
	}
}

// TestPaidBroadcastMarksSendsOnly streams a reply in a supergroup (a message, its edits) and in
// a private chat (drafts, then the message) with paid broadcast on, against a server that
// refuses allow_paid_broadcast where the Bot API does not document it (editMessageText,
// sendMessageDraft): every preview and final shows, nothing is refused, and only the sends
// carry the flag.
func TestPaidBroadcastMarksSendsOnly(t *testing.T) {
	tests := []struct {
		name    string
		chatID  int64
		preview string // the method that shows the streamed text
	}{
		{"group: a message and its edits", -1009001, "editMessageText"},
		{"private: drafts", 9002, "sendMessageDraft"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t, tk.Options{InMemory: true}, func(o *Options) { o.GlobalPerSecond, o.PaidBroadcast, o.Drafts = 1000, true, true })
				ref := e.chat(tt.chatID, 0)
				ctx := context.Background()
				r := e.ad.Engine().NewReply(ctx, ref, adapters.SendOptions{})
				r.Update("first words")
				wait.For(t, "the first preview", func() bool { return e.count(tt.preview, 200)+e.count("sendMessage", 200) >= 1 })
				r.Update("first words, and more")
				wait.For(t, "a preview by "+tt.preview, func() bool { return e.count(tt.preview, 200) >= 1 })
				final := "first words, and more, and the end"
				if err := r.Finish(ctx, final, nil); err != nil {
					t.Fatal(err)
				}
				assertTexts(t, e.botTexts(tt.chatID), want(final))
				for _, c := range e.srv.Calls() {
					paid := c.Params["allow_paid_broadcast"] == "true"
					switch {
					case c.Code != 200:
						t.Errorf("%s answered %d: the user would miss that text", c.Method, c.Code)
					case c.Method == "sendMessage" && !paid:
						t.Errorf("sendMessage without allow_paid_broadcast: it would count against the free 30 a second")
					case c.Method != "sendMessage" && paid:
						t.Errorf("%s carries allow_paid_broadcast, which it does not take", c.Method)
					}
				}
			})
		})
	}
}

// inMemory is o serving in memory, for a test in a testing/synctest bubble.
func inMemory(o tk.Options) tk.Options {
	o.InMemory = true
	return o
}
