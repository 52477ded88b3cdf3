package main

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"relaybot/chat"
	"relaybot/config"
	"relaybot/internal/testkit/llm"
	"relaybot/internal/testkit/logbuf"
	"relaybot/internal/testkit/wait"
	"relaybot/store"
)

// helperConfig names the config file of the bot TestHelperServe runs.
const helperConfig = "RELAYBOT_SERVE_HELPER_CONFIG"

// TestHelperServe is not a test: TestServeCrashMidTurnAnsweredOnce runs it in a child process
// (bot serve with the config file named by $RELAYBOT_SERVE_HELPER_CONFIG) and kills it.
func TestHelperServe(t *testing.T) {
	path := os.Getenv(helperConfig)
	if path == "" {
		t.Skip("run by TestServeCrashMidTurnAnsweredOnce")
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := serve(context.Background(), cfg, slog.New(slog.NewTextHandler(os.Stderr, nil)), nil); err != nil {
		t.Fatal(err)
	}
}

// The bot is killed (SIGKILL) in the middle of streaming an answer. Started again with the same
// data folder, it answers that message once: not zero times (the offset file hands it over
// again) and not twice.
func TestServeCrashMidTurnAnsweredOnce(t *testing.T) {
	e := newEnv(t)
	cfgPath := e.toml().set("chat", "shutdown_grace_sec", 0).write(t)
	hold := make(chan struct{})
	defer close(hold)
	e.llm.Push(llm.Reply{Chunks: []llm.Chunk{{Content: "Half an"}, {Content: " answer", Wait: hold}}})

	childOut, kill := startChildServe(t, cfgPath)
	defer kill()

	msgID := e.say(1, "question")
	wait.For(t, "the crashing bot's first words", func() bool {
		if strings.Contains(childOut.String(), "FAIL") {
			t.Fatalf("the child bot failed:\n%s", childOut.String())
		}
		texts := e.botTexts(1)
		return len(texts) == 1 && texts[0] == "Half an"
	})
	kill()

	e.llm.Push(llm.Text("The whole answer."))
	stop := e.start(e.config("shutdown_grace_sec", 0))
	e.waitBotText(1, "the answer after the restart", contains("The whole answer."))
	e.say(1, "and then?")
	e.llm.Push(llm.Text("Then more."))
	e.waitBotText(1, "the next answer", contains("Then more."))
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	got := e.botTexts(1)
	want := []string{"Half an", "The whole answer.", "Then more."}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("bot messages %q, want %q: the cut preview, then each message answered once", got, want)
	}

	// The crashed turn was cut (interrupted), then retried when its message was answered again: ok.
	st := e.openStore()
	turns, err := st.Turns.ChatTurns(context.Background(), chat.Ref{Platform: "telegram", ChatID: "1"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	var statuses []string
	for _, turn := range slices.Backward(turns) { // oldest first
		if turn.InboundMessageID == strconv.Itoa(msgID) {
			statuses = append(statuses, string(turn.Status))
		}
	}
	// The cut turn, answered again, leaves the history (retried); its rows stay for the audit.
	if strings.Join(statuses, ",") != string(store.TurnRetried)+","+string(store.TurnOK) {
		t.Fatalf("turns of the message: %v, want retried (cut, answered again) then ok", statuses)
	}
}

// The bot stops after a turn ended ok but before the Telegram adapter recorded that it was done
// with the update (the offset file of that moment is put back). Started again, it is handed the
// message over again, finds the finished turn in the store and does not answer it twice.
func TestServeRedeliveredAnsweredMessageSkipped(t *testing.T) {
	e := newEnv(t)
	cfg := e.config("shutdown_grace_sec", 0)
	hold := make(chan struct{})
	e.llm.Push(llm.Reply{Chunks: []llm.Chunk{{Content: "Whole"}, {Content: " answer.", Wait: hold}}})
	stop := e.start(cfg)
	msgID := e.say(1, "question")
	wait.For(t, "the first words of the answer", func() bool {
		texts := e.botTexts(1)
		return len(texts) == 1 && texts[0] == "Whole"
	})
	// The turn is running: the offset file holds the update as taken, not done.
	journal, err := os.ReadFile(cfg.OffsetPath())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(journal), "take ") || strings.Contains(string(journal), "done ") {
		t.Fatalf("offset file mid-turn:\n%s", journal)
	}
	close(hold)
	e.waitBotText(1, "the whole answer", func(s string) bool { return s == "Whole answer." })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg.OffsetPath(), journal, 0o600); err != nil {
		t.Fatal(err)
	}

	// Only one more reply is queued: a second answer to the question would take it.
	e.llm.Push(llm.Text("Then more."))
	stop = e.start(cfg)
	e.waitLog("redelivered message already answered")
	e.say(1, "and then?")
	e.waitBotText(1, "the next answer", contains("Then more."))
	// The text shows while its turn may still be finishing; stopping now would mark it stopped.
	wait.For(t, "the second turn to end", func() bool {
		return strings.Count(e.logs.String(), `msg="pipeline: turn done"`) == 2
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	got, want := e.botTexts(1), []string{"Whole answer.", "Then more."}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("bot messages %q, want %q: the question answered once", got, want)
	}
	if n := e.llm.RequestCount(); n != 2 {
		t.Fatalf("model asked %d times, want 2", n)
	}
	st := e.openStore()
	turn, found, err := st.Turns.TurnByInbound(context.Background(), chat.Ref{Platform: "telegram", ChatID: "1"}, strconv.Itoa(msgID))
	if err != nil || !found || turn.Status != store.TurnOK {
		t.Fatalf("turn of the question: %+v found %v (%v), want ok", turn, found, err)
	}
	if n, err := st.Turns.CountTurns(context.Background(), store.TurnFilter{}); err != nil || n != 2 {
		t.Fatalf("turns = %d (%v), want 2: one per message", n, err)
	}
}

// startChildServe runs bot serve with the config at cfgPath in a child process of this test
// binary (TestHelperServe), so it can be killed with SIGKILL; it returns the child's output and
// the kill, which also waits for the child (safe to call more than once).
func startChildServe(t *testing.T, cfgPath string) (*logbuf.Buffer, func()) {
	t.Helper()
	child := exec.Command(os.Args[0], "-test.run=^TestHelperServe$", "-test.count=1")
	child.Env = append(os.Environ(), helperConfig+"="+cfgPath)
	out := &logbuf.Buffer{}
	child.Stdout, child.Stderr = out, out
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	return out, sync.OnceFunc(func() {
		child.Process.Kill()
		child.Wait()
	})
}
