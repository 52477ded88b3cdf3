package llm_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"relaybot/internal/testkit/llm"
)

func post(t *testing.T, ctx context.Context, s *llm.Server, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer k")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// events reads the SSE data payloads of a response.
func events(t *testing.T, resp *http.Response) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("line %q is not an SSE data line", line)
		}
		out = append(out, data)
	}
	return out
}

type chunk struct {
	Object  string `json:"object"`
	Choices []struct {
		Delta struct {
			Role             string `json:"role"`
			Content          string `json:"content"`
			ReasoningContent string `json:"reasoning_content"`
			ToolCalls        []struct {
				Index    *int   `json:"index"`
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		Message struct {
			Content   *string `json:"content"`
			ToolCalls []struct {
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"message"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

func decode(t *testing.T, s string) chunk {
	t.Helper()
	var c chunk
	if err := json.Unmarshal([]byte(s), &c); err != nil {
		t.Fatalf("decoding %s: %v", s, err)
	}
	return c
}

const userMsg = `"messages":[{"role":"user","content":"hi"}]`

func TestStreamWireFormat(t *testing.T) {
	for _, usage := range []bool{false, true} {
		s := llm.NewServer()
		defer s.Close()
		r := llm.ToolCalls(llm.Call{Name: "f", Args: []string{`{"a":`, `1}`}})
		r.Chunks = append([]llm.Chunk{{Reasoning: "hmm"}, {Content: "hi"}}, r.Chunks...)
		r.Usage = &llm.Usage{PromptTokens: 7, CompletionTokens: 3}
		s.Push(r)
		body := `{"model":"m","stream":true,` + userMsg
		if usage {
			body += `,"stream_options":{"include_usage":true}`
		}
		ev := events(t, post(t, t.Context(), s, body+"}"))
		want := 5 // reasoning, content, 2 tool fragments, finish
		if usage {
			want++
		}
		if len(ev) != want+1 || ev[len(ev)-1] != "[DONE]" {
			t.Fatalf("usage=%v: events %q", usage, ev)
		}
		first := decode(t, ev[0])
		if first.Object != "chat.completion.chunk" || first.Choices[0].Delta.Role != "assistant" || first.Choices[0].Delta.ReasoningContent != "hmm" {
			t.Errorf("first chunk %s", ev[0])
		}
		frag := decode(t, ev[2]).Choices[0].Delta.ToolCalls[0]
		if frag.ID != "" || frag.Index == nil || *frag.Index != 0 || frag.Function.Name != "f" {
			t.Errorf("id-less first fragment %s", ev[2])
		}
		fin := decode(t, ev[4])
		if fin.Choices[0].FinishReason == nil || *fin.Choices[0].FinishReason != "tool_calls" {
			t.Errorf("finish chunk %s", ev[4])
		}
		for _, e := range ev[:4] {
			if c := decode(t, e); c.Choices[0].FinishReason != nil {
				t.Errorf("finish_reason before the end: %s", e)
			}
		}
		if usage {
			u := decode(t, ev[5])
			if len(u.Choices) != 0 || u.Usage == nil || u.Usage.PromptTokens != 7 || u.Usage.CompletionTokens != 3 {
				t.Errorf("usage chunk %s", ev[5])
			}
		}
	}
}

func TestWholeReply(t *testing.T) {
	s := llm.NewServer()
	defer s.Close()
	s.Push(llm.ToolCalls(llm.Call{ID: "c1", Name: "f", Args: []string{`{"a":`, `1}`}}))
	resp := post(t, t.Context(), s, `{"model":"m",`+userMsg+`}`)
	body, _ := io.ReadAll(resp.Body)
	c := decode(t, string(body))
	m := c.Choices[0].Message
	if m.Content != nil || len(m.ToolCalls) != 1 || m.ToolCalls[0].ID != "c1" || m.ToolCalls[0].Function.Arguments != `{"a":1}` {
		t.Errorf("whole reply %s", body)
	}
	if c.Usage == nil || c.Usage.CompletionTokens != 2 {
		t.Errorf("usage missing or wrong: %s", body)
	}
}

func TestFaults(t *testing.T) {
	s := llm.NewServer()
	defer s.Close()
	s.Push(llm.Reply{Status: 429, Error: "slow down", RetryAfter: 2})
	resp := post(t, t.Context(), s, `{"model":"m","stream":true,`+userMsg+`}`)
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "2" || !strings.Contains(string(body), `"slow down"`) || !strings.Contains(string(body), "rate_limit_error") {
		t.Errorf("429: %d %v %s", resp.StatusCode, resp.Header, body)
	}

	s.Push(llm.Reply{Chunks: []llm.Chunk{{Content: "par"}}, Cut: true})
	ev := events(t, post(t, t.Context(), s, `{"model":"m","stream":true,`+userMsg+`}`))
	if len(ev) != 1 || decode(t, ev[0]).contentOf(0) != "par" {
		t.Errorf("cut stream events %q, want one chunk and no finish or [DONE]", ev)
	}

	resp = post(t, t.Context(), s, `{"model":"m",`+userMsg+`}`)
	body, _ = io.ReadAll(resp.Body)
	if resp.StatusCode != 500 || !strings.Contains(string(body), "no scripted reply left") {
		t.Errorf("empty queue: %d %s", resp.StatusCode, body)
	}
}

func (c chunk) contentOf(i int) string { return c.Choices[i].Delta.Content }

func TestHangEndsWhenTheClientLeaves(t *testing.T) {
	s := llm.NewServer()
	defer s.Close()
	release := make(chan struct{})
	s.Push(llm.Reply{Chunks: []llm.Chunk{{Content: "a"}, {Content: "b", Wait: release}}, Hang: true})
	ctx, cancel := context.WithCancel(t.Context())
	resp := post(t, ctx, s, `{"model":"m","stream":true,`+userMsg+`}`)
	rd := bufio.NewReader(resp.Body)
	line, err := rd.ReadString('\n')
	if err != nil || !strings.Contains(line, `"a"`) {
		t.Fatalf("first line %q, %v", line, err)
	}
	close(release)
	if line, _ = rd.ReadString('\n'); line == "\n" {
		line, _ = rd.ReadString('\n')
	}
	if !strings.Contains(line, `"b"`) {
		t.Fatalf("after release: %q", line)
	}
	cancel()
	if _, err := io.ReadAll(rd); err == nil {
		t.Error("hanging stream ended cleanly, want the read to fail when the client leaves")
	}
}

func TestTranscriptValidation(t *testing.T) {
	s := llm.NewServer()
	defer s.Close()
	s.Push(llm.Text("never"))
	bad := `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"user","content":"again"}]}`
	resp := post(t, t.Context(), s, bad)
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 400 || !strings.Contains(string(body), "tool_call_id") {
		t.Errorf("dangling tool call: %d %s", resp.StatusCode, body)
	}
	reqs := s.Requests()
	if len(reqs) != 1 || len(reqs[0].Messages) != 3 || reqs[0].Messages[1].ToolCalls[0].ID != "c" {
		t.Errorf("recorded %+v", reqs)
	}
}

func TestRecordsImagesAndTools(t *testing.T) {
	s := llm.NewServer()
	defer s.Close()
	s.Push(llm.Text("ok"))
	post(t, t.Context(), s, `{"model":"m","tools":[{"type":"function","function":{"name":"f"}}],"messages":[{"role":"user","content":[{"type":"text","text":"see"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AA=="}}]}]}`)
	r := s.Requests()[0]
	if r.Model != "m" || len(r.Tools) != 1 || r.Tools[0] != "f" || r.Messages[0].Content != "see" || r.Messages[0].ImageURLs[0] != "data:image/png;base64,AA==" || r.Header.Get("Authorization") != "Bearer k" {
		t.Errorf("recorded %+v", r)
	}
}

func TestGenerator(t *testing.T) {
	h := llm.Generator(llm.Generate{Tokens: 3, Token: "x", ToolShare: 0.25})
	user := llm.Request{Messages: []llm.Message{{Role: "user"}}}
	var calls int
	for range 8 {
		r := h(user)
		if len(r.Chunks) > 0 && len(r.Chunks[0].ToolCalls) > 0 {
			calls++
		} else if len(r.Chunks) != 3 || r.Chunks[2].Content != "x" {
			t.Fatalf("text reply %+v", r)
		}
	}
	if calls != 2 {
		t.Errorf("tool turns = %d of 8, want 2 at share 0.25", calls)
	}
	after := h(llm.Request{Messages: []llm.Message{{Role: "user"}, {Role: "assistant"}, {Role: "tool"}}})
	if len(after.Chunks) != 3 || len(after.Chunks[0].ToolCalls) != 0 {
		t.Errorf("answer after a tool result = %+v, want text", after)
	}
}

func TestSlowTokensAndWholeFaults(t *testing.T) {
	s := llm.NewServer()
	defer s.Close()
	s.Push(llm.Reply{Chunks: []llm.Chunk{{Content: "a"}, {Content: "b"}}, TokenDelay: time.Millisecond})
	if ev := events(t, post(t, t.Context(), s, `{"model":"m","stream":true,`+userMsg+`}`)); len(ev) != 4 {
		t.Errorf("slow stream events %q, want 2 chunks, finish and [DONE]", ev)
	}

	s.Push(llm.Reply{Chunks: []llm.Chunk{{Content: "whole"}}, Cut: true})
	body, _ := io.ReadAll(post(t, t.Context(), s, `{"model":"m",`+userMsg+`}`).Body)
	var v any
	if json.Unmarshal(body, &v) == nil {
		t.Errorf("cut whole reply decoded fine: %s", body)
	}

	s.Push(llm.Reply{Chunks: []llm.Chunk{{Content: "never"}}, Hang: true})
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/chat/completions", strings.NewReader(`{"model":"m",`+userMsg+`}`))
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Errorf("hanging whole reply answered %d", resp.StatusCode)
	}
}

func TestRecordedEventsGoOutVerbatim(t *testing.T) {
	s := llm.NewServer()
	defer s.Close()
	events1 := []string{`{"choices":[],"prompt_filter_results":[]}`, `{"choices":[{"index":0,"delta":{"content":[{"type":"text","text":"hi"}]},"finish_reason":"stop"}]}`}
	s.Push(llm.Reply{Events: events1}, llm.Reply{Body: `{"choices":[{"index":0,"message":{"role":"assistant","content":"whole"},"finish_reason":"stop"}]}`})
	got := events(t, post(t, t.Context(), s, `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi","x_extra":1}]}`))
	if want := append(events1, "[DONE]"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events = %q, want %q", got, want)
	}
	resp := post(t, t.Context(), s, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	body, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(body), `"content":"whole"`) {
		t.Errorf("whole body = %s", body)
	}
	if raw := string(s.Requests()[0].Messages[0].Raw); !strings.Contains(raw, `"x_extra":1`) {
		t.Errorf("recorded raw message = %s, want the client's fields kept", raw)
	}
}

func TestARefusedMessageIsRefusedWhereverItIsInTheTranscript(t *testing.T) {
	s := llm.NewServer()
	defer s.Close()
	s.SetHandler(llm.RefuseContaining("forbidden words", func(llm.Request) llm.Reply { return llm.Text("fine") }))
	for _, c := range []struct {
		name, messages string
		status         int
	}{
		{"the new message", `[{"role":"user","content":"some forbidden words"}]`, http.StatusBadRequest},
		{"an earlier message", `[{"role":"user","content":"some forbidden words"},{"role":"user","content":"hello"}]`, http.StatusBadRequest},
		{"neither", `[{"role":"user","content":"hello"}]`, http.StatusOK},
	} {
		resp := post(t, t.Context(), s, `{"model":"m","messages":`+c.messages+`}`)
		if resp.StatusCode != c.status {
			t.Fatalf("%s: status %d, want %d", c.name, resp.StatusCode, c.status)
		}
		if c.status == http.StatusOK {
			continue
		}
		var body struct {
			Error struct {
				Message string  `json:"message"`
				Type    string  `json:"type"`
				Param   *string `json:"param"`
				Code    string  `json:"code"`
			} `json:"error"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatal(err)
		}
		if body.Error.Type != "invalid_request_error" || body.Error.Code != "content_policy_violation" || body.Error.Message != llm.ContentPolicyMessage {
			t.Errorf("%s: error body %+v, want OpenAI's content-policy refusal", c.name, body.Error)
		}
	}
}

func TestAUsedUpAccountIsRefusedAsOpenAIRefusesIt(t *testing.T) {
	s := llm.NewServer()
	defer s.Close()
	s.Push(llm.Refusal(http.StatusTooManyRequests, "insufficient_quota", "You exceeded your current quota."))
	resp := post(t, t.Context(), s, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(b), `"type":"insufficient_quota"`) || !strings.Contains(string(b), `"code":"insufficient_quota"`) {
		t.Errorf("answer %d %s, want 429 with type and code insufficient_quota", resp.StatusCode, b)
	}
}
