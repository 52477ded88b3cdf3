package agent_test

import (
	"fmt"
	"slices"
	"testing"

	"relaybot/agent"
	"relaybot/internal/testkit/llm"
)

// TestFirstWordsShowWithTheModelsFirstChunk: the first chunk that gives the answer visible text
// is shown at once; after it the text is shown every eight chunks as before, and at the end.
func TestFirstWordsShowWithTheModelsFirstChunk(t *testing.T) {
	words := func(n int) []llm.Chunk {
		out := make([]llm.Chunk, n)
		for i := range out {
			out[i] = llm.Chunk{Content: fmt.Sprintf("w%d ", i+1)}
		}
		return out
	}
	cases := []struct {
		name   string
		remove bool
		chunks []llm.Chunk
		want   []string // the texts of the Chunk events, in order
	}{
		{"text from the first chunk", false, words(10),
			[]string{"w1 ", "w1 w2 w3 w4 w5 w6 w7 w8 ", "w1 w2 w3 w4 w5 w6 w7 w8 w9 w10 "}},
		{"white space first", false, append([]llm.Chunk{{Content: "\n"}, {Content: " "}}, words(7)...),
			[]string{"\n w1 ", "\n w1 w2 w3 w4 w5 w6 ", "\n w1 w2 w3 w4 w5 w6 w7 "}},
		{"reasoning shows as it comes", false, append([]llm.Chunk{{Reasoning: "hmm"}}, words(1)...),
			[]string{"<think>\nhmm", "<think>\nhmm\n</think>\nw1 "}},
		{"a removed think block is not visible text", true,
			append([]llm.Chunk{{Content: "<think>"}, {Content: "hmm"}, {Content: "</think>"}}, words(6)...),
			[]string{"w1 ", "w1 w2 w3 w4 w5 ", "w1 w2 w3 w4 w5 w6"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServers(t, 1)[0]
			srv.Push(llm.Reply{Chunks: tc.chunks})
			r := newRunner(t, agent.Options{RemoveThink: tc.remove}, srv)
			var rec recorder
			res := r.Run(t.Context(), agent.Request{Messages: userTurn("hi"), Stream: true}, rec.emit)
			if res.Err != nil {
				t.Fatalf("run: %v", res.Err)
			}
			var got []string
			for _, c := range rec.chunks() {
				got = append(got, c.Text)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("the user was shown %q, want %q", got, tc.want)
			}
		})
	}
}
