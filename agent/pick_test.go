package agent_test

import (
	"testing"

	"relaybot/agent"
	"relaybot/internal/testkit/llm"
	"relaybot/provider"
)

func TestRequestModelIsTriedFirstAndTheOthersStayFallbacks(t *testing.T) {
	tests := []struct {
		name      string
		pick      string
		failFirst bool
		want      []string // the candidates called, in order
	}{
		{"no pick: configured order", "", false, []string{"primary"}},
		{"the picked model answers", "backup", false, []string{"backup"}},
		{"the picked model fails: the configured order follows", "backup", true, []string{"backup", "primary"}},
		{"an unknown name: configured order", "gone", false, []string{"primary"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srvs := newServers(t, 2)
			if tt.failFirst {
				srvs[1].Push(llm.Fault(500, "upstream exploded"))
			}
			srvs[0].Push(llm.Text("from primary"))
			srvs[1].Push(llm.Text("from backup"))
			r, err := agent.NewRunner([]agent.Model{
				{Endpoint: provider.Endpoint{Name: "primary", BaseURL: srvs[0].URL, Model: "a"}},
				{Endpoint: provider.Endpoint{Name: "backup", BaseURL: srvs[1].URL, Model: "b"}},
			}, agent.Options{})
			if err != nil {
				t.Fatal(err)
			}
			res := r.Run(t.Context(), agent.Request{Messages: userTurn("hi"), Model: tt.pick}, nil)
			mustOK(t, res)
			var got []string
			for _, c := range res.LLMCalls {
				got = append(got, c.Model)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("calls %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("calls %v, want %v", got, tt.want)
				}
			}
			if want := "from " + tt.want[len(tt.want)-1]; res.Messages[0].Content != want {
				t.Errorf("answer %q, want %q", res.Messages[0].Content, want)
			}
		})
	}
}
