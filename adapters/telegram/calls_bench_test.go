package telegram

import (
	"bufio"
	"context"
	"fmt"
	"net/http/httptrace"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"relaybot/adapters"
	"relaybot/chat"
	tk "relaybot/internal/testkit/telegram"
)

// fakeProcessEnv names the environment that makes TestHelperFakeTelegram serve.
const fakeProcessEnv = "RELAYBOT_TG_FAKE_PROCESS"

// benchChat is the private chat the fake of BenchmarkCall knows from the start; so it knows
// the turnChats private chats from turnChat0 on.
var benchChat = tk.Chat{ID: 4242, Type: "private"}

const (
	turnChats = 100
	turnChat0 = 5000
)

// TestHelperFakeTelegram is not a test: BenchmarkCall runs it in a child process, so that the
// fake's own allocations stay out of the benchmark's counts. It serves the testkit's Telegram
// without pacing, prints "endpoint token" on a line and serves until its stdin closes. After
// every getUpdates it answers, the user writes once more, so that each poll finds an update.
func TestHelperFakeTelegram(t *testing.T) {
	if os.Getenv(fakeProcessEnv) == "" {
		t.Skip("run by BenchmarkCall")
	}
	var srv atomic.Pointer[tk.Server]
	s, err := tk.New(tk.Options{NoLimits: true, OnCall: func(c tk.Call) {
		if c.Method == "getUpdates" {
			srv.Load().Send(tk.Inbound{Chat: benchChat, From: ann, Text: "what is the time?"})
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	srv.Store(s)
	defer s.Close()
	s.Send(tk.Inbound{Chat: benchChat, From: ann, Text: "hi"})
	for i := range turnChats {
		s.Send(tk.Inbound{Chat: tk.Chat{ID: turnChat0 + int64(i), Type: "private"}, From: ann, Text: "hi"})
	}
	fmt.Printf("%s %s\n", s.Endpoint(), s.Token())
	bufio.NewReader(os.Stdin).ReadString('\n') // until the benchmark closes stdin
}

// startFakeProcess runs the testkit's Telegram in a child process and returns its endpoint and
// token.
func startFakeProcess(b *testing.B) (endpoint, token string) {
	b.Helper()
	child := exec.Command(os.Args[0], "-test.run=^TestHelperFakeTelegram$", "-test.count=1")
	child.Env = append(os.Environ(), fakeProcessEnv+"=1")
	stdin, err := child.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := child.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		stdin.Close()
		child.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	endpoint, token, ok := strings.Cut(strings.TrimSpace(line), " ")
	if err != nil || !ok {
		b.Fatalf("the fake Telegram did not start: %q, %v", line, err)
	}
	return endpoint, token
}

// processCPU is the CPU time this process has used so far (user and system), in nanoseconds.
func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkCall makes each Bot API call of a turn in a private chat once an iteration: the
// poll that brings the user's message (getUpdates, its answer decoded and sorted), the typing
// indicator, a draft of the answer, an edit of a message still streaming (the previews of a
// group) and the final sendMessage, with a 100-token answer in Markdown. The testkit's Telegram
// runs in a child process, so allocs/op, B/op and cpu-ns/op (the CPU time of this process) are
// the bot's side alone (http.Transport's included).
//
//	go test ./adapters/telegram -run '^$' -bench 'Call/' -benchmem -benchtime 2000x
func BenchmarkCall(b *testing.B) {
	endpoint, token := startFakeProcess(b)
	ad, err := New(Options{Token: token, APIEndpoint: endpoint, Stream: true, Drafts: true,
		PaidBroadcast: true, GlobalPerSecond: 1000, PollTimeout: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer ad.Engine().Close()
	m := &messenger{api: ad.api, drafts: true, paid: true}
	ctx := context.Background()
	ref := chat.Ref{Platform: chat.Telegram, ChatID: fmt.Sprint(benchChat.ID)}
	text := strings.Join(answer(100), "")
	// An edit must change the text (Telegram refuses one that does not): two texts in turn.
	texts := [2]string{text, text + "!"}
	sent, err := m.Send(ctx, ref, text, adapters.SendOptions{})
	if err != nil {
		b.Fatal(err)
	}
	var offset int64
	edits := 0 // the message was sent with texts[0]
	cases := []struct {
		name string
		call func(i int) error
	}{
		{"getUpdates", func(int) error {
			ups, err := ad.getUpdates(ctx, offset)
			if err != nil {
				return err
			}
			got, next := ad.sortUpdates(ups, offset)
			if len(got.msgs) == 0 {
				return fmt.Errorf("getUpdates from %d brought no message", offset)
			}
			offset = next
			return nil
		}},
		{"sendChatAction", func(int) error { return m.Typing(ctx, ref) }},
		{"sendMessageDraft", func(i int) error { return m.Draft(ctx, ref, 7, texts[i%2], true) }},
		{"editMessageText", func(int) error {
			edits++
			return m.EditStreaming(ctx, sent, texts[edits%2])
		}},
		{"sendMessage", func(int) error {
			_, err := m.Send(ctx, ref, text, adapters.SendOptions{ReplyTo: "1", Stoppable: true})
			return err
		}},
	}
	b.Run("turns in 100 chats at once", func(b *testing.B) { benchTurns(b, m, text) })
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			cpu := processCPU()
			for i := range b.N {
				if err := c.call(i); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}

// benchTurns makes b.N turns' calls in private chats, turnChats at once: the typing indicator,
// a draft and the answer. An op is a turn; dials/op counts the connections opened for them.
func benchTurns(b *testing.B, m *messenger, text string) {
	var dials atomic.Int64
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{GotConn: func(c httptrace.GotConnInfo) {
		if !c.Reused {
			dials.Add(1)
		}
	}})
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ReportAllocs()
	cpu := processCPU()
	for i := range turnChats {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ref := chat.Ref{Platform: chat.Telegram, ChatID: strconv.Itoa(turnChat0 + i)}
			for next.Add(1) <= int64(b.N) {
				err := m.Typing(ctx, ref)
				if err == nil {
					err = m.Draft(ctx, ref, 7, text, true)
				}
				if err == nil {
					_, err = m.Send(ctx, ref, text, adapters.SendOptions{ReplyTo: "1", Stoppable: true})
				}
				if err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(dials.Load())/float64(b.N), "dials/op")
}
