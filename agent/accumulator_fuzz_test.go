package agent

import (
	"reflect"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"
)

// FuzzAccumulatorSplitInvariance: however a provider cuts a round's stream into chunks, the user
// is shown the same text and the history gets the same message: content (with and without think
// stripping), reasoning and tool-call arguments are assembled the same as from one whole chunk,
// every call has an id and JSON arguments text, and an id-less call's made-up id is unique.
func FuzzAccumulatorSplitInvariance(f *testing.F) {
	f.Add("Hello <think>hidden</think>world", "", `{"q":"x"}`, "", uint16(3), uint16(17), true)
	f.Add("<think>a</think>b</think>c", "why", "", "call_a", uint16(1), uint16(2), false)
	f.Add("pre</think>post", "", `{"a":`, "", uint16(0), uint16(40), true)
	f.Add("<<think>>x</think>", "r", `{}`, "id", uint16(5), uint16(6), true)
	f.Add("日本語<think>考え</think>答え", "", `{"t":"日本"}`, "", uint16(4), uint16(9), true)
	f.Fuzz(func(t *testing.T, content, reasoning, args, id string, cut1, cut2 uint16, removeThink bool) {
		whole := newAccumulator(3, 2, removeThink)
		whole.add(chunk(content, reasoning, args, id, 0, true))
		whole.add(&openai.ChatCompletionStreamChoice{FinishReason: openai.FinishReasonToolCalls})

		cuts := func(s string) []string {
			a, b := int(cut1)%(len(s)+1), int(cut2)%(len(s)+1)
			if a > b {
				a, b = b, a
			}
			return []string{s[:a], s[a:b], s[b:]}
		}
		split := newAccumulator(3, 2, removeThink)
		cs, rs, as := cuts(content), cuts(reasoning), cuts(args)
		for i := range 3 {
			split.add(chunk(cs[i], rs[i], as[i], id, 0, i == 0))
		}
		split.add(&openai.ChatCompletionStreamChoice{FinishReason: openai.FinishReasonToolCalls})

		if w, s := whole.text(), split.text(); w != s {
			t.Fatalf("shown text depends on the chunking:\nwhole %q\nsplit %q", w, s)
		}
		wm, sm := whole.message(), split.message()
		if !reflect.DeepEqual(wm, sm) {
			t.Fatalf("history message depends on the chunking:\nwhole %+v\nsplit %+v", wm, sm)
		}
		if len(sm.ToolCalls) != 1 {
			t.Fatalf("%d tool calls, want 1", len(sm.ToolCalls))
		}
		c := sm.ToolCalls[0]
		if c.ID == "" || strings.TrimSpace(c.Arguments) == "" {
			t.Fatalf("tool call without id or arguments: %+v", c)
		}
		if id == "" && c.ID != "call_3_0" {
			t.Fatalf("made-up id %q, want call_3_0", c.ID)
		}
		if removeThink && !strings.Contains(content, "<think>") && !strings.Contains(content, "</think>") &&
			sm.Content != strings.TrimSpace(content) {
			t.Fatalf("content without think tags changed: %q → %q", content, sm.Content)
		}
	})
}

func chunk(content, reasoning, args, id string, index int, first bool) *openai.ChatCompletionStreamChoice {
	tc := openai.ToolCall{Index: &index, Function: openai.FunctionCall{Arguments: args}}
	if first {
		tc.ID, tc.Function.Name = id, "tool"
	}
	return &openai.ChatCompletionStreamChoice{Delta: openai.ChatCompletionStreamChoiceDelta{
		Content: content, ReasoningContent: reasoning, ToolCalls: []openai.ToolCall{tc},
	}}
}
