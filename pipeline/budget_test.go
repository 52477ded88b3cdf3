package pipeline

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"relaybot/chat"
	"relaybot/internal/testkit/llm"
	"relaybot/pipeline/history"
	"relaybot/store"
)

// endsStore records the turn ends the pipeline saves.
type endsStore struct {
	Turns
	mu   sync.Mutex
	ends []store.TurnEnd
}

func (s *endsStore) FinishTurn(ctx context.Context, e store.TurnEnd) error {
	s.mu.Lock()
	s.ends = append(s.ends, e)
	s.mu.Unlock()
	return s.Turns.FinishTurn(ctx, e)
}

// savedCalls returns the model calls the store keeps of turn id, in order.
func savedCalls(t *testing.T, h *harness, id int64) []chat.ModelCall {
	t.Helper()
	tl, err := h.store.Timelines.TurnTimeline(context.Background(), id)
	if err != nil {
		t.Fatalf("timeline of turn %d: %v", id, err)
	}
	return tl.LLMCalls
}

// windowModel plays a model with a context window of window tokens, counted as a quarter of each
// message's JSON: a longer request is refused with a context-length error, as providers do. It
// reports the count as the prompt's usage, fetches a page when asked to, and summarises when
// given the summary instruction.
type windowModel struct {
	window int
	mu     sync.Mutex
	most   int
	refused,
	summaries int
}

func (w *windowModel) tokens(req llm.Request) int {
	n := 0
	for _, m := range req.Messages {
		n += len(m.Raw) / 4
	}
	return n
}

func (w *windowModel) reply(req llm.Request) llm.Reply {
	n := w.tokens(req)
	w.mu.Lock()
	w.most = max(w.most, n)
	if n > w.window {
		w.refused++
		w.mu.Unlock()
		return llm.Fault(400, fmt.Sprintf("This model's maximum context length is %d tokens. However, your messages resulted in %d tokens. (context_length_exceeded)", w.window, n))
	}
	last := req.Messages[len(req.Messages)-1]
	summary := strings.HasPrefix(req.Messages[0].Content, "You write the memory") || strings.HasPrefix(last.Content, "[Summary request]")
	if summary {
		w.summaries++
	}
	w.mu.Unlock()
	var r llm.Reply
	switch {
	case summary:
		r = llm.Text("SUMMARY: the user asked numbered questions and fetched pages.")
	case last.Role == "tool":
		r = llm.Text("The page says: " + strings.Repeat("words ", 40))
	case strings.HasPrefix(last.Content, "fetch"):
		r = llm.ToolCalls(llm.Call{ID: "call_" + last.Content[len("fetch "):], Name: "page", Args: []string{`{"text":"x"}`}})
	default:
		r = llm.Text("An answer of some length: " + strings.Repeat("more ", 60))
	}
	r.Usage = &llm.Usage{PromptTokens: n, CompletionTokens: 50}
	return r
}

func TestLongConversationWithBigToolResultsStaysWithinTheWindow(t *testing.T) {
	var rec *endsStore
	h := newHarnessStore(t, Options{
		Models:  ModelOptions{Budgets: []history.ModelBudget{{Name: "primary", ContextWindow: 8000, MaxOutputTokens: 1000}}},
		History: history.Options{ToolResultMaxChars: pageChars, Rounds: 1000},
	}, func(st Store) Store { rec = &endsStore{Turns: st.Turns}; st.Turns = rec; return st })
	model := &windowModel{window: 8000}
	h.llm.SetHandler(model.reply)
	out := &recResponder{stream: true}
	for i := 1; i <= 200; i++ {
		text := fmt.Sprint("question ", i)
		if i%3 == 0 {
			text = fmt.Sprint("fetch ", i)
		}
		<-h.handle(privateMsg("42", fmt.Sprint(i), text), out)
	}

	for i, e := range rec.ends {
		if e.Status != store.TurnOK {
			t.Fatalf("turn %d ended %s (%s): the user saw a failure", i+1, e.Status, e.Error)
		}
	}
	if len(rec.ends) != 200 {
		t.Fatalf("%d turns saved, want 200", len(rec.ends))
	}
	if model.refused > 0 || model.most > 8000 {
		t.Errorf("the model was sent up to %d tokens (%d requests refused), want at most its window of 8000", model.most, model.refused)
	}
	t.Logf("most %d refused %d summaries %d", model.most, model.refused, model.summaries)
	if model.summaries == 0 {
		t.Fatal("the conversation was never summarised")
	}

	conv, err := h.store.Conversations.Conversation(context.Background(), history.KeyOf(privateMsg("42", "x", "x"), false))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(conv.Summary, "SUMMARY:") || conv.SummaryTurnID == 0 {
		t.Errorf("stored conversation %+v, want the model's summary with it", conv)
	}
	// The tool results stay whole in the store; what the model was sent elided the older ones.
	msgs, err := h.store.Messages.TurnMessages(context.Background(), 3)
	if err != nil {
		t.Fatal(err)
	}
	whole := false
	for _, m := range msgs {
		whole = whole || (m.Role == store.RoleTool && len(m.Content) >= pageChars)
	}
	if !whole {
		t.Errorf("turn 3's page is not stored whole: %+v", msgs)
	}
	// With compaction the rounds after the summary go whole (no result flips to an elision
	// note while it is in the window), and the summary request ends the conversation as sent.
	elided, summarised, atEnd := false, false, false
	for _, r := range h.llm.Requests() {
		for _, m := range r.Messages {
			elided = elided || (m.Role == "tool" && strings.Contains(m.Content, "left out to save room"))
			summarised = summarised || (m.Role == "system" && strings.Contains(m.Content, "SUMMARY:"))
		}
		atEnd = atEnd || strings.HasPrefix(r.Messages[len(r.Messages)-1].Content, "[Summary request]") && len(r.Tools) > 0 && string(r.ToolChoice) == `"none"`
	}
	if elided || !summarised || !atEnd {
		t.Errorf("the model was sent an elided tool result (%v), the summary (%v), a summary request at the conversation's end with its tools listed, not callable (%v); want false, true, true", elided, summarised, atEnd)
	}
	compactions := 0
	for _, e := range rec.ends {
		for _, c := range savedCalls(t, h, e.TurnID) {
			if c.Round == 0 {
				compactions++
			}
		}
	}
	if compactions != model.summaries {
		t.Errorf("the turns' model calls show %d summary calls, the model got %d", compactions, model.summaries)
	}
	if n := countNotice(out.Notices(), history.CompactedNotice); n != model.summaries {
		t.Errorf("the user saw %d compaction notices for %d summaries", n, model.summaries)
	}
}

func countNotice(notices []string, text string) int {
	n := 0
	for _, s := range notices {
		if s == text {
			n++
		}
	}
	return n
}

func TestReportedUsageCorrectsTheEstimate(t *testing.T) {
	// Two chats with the same model and messages; one provider counts three times the tokens
	// the estimate does (another tokenizer). Its chat must get less history, so that what the
	// provider counts still fits.
	lastLen := map[float64]int{}
	for _, scale := range []float64{1, 3} {
		h := newHarness(t, Options{Models: ModelOptions{Budgets: []history.ModelBudget{{Name: "primary", ContextWindow: 6000, MaxOutputTokens: 500}}}, History: history.Options{CompactAt: -1}})
		h.llm.SetHandler(func(req llm.Request) llm.Reply {
			n := 0
			for _, m := range req.Messages {
				n += len(m.Raw) / 4
			}
			r := llm.Text(strings.Repeat("long answer ", 70))
			r.Usage = &llm.Usage{PromptTokens: int(float64(n) * scale), CompletionTokens: 10}
			return r
		})
		out := &recResponder{}
		for i := range 12 {
			<-h.handle(privateMsg("42", fmt.Sprint(i+1), fmt.Sprint("question ", i)), out)
		}
		reqs := h.llm.Requests()
		lastLen[scale] = len(reqs[len(reqs)-1].Messages)
	}
	if lastLen[3] >= lastLen[1] {
		t.Errorf("a provider counting 3x sent %d messages, an honest one %d: the reported usage did not shrink the history", lastLen[3], lastLen[1])
	}
}
