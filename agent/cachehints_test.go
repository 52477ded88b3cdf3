package agent_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"relaybot/agent"
	"relaybot/chat"
	"relaybot/internal/testkit/llm"
	"relaybot/provider"
)

// part is a text part of a message's content as Anthropic-compatible endpoints take it.
type part struct {
	Type         string          `json:"type"`
	Text         string          `json:"text"`
	CacheControl json.RawMessage `json:"cache_control"`
}

// marked returns the text parts of a sent message, and which carry a cache_control marker.
func marked(t *testing.T, raw json.RawMessage) (parts []part, marks int) {
	t.Helper()
	var m struct {
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Content) == 0 || m.Content[0] != '[' {
		return nil, 0
	}
	if err := json.Unmarshal(m.Content, &parts); err != nil {
		t.Fatalf("content %s: %v", m.Content, err)
	}
	for _, p := range parts {
		if string(p.CacheControl) == `{"type":"ephemeral"}` {
			marks++
		}
	}
	return parts, marks
}

// A model configured for cache breakpoints gets cache_control on the system prompt's stable part,
// on the last message of the history and on the last message sent (three of Anthropic's four);
// a fallback candidate not configured for them gets none: the field goes only where it is
// understood.
func TestCacheBreakpointsGoOnlyToTheModelsConfiguredForThem(t *testing.T) {
	srvs := newServers(t, 2)
	transport := &http.Transport{}
	t.Cleanup(transport.CloseIdleConnections)
	models := []agent.Model{
		{Endpoint: provider.Endpoint{Name: "claude", BaseURL: srvs[0].URL, Model: "anthropic/claude-sonnet-4.5", Timeout: 10 * time.Second}, SupportsTools: true, CacheBreakpoints: true},
		{Endpoint: provider.Endpoint{Name: "other", BaseURL: srvs[1].URL, Model: "gpt-4.1", Timeout: 10 * time.Second}, SupportsTools: true},
	}
	r, err := agent.NewRunner(models, agent.Options{HTTPClient: &http.Client{Transport: transport}})
	if err != nil {
		t.Fatal(err)
	}
	stable := "You are the club's assistant."
	msgs := []chat.Message{
		{Role: chat.RoleSystem, Content: stable + "\n\nSummary: they met.\n\nCurrent date: 2026-12-07.", Stable: len(stable)},
		{Role: chat.RoleUser, Content: "hello"},
		{Role: chat.RoleAssistant, Content: "Hi."},
		{Role: chat.RoleUser, Content: "where am I?"},
	}
	srvs[0].Push(llm.ToolCalls(llm.Call{ID: "c1", Name: "shell", Args: []string{`{"command":"pwd"}`}}), llm.Text("You are in /work."))
	res := r.Run(t.Context(), agent.Request{Messages: msgs, Tools: shellSpec, Executor: &testExecutor{}, Stream: true}, nil)
	mustOK(t, res)
	reqs := srvs[0].Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want the tool round and the answer", len(reqs))
	}
	sys, marks := marked(t, reqs[0].Messages[0].Raw)
	if len(sys) != 2 || sys[0].Text != stable || marks != 1 || sys[1].CacheControl != nil {
		t.Errorf("system content = %+v, want the stable part marked, then the rest unmarked", sys)
	}
	if _, n := marked(t, reqs[0].Messages[2].Raw); n != 1 {
		t.Errorf("the history's last message %s is not marked", reqs[0].Messages[2].Raw)
	}
	if _, n := marked(t, reqs[0].Messages[3].Raw); n != 1 {
		t.Errorf("the last message sent %s is not marked", reqs[0].Messages[3].Raw)
	}
	total := 0
	for _, m := range reqs[1].Messages {
		_, n := marked(t, m.Raw)
		total += n
	}
	last := reqs[1].Messages[len(reqs[1].Messages)-1]
	if _, n := marked(t, last.Raw); n != 1 || last.Role != "tool" || total != 3 {
		t.Errorf("the answer's request marks %d messages, its last (%s) %d times; want 3, the tool result among them", total, last.Raw, n)
	}
	if len(sys) == 2 && sys[0].Text+sys[1].Text != msgs[0].Content || reqs[0].Messages[1].Content != "hello" {
		t.Errorf("marking changed the text sent: %+v, %q", sys, reqs[0].Messages[1].Content)
	}

	srvs[0].Push(llm.Fault(500, "overloaded"))
	srvs[1].Push(llm.Text("Hello."))
	mustOK(t, r.Run(t.Context(), agent.Request{Messages: msgs, Stream: true}, nil))
	for _, m := range srvs[1].Requests()[0].Messages {
		if strings.Contains(string(m.Raw), "cache_control") {
			t.Fatalf("a model not configured for cache breakpoints was sent one: %s", m.Raw)
		}
	}
}

// The speaker's remembered facts, a system message right before the newest user message, change
// every turn: the history's marker stays on the history's last message, not on them.
func TestTheHistoryMarkerSkipsTheTurnsMemoryBlock(t *testing.T) {
	srv := newServers(t, 1)[0]
	r, err := agent.NewRunner([]agent.Model{{Endpoint: provider.Endpoint{Name: "claude", BaseURL: srv.URL, Model: "anthropic/claude-sonnet-4.5", Timeout: 10 * time.Second}, CacheBreakpoints: true}}, agent.Options{})
	if err != nil {
		t.Fatal(err)
	}
	msgs := []chat.Message{
		{Role: chat.RoleSystem, Content: "You are the club's assistant."},
		{Role: chat.RoleUser, Content: "hello"},
		{Role: chat.RoleAssistant, Content: "Hi."},
		{Role: chat.RoleSystem, Content: "<remembered_facts>\n- Has a cat called Tom\n</remembered_facts>"},
		{Role: chat.RoleUser, Content: "what is my cat called?"},
	}
	srv.Push(llm.Text("Tom."))
	mustOK(t, r.Run(t.Context(), agent.Request{Messages: msgs, Stream: true}, nil))
	sent := srv.Requests()[0].Messages
	if _, n := marked(t, sent[2].Raw); n != 1 {
		t.Errorf("the history's last message %s is not marked", sent[2].Raw)
	}
	if _, n := marked(t, sent[3].Raw); n != 0 {
		t.Errorf("the memory block %s is marked: the cache would keep what the next turn does not send", sent[3].Raw)
	}
}

// An answer asked for whole (not streamed) carries its usage in the body: the cache's tokens are
// read from it as from a stream's last chunk (DeepSeek's fields here).
func TestAWholeAnswersCachedTokensAreRead(t *testing.T) {
	srv := newServers(t, 1)[0]
	srv.Push(llm.Reply{Body: `{"id":"ds-9","object":"chat.completion","created":1767225600,"model":"deepseek-chat","choices":[{"index":0,"message":{"role":"assistant","content":"Hi."},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":2000,"completion_tokens":3,"total_tokens":2003,"prompt_tokens_details":{"cached_tokens":1920},"prompt_cache_hit_tokens":1920,"prompt_cache_miss_tokens":80},"system_fingerprint":"fp_ds"}`})
	res := newRunner(t, agent.Options{}, srv).Run(t.Context(), agent.Request{Messages: userTurn("hi")}, nil)
	mustOK(t, res)
	if c := res.LLMCalls[0]; c.TokensIn != 2000 || c.CachedIn != 1920 {
		t.Fatalf("call = %d in, %d cached; want 2000 and 1920", c.TokensIn, c.CachedIn)
	}
	srv.Push(llm.Reply{Body: `{"id":"an-9","object":"chat.completion","created":1767225600,"model":"claude","choices":[{"index":0,"message":{"role":"assistant","content":"Hi."},"finish_reason":"stop"}],"usage":{"prompt_tokens":20,"completion_tokens":3,"cache_read_input_tokens":1500,"cache_creation_input_tokens":480}}`})
	res = newRunner(t, agent.Options{}, srv).Run(t.Context(), agent.Request{Messages: userTurn("hi")}, nil)
	mustOK(t, res)
	if c := res.LLMCalls[0]; c.TokensIn != 2000 || c.CachedIn != 1500 || c.CacheWriteIn != 480 {
		t.Fatalf("call = %d in, %d cached, %d written; want 2000, 1500 and 480 (Anthropic's count leaves the cache out of prompt_tokens)", c.TokensIn, c.CachedIn, c.CacheWriteIn)
	}
}
