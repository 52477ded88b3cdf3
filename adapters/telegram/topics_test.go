package telegram

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"relaybot/adapters"
	tk "relaybot/internal/testkit/telegram"
)

// keeper answers every message with "ok: text" and keeps what it got, responders included.
type keeper struct {
	mu   sync.Mutex
	ins  []adapters.Inbound
	outs []adapters.Responder
	ch   chan struct{}
}

func (k *keeper) Handle(ctx context.Context, in adapters.Inbound, out adapters.Responder) {
	r := out.NewReply(ctx)
	r.Update("thinking")
	time.Sleep(3 * time.Second) // in the test's bubble: the preview goes out meanwhile
	_ = r.Finish(ctx, "ok: "+in.Text+in.Command, nil)
	k.mu.Lock()
	k.ins, k.outs = append(k.ins, in), append(k.outs, out)
	k.mu.Unlock()
	k.ch <- struct{}{}
}

// next waits for the next message handled and returns it with its responder.
func (k *keeper) next(t *testing.T) (adapters.Inbound, adapters.Responder) {
	t.Helper()
	<-k.ch
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.ins[len(k.ins)-1], k.outs[len(k.outs)-1]
}

func TestPrivateTopicsGiveEachConversationATopic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, tk.Options{InMemory: true}, func(o *Options) { o.PrivateTopics, o.Drafts = true, true })
		k := &keeper{ch: make(chan struct{}, 10)}
		stop := startRun(t, e.ad, k)
		defer stop()
		synctest.Wait()
		if !e.srv.PrivateTopics() {
			t.Fatal("the bot did not turn its topics in private chats on")
		}
		dm := tk.Chat{ID: 42, Type: "private"}

		e.srv.Send(tk.Inbound{Chat: dm, From: ann, Text: "why are there tides\nand why twice"})
		in, out := k.next(t)
		topic, _ := strconv.Atoi(in.Chat.ThreadID)
		if topic == 0 || !in.OpensThread || !in.TitlesThread || in.Chat.ChatID != "42" {
			t.Fatalf("the question was handed over as %+v, want it in a topic it opened", in)
		}
		if name := e.srv.Topics(42)[topic]; name != "why are there tides" {
			t.Errorf("topic named %q, want the question's first line", name)
		}
		synctest.Wait()
		answered := false
		for _, m := range e.srv.BotMessages(42) {
			if m.ThreadID != topic {
				t.Errorf("a bot message outside the topic: %q in thread %d", m.Text, m.ThreadID)
			}
			answered = answered || strings.HasPrefix(m.Text, "ok: why are there tides")
		}
		if !answered {
			t.Errorf("no answer in the topic: %+v", e.srv.BotMessages(42))
		}
		drafted := false
		for _, c := range e.srv.Calls() {
			drafted = drafted || c.Method == "sendMessageDraft" && c.ThreadID == topic
		}
		if !drafted {
			t.Error("the answer in the topic did not stream as drafts")
		}

		// The title renames the topic.
		titler, ok := out.(adapters.ThreadTitler)
		if !ok || !titler.ThreadOpened() {
			t.Fatal("the responder of a message that opened a topic cannot title it")
		}
		if err := titler.TitleThread(context.Background(), "Tides, twice a day"); err != nil {
			t.Fatal(err)
		}
		if name := e.srv.Topics(42)[topic]; name != "Tides, twice a day" {
			t.Errorf("topic renamed to %q", name)
		}

		// A message in the topic continues it.
		e.srv.Send(tk.Inbound{Chat: dm, From: ann, ThreadID: topic, Text: "and the moon?"})
		in, _ = k.next(t)
		if in.Chat.ThreadID != strconv.Itoa(topic) || in.OpensThread || in.TitlesThread {
			t.Fatalf("the follow-up was handed over as %+v, want the same topic", in)
		}

		// /new in the topic opens another.
		e.srv.Send(tk.Inbound{Chat: dm, From: ann, ThreadID: topic, Text: "/new"})
		in, _ = k.next(t)
		if in.Command != "new" || !in.OpensThread || in.Chat.ThreadID == strconv.Itoa(topic) || in.Chat.ThreadID == "" {
			t.Fatalf("/new was handed over as %+v, want it in a new topic", in)
		}
		if n := len(e.srv.Topics(42)); n != 2 {
			t.Errorf("%d topics, want 2", n)
		}
		if name := e.srv.Topics(42)[atoiT(in.Chat.ThreadID)]; name != newTopicName || in.TitlesThread {
			t.Errorf("/new's topic named %q (its notice titling it: %v)", name, in.TitlesThread)
		}
		// The first question in /new's topic titles it; the next one does not.
		fresh := atoiT(in.Chat.ThreadID)
		for i, want := range []bool{true, false} {
			e.srv.Send(tk.Inbound{Chat: dm, From: ann, ThreadID: fresh, Text: "question"})
			q, qout := k.next(t)
			if q.TitlesThread != want || q.OpensThread {
				t.Errorf("question %d in /new's topic: titles %v opens %v, want titles %v", i, q.TitlesThread, q.OpensThread, want)
			}
			if _, ok := qout.(adapters.ThreadTitler); ok != want {
				t.Errorf("question %d's responder titles: %v, want %v", i, ok, want)
			}
		}
		// A command other than /new in the main chat opens none.
		e.srv.Send(tk.Inbound{Chat: dm, From: ann, Text: "/usage"})
		if in, _ = k.next(t); in.OpensThread || in.Chat.ThreadID != "" {
			t.Errorf("/usage was handed over as %+v", in)
		}
	})
}

func atoiT(s string) int { n, _ := strconv.Atoi(s); return n }

func TestPrivateTopicsFallBackToTheChatOnceSaid(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// A Bot API server older than setMySettings, and a bot without topics in private chats.
		e := newEnv(t, tk.Options{InMemory: true, WithoutSettings: true}, func(o *Options) { o.PrivateTopics = true })
		k := &keeper{ch: make(chan struct{}, 10)}
		stop := startRun(t, e.ad, k)
		defer stop()
		dm := tk.Chat{ID: 42, Type: "private"}
		for _, text := range []string{"one", "two"} {
			e.srv.Send(tk.Inbound{Chat: dm, From: ann, Text: text})
			in, out := k.next(t)
			if in.OpensThread || in.Chat.ThreadID != "" {
				t.Fatalf("handed over as %+v, want the chat as before", in)
			}
			if _, ok := out.(adapters.ThreadTitler); ok {
				t.Error("a responder without a topic offers to title one")
			}
		}
		synctest.Wait()
		if n := strings.Count(e.logs.String(), "private_topics is on but"); n != 1 {
			t.Errorf("the log says %d times that private topics are off, want once:\n%s", n, e.logs.String())
		}
		for _, c := range e.srv.Calls() {
			if c.Method == "createForumTopic" {
				t.Errorf("a topic was asked for in a chat without topics")
			}
		}
		if got := len(e.srv.BotMessages(42)); got != 2 {
			t.Errorf("%d answers in the chat, want 2", got)
		}
	})
}

func TestATopicTelegramRefusesStillGetsItsAnswerInTheChat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, tk.Options{InMemory: true, PrivateTopics: true}, func(o *Options) { o.PrivateTopics = true })
		k := &keeper{ch: make(chan struct{}, 10)}
		stop := startRun(t, e.ad, k)
		defer stop()
		synctest.Wait()
		// The user's client or a moderator turned the bot's topics off meanwhile.
		e.srv.SetPrivateTopics(false)
		e.srv.Send(tk.Inbound{Chat: tk.Chat{ID: 42, Type: "private"}, From: ann, Text: "hello"})
		in, _ := k.next(t)
		if in.OpensThread || in.Chat.ThreadID != "" {
			t.Fatalf("handed over as %+v", in)
		}
		synctest.Wait()
		if got := e.srv.BotMessages(42); len(got) != 1 || got[0].Text != "ok: hello" {
			t.Errorf("the chat shows %+v, want the answer", got)
		}
		if !strings.Contains(e.logs.String(), "Telegram says the bot has no topics in private chats") {
			t.Errorf("the log does not say why:\n%s", e.logs.String())
		}
	})
}
