package agent_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"relaybot/agent"
	"relaybot/chat"
	"relaybot/internal/testkit/llm"
	"relaybot/provider"
)

const benchTokens = 1000

// measure runs turn b.N times and reports the process CPU per streamed token (fake server
// included: it is the same for both benchmarks).
func measure(b *testing.B, turn func()) {
	b.ReportAllocs()
	start := agent.CPUTime(b)
	n := 0
	for b.Loop() {
		turn()
		n++
	}
	b.ReportMetric(float64(agent.CPUTime(b)-start)/float64(n*benchTokens), "cpu-ns/token")
}

func benchServer(b *testing.B) *llm.Server {
	srv := llm.NewServer()
	b.Cleanup(srv.Close)
	srv.SetHandler(llm.Generator(llm.Generate{Tokens: benchTokens}))
	return srv
}

// BenchmarkStreamRunner is a streamed turn of benchTokens tokens through agent.Runner.
func BenchmarkStreamRunner(b *testing.B) {
	srv := benchServer(b)
	r, err := agent.NewRunner([]agent.Model{{Endpoint: provider.Endpoint{BaseURL: srv.URL, Model: "bench"}, SupportsTools: true}}, agent.Options{})
	if err != nil {
		b.Fatal(err)
	}
	req := agent.Request{Messages: []chat.Message{{Role: chat.RoleUser, Content: "go"}}, Stream: true}
	var shown int
	measure(b, func() {
		res := r.Run(context.Background(), req, func(e agent.Event) {
			if c, ok := e.(agent.Chunk); ok {
				shown = len(c.Text)
			}
		})
		if res.Err != nil {
			b.Fatal(res.Err)
		}
	})
	if shown != benchTokens*len("tok ") {
		b.Fatalf("shown %d bytes", shown)
	}
}

// BenchmarkStreamBare reads the same stream with a bare go-openai loop that only joins the text.
func BenchmarkStreamBare(b *testing.B) {
	srv := benchServer(b)
	cfg := openai.DefaultConfig("")
	cfg.BaseURL = srv.URL
	client := openai.NewClientWithConfig(cfg)
	req := openai.ChatCompletionRequest{
		Model:         "bench",
		Messages:      []openai.ChatCompletionMessage{{Role: "user", Content: "go"}},
		StreamOptions: &openai.StreamOptions{IncludeUsage: true},
	}
	measure(b, func() {
		stream, err := client.CreateChatCompletionStream(context.Background(), req)
		if err != nil {
			b.Fatal(err)
		}
		defer stream.Close()
		var text strings.Builder
		for {
			resp, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			if len(resp.Choices) > 0 {
				text.WriteString(resp.Choices[0].Delta.Content)
			}
		}
		if text.Len() != benchTokens*len("tok ") {
			b.Fatalf("read %d bytes", text.Len())
		}
	})
}

// BenchmarkStreamDiscard reads the same stream's bytes without parsing them: the CPU of the
// fake server and the HTTP transport, to subtract from the two benchmarks above.
func BenchmarkStreamDiscard(b *testing.B) {
	srv := benchServer(b)
	body := `{"model":"bench","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"go"}]}`
	client := &http.Client{}
	measure(b, func() {
		resp, err := client.Post(srv.URL+"/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		if _, err := io.Copy(io.Discard, resp.Body); err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("status %d, err %v", resp.StatusCode, err)
		}
	})
}
