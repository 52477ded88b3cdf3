package agent_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"relaybot/agent"
	"relaybot/chat"
	"relaybot/internal/testkit/llm"
)

// rawToolCalls returns the tool calls of a recorded request message as the client wrote them.
func rawToolCalls(t *testing.T, m llm.Message) []map[string]any {
	t.Helper()
	var msg struct {
		ToolCalls []map[string]any `json:"tool_calls"`
	}
	if err := json.Unmarshal(m.Raw, &msg); err != nil {
		t.Fatalf("request message %s: %v", m.Raw, err)
	}
	return msg.ToolCalls
}

// assistantWithCalls returns the first assistant message of a request that carries tool calls.
func assistantWithCalls(t *testing.T, req llm.Request) llm.Message {
	t.Helper()
	for _, m := range req.Messages {
		if m.Role == "assistant" && len(m.ToolCalls) > 0 {
			return m
		}
	}
	t.Fatalf("request has no assistant message with tool calls: %s", req.Body)
	return llm.Message{}
}

// wantExtraSentBack checks that every field of the recording's CallExtra is on the call as the
// provider sent it.
func wantExtraSentBack(t *testing.T, rec llm.Recording, m llm.Message, where string) {
	t.Helper()
	if rec.CallExtra == "" {
		return
	}
	var want map[string]any
	if err := json.Unmarshal([]byte(rec.CallExtra), &want); err != nil {
		t.Fatal(err)
	}
	calls := rawToolCalls(t, m)
	if len(calls) != 1 {
		t.Fatalf("%s: tool calls %v", where, calls)
	}
	for k, v := range want {
		if !reflect.DeepEqual(calls[0][k], v) {
			t.Errorf("%s: the call's %q = %v, want %v sent back unchanged (the provider rejects the round without it)", where, k, calls[0][k], v)
		}
	}
}

func TestRecordedProviderStreamsRunAToolRoundAndAnswer(t *testing.T) {
	for _, rec := range llm.Recordings() {
		for _, removeThink := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/remove_think=%v", rec.Provider, removeThink), func(t *testing.T) {
				srv := newServers(t, 1)[0]
				srv.Push(rec.ToolRound, rec.Answer, llm.Text("Still /work."))
				r := newRunner(t, agent.Options{RemoveThink: removeThink}, srv)
				exec := &testExecutor{}
				var events recorder
				res := r.Run(t.Context(), agent.Request{Messages: userTurn("where am I?"), Tools: shellSpec, Executor: exec, Stream: true}, events.emit)
				mustOK(t, res)

				calls := exec.Calls()
				if len(calls) != 1 || calls[0].Name != "shell" || calls[0].ID != rec.CallID {
					t.Fatalf("tool calls run = %+v, want shell with id %q", calls, rec.CallID)
				}
				var args map[string]string
				if err := json.Unmarshal([]byte(calls[0].Arguments), &args); err != nil || args["command"] != "pwd" {
					t.Errorf("arguments = %q, want the command pwd", calls[0].Arguments)
				}
				if last := res.Messages[len(res.Messages)-1]; last.Content != rec.AnswerText {
					t.Errorf("answer = %q, want %q", last.Content, rec.AnswerText)
				}
				if got := res.Messages[0].Reasoning; got != rec.Reasoning {
					t.Errorf("reasoning kept = %q, want %q", got, rec.Reasoning)
				}
				var roundOne string
				for _, c := range events.chunks() {
					if c.Round == 1 && c.Final {
						roundOne = c.Text
					}
				}
				shown := rec.Reasoning != "" && !removeThink
				if got := strings.Contains(roundOne, "<think>") && strings.Contains(roundOne, rec.Reasoning); got != shown {
					t.Errorf("round one showed %q; reasoning shown = %v, want %v", roundOne, got, shown)
				}
				if got := res.LLMCalls[1]; got.TokensIn != rec.AnswerUsage.PromptTokens || got.TokensOut != rec.AnswerUsage.CompletionTokens {
					t.Errorf("answer usage = %d in / %d out, want %+v", got.TokensIn, got.TokensOut, rec.AnswerUsage)
				}
				if got := res.LLMCalls[1]; got.CachedIn != rec.AnswerUsage.CachedTokens || got.CacheWriteIn != rec.AnswerUsage.CacheWriteTokens {
					t.Errorf("answer's prompt cache = %d read / %d written, want %d / %d: the bill would be wrong",
						got.CachedIn, got.CacheWriteIn, rec.AnswerUsage.CachedTokens, rec.AnswerUsage.CacheWriteTokens)
				}

				reqs := srv.Requests()
				round2 := assistantWithCalls(t, reqs[1])
				wantExtraSentBack(t, rec, round2, "the next round")
				wantSent := ""
				if rec.ReasoningSentBack {
					wantSent = rec.Reasoning
				}
				if round2.ReasoningContent != wantSent {
					t.Errorf("next round sent reasoning_content %q, want %q", round2.ReasoningContent, wantSent)
				}
				if !rec.ReasoningSentBack && strings.Contains(string(round2.Raw), `"reasoning`) {
					t.Errorf("next round sent a reasoning field to %s, which rejects it: %s", rec.Provider, round2.Raw)
				}

				// The next turn sends the stored turn back as history.
				next := append(userTurn("where am I?"), res.Messages...)
				next = append(next, chat.Message{Role: chat.RoleUser, Content: "and now?"})
				res2 := r.Run(t.Context(), agent.Request{Messages: next, Tools: shellSpec, Executor: exec, Stream: true}, nil)
				mustOK(t, res2)
				history := assistantWithCalls(t, srv.Requests()[2])
				wantExtraSentBack(t, rec, history, "history of the next turn")
				if history.ReasoningContent != wantSent {
					t.Errorf("history sent reasoning_content %q, want %q", history.ReasoningContent, wantSent)
				}
			})
		}
	}
}

func TestWholeAnswerWithContentAsPartsIsRead(t *testing.T) {
	srv := newServers(t, 1)[0]
	srv.Push(llm.Reply{Body: `{"id":"ms-3","object":"chat.completion","created":1767225600,"model":"mistral-medium-2508","choices":[{"index":0,"message":{"role":"assistant","content":[{"type":"text","text":"You are "},{"type":"reference","reference_ids":[1]},{"type":"text","text":"in /work."}],"tool_calls":null,"prefix":false},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"total_tokens":15,"completion_tokens":5}}`})
	r := newRunner(t, agent.Options{}, srv)
	res := r.Run(t.Context(), agent.Request{Messages: userTurn("where?")}, nil)
	mustOK(t, res)
	if got := res.Messages[0].Content; got != "You are in /work." {
		t.Errorf("answer = %q, want the text parts joined", got)
	}
	if res.Usage.TokensIn != 10 || res.Usage.TokensOut != 5 {
		t.Errorf("usage = %+v", res.Usage)
	}
}

func TestReasoningGoesBackOnlyForTurnsWithToolCallsAndOnlyAsItCame(t *testing.T) {
	srv := newServers(t, 1)[0]
	srv.Push(llm.Text("ok"))
	r := newRunner(t, agent.Options{}, srv)
	msgs := []chat.Message{
		{Role: chat.RoleUser, Content: "hi"},
		{Role: chat.RoleAssistant, Content: "hello", Reasoning: "greet back", ReasoningField: "reasoning_content"},
		{Role: chat.RoleUser, Content: "pwd?"},
		{Role: chat.RoleAssistant, Reasoning: "run it", ReasoningField: "reasoning_content", ToolCalls: []chat.ToolCall{{ID: "c1", Name: "shell", Arguments: `{"command":"pwd"}`}}},
		{Role: chat.RoleTool, ToolCallID: "c1", Content: "/work"},
		{Role: chat.RoleAssistant, Content: "You are in /work.", Reasoning: "it said /work", ReasoningField: "reasoning_content"},
		{Role: chat.RoleUser, Content: "how about now?"},
		{Role: chat.RoleAssistant, Reasoning: "groq thoughts", ToolCalls: []chat.ToolCall{{ID: "c2", Name: "shell", Arguments: `{"command":"pwd"}`}}},
		{Role: chat.RoleTool, ToolCallID: "c2", Content: "/work"},
		{Role: chat.RoleAssistant, Content: "Still /work.", Reasoning: "groq again"},
		{Role: chat.RoleUser, Content: "thanks"},
	}
	mustOK(t, r.Run(t.Context(), agent.Request{Messages: msgs, Tools: shellSpec, Stream: true}, nil))
	var got []string
	for _, m := range srv.Requests()[0].Messages {
		if m.Role == "assistant" {
			got = append(got, m.ReasoningContent)
		}
	}
	if want := []string{"", "run it", "it said /work", "", ""}; !reflect.DeepEqual(got, want) {
		t.Errorf("reasoning_content sent = %q, want %q (DeepSeek: back for every message of a turn with tool calls, not for others; never reasoning that came in another field)", got, want)
	}
}

func TestUnknownAssistantFieldsGoBackUnchanged(t *testing.T) {
	srv := newServers(t, 1)[0]
	srv.Push(llm.Reply{Events: []string{
		`{"id":"g-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":"","reasoning_details":[{"type":"reasoning.text","text":"Look ","index":0}]},"finish_reason":null}]}`,
		`{"id":"g-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"reasoning_details":[{"type":"reasoning.encrypted","data":"eyJ","index":1}],"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"shell","arguments":"{\"command\":\"pwd\"}"}}]},"finish_reason":null}]}`,
		`{"id":"g-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
	}}, llm.Text("You are in /work."))
	r := newRunner(t, agent.Options{}, srv)
	res := r.Run(t.Context(), agent.Request{Messages: userTurn("where?"), Tools: shellSpec, Executor: &testExecutor{}, Stream: true}, nil)
	mustOK(t, res)
	want := `[{"type":"reasoning.text","text":"Look ","index":0},{"type":"reasoning.encrypted","data":"eyJ","index":1}]`
	var kept map[string]json.RawMessage
	if err := json.Unmarshal(res.Messages[0].Extra, &kept); err != nil || string(kept["reasoning_details"]) != want {
		t.Fatalf("message extra = %s, want reasoning_details %s gathered over the chunks", res.Messages[0].Extra, want)
	}
	var sent map[string]json.RawMessage
	if err := json.Unmarshal(assistantWithCalls(t, srv.Requests()[1]).Raw, &sent); err != nil {
		t.Fatal(err)
	}
	var got, wantV any
	_ = json.Unmarshal(sent["reasoning_details"], &got)
	_ = json.Unmarshal([]byte(want), &wantV)
	if !reflect.DeepEqual(got, wantV) {
		t.Errorf("next round sent reasoning_details %s, want %s", sent["reasoning_details"], want)
	}
}

func TestWholeAnswerKeepsThoughtSignatures(t *testing.T) {
	srv := newServers(t, 1)[0]
	srv.Push(llm.Reply{Body: `{"choices":[{"finish_reason":"tool_calls","index":0,"message":{"role":"assistant","tool_calls":[{"extra_content":{"google":{"thought_signature":"c2lnLTE="}},"function":{"arguments":"{\"command\":\"pwd\"}","name":"shell"},"id":"function-call-1","type":"function"}]}}],"created":1767225600,"id":"gem-3","model":"gemini-3-flash-preview","object":"chat.completion","usage":{"completion_tokens":5,"prompt_tokens":10,"total_tokens":15}}`},
		llm.Text("You are in /work."))
	r := newRunner(t, agent.Options{}, srv)
	res := r.Run(t.Context(), agent.Request{Messages: userTurn("where?"), Tools: shellSpec, Executor: &testExecutor{}}, nil)
	mustOK(t, res)
	want := `{"extra_content":{"google":{"thought_signature":"c2lnLTE="}}}`
	if got := string(res.Messages[0].ToolCalls[0].Extra); got != want {
		t.Errorf("call extra = %s, want %s", got, want)
	}
	calls := rawToolCalls(t, assistantWithCalls(t, srv.Requests()[1]))
	if got := fmt.Sprint(calls[0]["extra_content"]); got != "map[google:map[thought_signature:c2lnLTE=]]" {
		t.Errorf("next round sent extra_content %s; Gemini rejects the round without the signature", got)
	}
}

// A provider's error sent into the stream after some text ends the call with that error, as
// go-openai's own stream reader reports it (an *openai.APIError with the provider's message);
// the text shown so far is kept for the partial answer.
func TestAnErrorEventInTheStreamEndsTheCallWithTheProvidersError(t *testing.T) {
	srv := newServers(t, 1)[0]
	srv.Push(llm.Reply{Events: []string{
		`{"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":"Half an an"}}]}`,
		`{"error":{"message":"the model is overloaded","type":"server_error","code":"overloaded"}}`,
	}, Cut: true})
	r := newRunner(t, agent.Options{}, srv)
	res := r.Run(t.Context(), agent.Request{Messages: userTurn("hi"), Stream: true}, func(agent.Event) {})
	var apiErr *openai.APIError
	if res.Status != chat.StatusError || !errors.As(res.Err, &apiErr) || apiErr.Message != "the model is overloaded" {
		t.Fatalf("run ended %s with %v, want an error naming the provider's message", res.Status, res.Err)
	}
	if res.PartialText != "Half an an" {
		t.Errorf("partial answer = %q, want the text streamed before the error", res.PartialText)
	}
}
