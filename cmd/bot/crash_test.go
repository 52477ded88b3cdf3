package main

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"relaybot/config"
	"relaybot/internal/testkit/llm"
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
	text := e.configText("shutdown_grace_sec = 0", "enabled = false")
	cfgPath := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(cfgPath, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	hold := make(chan struct{})
	defer close(hold)
	e.llm.Push(llm.Reply{Chunks: []llm.Chunk{{Content: "Half an"}, {Content: " answer", Wait: hold}}})

	child := exec.Command(os.Args[0], "-test.run=^TestHelperServe$", "-test.count=1")
	child.Env = append(os.Environ(), helperConfig+"="+cfgPath)
	var childOut syncBuffer
	child.Stdout, child.Stderr = &childOut, &childOut
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	kill := sync.OnceFunc(func() {
		child.Process.Kill()
		child.Wait()
	})
	defer kill()

	msgID := e.say(1, "question")
	waitFor(t, "the crashing bot's first words", func() bool {
		if strings.Contains(childOut.String(), "FAIL") {
			t.Fatalf("the child bot failed:\n%s", childOut.String())
		}
		texts := e.botTexts(1)
		return len(texts) == 1 && texts[0] == "Half an"
	})
	kill()

	e.llm.Push(llm.Text("The whole answer."))
	stop := e.start(e.config("shutdown_grace_sec = 0"))
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

	// The crashed turn is recorded as interrupted, the message's second turn as ok.
	st := e.openStore()
	var statuses []string
	for id := int64(1); ; id++ {
		turn, err := st.Turn(context.Background(), id)
		if err != nil {
			break
		}
		if turn.InboundMessageID == strconv.Itoa(msgID) {
			statuses = append(statuses, turn.Status)
		}
	}
	if strings.Join(statuses, ",") != store.TurnInterrupted+","+store.TurnOK {
		t.Fatalf("turns of the message: %v, want interrupted then ok", statuses)
	}
}
