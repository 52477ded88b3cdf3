package pipeline

import (
	"context"
	"strings"
	"sync"
	"testing"

	"relaybot/adapters"
	"relaybot/internal/testkit/llm"
)

var _ adapters.ThreadTitler = (*titlingResponder)(nil)

// titlingResponder is a recResponder of a message that opened a thread (or whose thread the
// platform refused): it keeps the titles it is given.
type titlingResponder struct {
	recResponder
	opened bool
	mu     sync.Mutex
	titles []string
}

func (r *titlingResponder) ThreadOpened() bool { return r.opened }

func (r *titlingResponder) TitleThread(ctx context.Context, title string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.titles = append(r.titles, title)
	return nil
}

func TestAThreadTheBotOpenedIsTitledOnceByTheModel(t *testing.T) {
	cases := []struct {
		name      string
		opens     bool
		opened    bool
		wantTitle []string
	}{
		{"a thread opened", true, true, []string{"Tides and the Moon"}},
		{"a thread the platform refused", true, false, nil},
		{"no thread", false, false, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Options{})
			h.llm.Push(llm.Text("Tides ", "come from the moon."), llm.Text(`"Tides and the Moon."`))
			out := &titlingResponder{recResponder: recResponder{stream: true}, opened: tc.opened}
			in := privateMsg("42", "1", "why are there tides?")
			in.OpensThread, in.TitlesThread = tc.opens, tc.opens
			<-h.handle(in, out)

			if final, _ := out.Reply(0).Final(); final != "Tides come from the moon." {
				t.Fatalf("answer %q", final)
			}
			if strings.Join(out.titles, "|") != strings.Join(tc.wantTitle, "|") {
				t.Fatalf("titles %q, want %q", out.titles, tc.wantTitle)
			}
			reqs := h.llm.Requests()
			if tc.wantTitle == nil {
				if len(reqs) != 1 {
					t.Fatalf("%d model calls, want the answer's only", len(reqs))
				}
				return
			}
			if len(reqs) != 2 || !strings.Contains(lastUserContent(reqs[1]), "why are there tides?") ||
				!strings.Contains(lastUserContent(reqs[1]), "come from the moon") {
				t.Fatalf("the title's model call did not read the question and the answer: %+v", reqs)
			}
			turn, ok, err := h.store.Turns.TurnByInbound(context.Background(), in.Chat, in.MessageID)
			if err != nil || !ok {
				t.Fatalf("turn: %v %v", ok, err)
			}
			// The answer streamed 2 chunks and the title 1: the turn's usage counts both calls.
			if turn.TokensOut != 3 {
				t.Errorf("the turn counts %d output tokens, want the answer's and the title's (3)", turn.TokensOut)
			}
		})
	}
}

func TestNewStartsANewConversation(t *testing.T) {
	h := newHarness(t, Options{})
	h.llm.Push(llm.Text("First."), llm.Text("Second."))
	out := &recResponder{stream: true}
	<-h.handle(privateMsg("42", "1", "remember: blue"), out)
	<-h.handle(privateMsg("42", "2", "/new"), out)
	if n := out.Notices(); len(n) != 1 || n[0] != "Started a new conversation." {
		t.Fatalf("notices %q", n)
	}
	<-h.handle(privateMsg("42", "3", "what colour?"), out)
	reqs := h.llm.Requests()
	for _, m := range reqs[len(reqs)-1].Messages {
		if strings.Contains(m.Content, "blue") {
			t.Fatalf("the conversation after /new still holds the earlier one: %+v", reqs[len(reqs)-1].Messages)
		}
	}
}
