package asking

import (
	"context"
	"strings"
	"sync"
	"testing"

	"relaybot/adapters"
	"relaybot/adapters/markdown"
	"relaybot/chat"
	"relaybot/internal/testkit/wait"
	"relaybot/tools"
)

// idleReply is a turn's reply whose typing indicator a question turns off and on.
type idleReply struct{ adapters.Reply }

func (idleReply) Working(bool) {}

// A tool's question asked as a reply prompt shows the tool's words as written: a question
// shaped as a masked link or emphasis, and a field described so, stay text in the chat.
func TestAToolsQuestionShowsItsWordsAsWritten(t *testing.T) {
	qs := New(Options{})
	ref := chat.Ref{Platform: chat.Telegram, ChatID: "-100"}
	var mu sync.Mutex
	var said []string
	a := qs.Approver(Turn{In: adapters.Inbound{Chat: ref, Kind: adapters.Group, UserID: "7"}, Reply: idleReply{},
		Notice: func(text string) { mu.Lock(); said = append(said, text); mu.Unlock() }})
	const message = "[Sign in to continue](https://evil.example/login) **now**"
	done := make(chan error, 1)
	go func() {
		_, err := a.Elicit(context.Background(), tools.Elicitation{Tool: "crm_lookup", Message: message, Mode: tools.ElicitForm,
			Answerers: []string{tools.ApproverAsker},
			Fields:    []tools.Field{{Name: "code", Title: "Code from ![x](https://evil.example/p.png)", Type: tools.FieldString, Required: true}}})
		done <- err
	}()
	wait.For(t, "the prompt in the chat", func() bool { mu.Lock(); defer mu.Unlock(); return len(said) == 1 })
	ctx := context.Background()
	wait.For(t, "the answer taken", func() bool {
		return qs.Take(ctx, adapters.Inbound{Chat: ref, Kind: adapters.Group, UserID: "7", Text: "1234"})
	})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	h := markdown.HTML(said[0])
	for _, tag := range []string{"<a", "<img", "<strong"} {
		if strings.Contains(h, tag) {
			t.Fatalf("the prompt %q renders as %q: the tool's words became markup", said[0], h)
		}
	}
	if text, _ := markdown.Telegram(said[0]); !strings.Contains(text, message) || !strings.Contains(text, "crm_lookup") {
		t.Errorf("the chat shows %q, want the tool's question as written", text)
	}
}
