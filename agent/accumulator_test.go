package agent

import (
	"testing"

	openai "github.com/sashabaranov/go-openai"
)

// splits returns every way to cut s into at most three pieces.
func splits(s string) [][]string {
	out := [][]string{{s}}
	for i := 1; i < len(s); i++ {
		out = append(out, []string{s[:i], s[i:]})
		for j := i + 1; j < len(s); j++ {
			out = append(out, []string{s[:i], s[i:j], s[j:]})
		}
	}
	return out
}

func TestThinkStripperAnySplit(t *testing.T) {
	cases := []struct{ in, shown, reasoning string }{
		{"<think>a</think>b", "b", "a"},
		{"x<think>a</think>y<think>b</think>z", "xyz", "ab"},
		{"pre</think>post", "post", "pre"},
		{"</think>post", "post", ""},
		{"a <thin b", "a <thin b", ""},
		{"a </thin b", "a </thin b", ""},
		{"<think>unclosed", "", "unclosed"},
		{"<think>a</think>b</think>c", "b</think>c", "a"},
		{"<<think>>x</think>", "<", ">x"},
	}
	for _, tc := range cases {
		for _, parts := range splits(tc.in) {
			var ts thinkStripper
			for _, p := range parts {
				ts.feed(p)
			}
			ts.finish()
			if ts.shown.String() != tc.shown || ts.reasoning.String() != tc.reasoning {
				t.Errorf("%q: shown %q reasoning %q, want %q and %q", parts, ts.shown.String(), ts.reasoning.String(), tc.shown, tc.reasoning)
			}
		}
	}
}

func TestAccumulatorIgnoresChunksAfterFinish(t *testing.T) {
	a := newAccumulator(1, 8, false)
	a.add(&openai.ChatCompletionStreamChoice{Delta: openai.ChatCompletionStreamChoiceDelta{Content: "done"}, FinishReason: openai.FinishReasonStop})
	if a.add(&openai.ChatCompletionStreamChoice{Delta: openai.ChatCompletionStreamChoiceDelta{Content: " more"}}) {
		t.Error("a chunk after the finish asked for a flush")
	}
	if got := a.text(); got != "done" {
		t.Errorf("text = %q", got)
	}
}

func benchChoices(n int, removeThink, withCalls bool) []openai.ChatCompletionStreamChoice {
	cs := make([]openai.ChatCompletionStreamChoice, n)
	for i := range cs {
		d := &cs[i].Delta
		switch {
		case withCalls && i%4 == 0:
			idx := (i / 4) % 3
			d.ToolCalls = []openai.ToolCall{{Index: &idx, Function: openai.FunctionCall{Arguments: `"x":1,`}}}
		case removeThink && i%50 == 0:
			d.Content = "<think>"
		case removeThink && i%50 == 10:
			d.Content = "</think>"
		default:
			d.Content = "tok "
		}
	}
	cs[n-1].FinishReason = openai.FinishReasonStop
	return cs
}

// BenchmarkAccumulator measures one raw chunk (ns/op and allocs/op are per chunk), flushes and
// the final assembly included, over turns of 1024 chunks.
func BenchmarkAccumulator(b *testing.B) {
	for _, bc := range []struct {
		name               string
		removeThink, calls bool
	}{{"text", false, false}, {"remove_think", true, false}, {"tool_calls", false, true}} {
		b.Run(bc.name, func(b *testing.B) {
			const turn = 1024
			chunks := benchChoices(turn, bc.removeThink, bc.calls)
			b.ReportAllocs()
			var a *accumulator
			var sink int
			for i := 0; b.Loop(); i++ {
				if i%turn == 0 {
					a = newAccumulator(1, 8, bc.removeThink)
				}
				if a.add(&chunks[i%turn]) {
					sink += len(a.text())
				}
				if i%turn == turn-1 {
					sink += len(a.message().ToolCalls)
				}
			}
			_ = sink
		})
	}
}
