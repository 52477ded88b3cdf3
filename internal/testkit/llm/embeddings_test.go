package llm_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"relaybot/internal/testkit/llm"
)

func postTo(t *testing.T, url, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func dot(a, b []float32) float32 {
	var s float32
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

func TestEmbeddingsAreDeterministicAndCloserForSharedWords(t *testing.T) {
	s := llm.NewServer()
	defer s.Close()
	status, body := postTo(t, s.URL+"/embeddings", `{"model":"m","input":["my cat is called Tom","Tom the cat","the weather in Oslo"]}`)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	var out struct {
		Data []struct {
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		} `json:"data"`
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal([]byte(body), &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Data) != 3 || len(out.Data[0].Embedding) != llm.DefaultEmbeddingDims || out.Usage.PromptTokens == 0 {
		t.Fatalf("got %d vectors of %d numbers, %d tokens", len(out.Data), len(out.Data[0].Embedding), out.Usage.PromptTokens)
	}
	cat, tom, oslo := out.Data[0].Embedding, out.Data[1].Embedding, out.Data[2].Embedding
	if dot(cat, tom) <= dot(cat, oslo) {
		t.Errorf("texts sharing words are not closer: %v <= %v", dot(cat, tom), dot(cat, oslo))
	}
	again := llm.FakeEmbedding("m", "my cat is called Tom", llm.DefaultEmbeddingDims)
	for i := range again {
		if again[i] != cat[i] {
			t.Fatal("the same text gave another vector")
		}
	}
	if other := llm.FakeEmbedding("other-model", "my cat is called Tom", llm.DefaultEmbeddingDims); dot(other, cat) > 0.9 {
		t.Errorf("another model's vector is the same space: similarity %v", dot(other, cat))
	}
}

func TestEmbeddingsRefuseWhatTheAPIRefuses(t *testing.T) {
	s := llm.NewServer()
	defer s.Close()
	s.SetEmbeddingDims("nomic-embed-text", 8)
	for _, tc := range []struct{ name, body string }{
		{"no model", `{"input":"x"}`},
		{"empty input", `{"model":"m","input":""}`},
		{"empty list", `{"model":"m","input":[]}`},
		{"dimensions on a model that cannot shorten", `{"model":"nomic-embed-text","input":"x","dimensions":4}`},
		{"unknown encoding", `{"model":"m","input":"x","encoding_format":"int8"}`},
	} {
		if status, body := postTo(t, s.URL+"/embeddings", tc.body); status != http.StatusBadRequest {
			t.Errorf("%s: status %d (%s), want 400", tc.name, status, body)
		}
	}
	status, body := postTo(t, s.URL+"/embeddings", `{"model":"text-embedding-3-small","input":"x","dimensions":16}`)
	if status != http.StatusOK || strings.Count(body, ",") < 15 {
		t.Errorf("dimensions 16 on text-embedding-3-small: %d %s", status, body)
	}
	if n := len(s.EmbeddingRequests()); n != 6 {
		t.Errorf("recorded %d requests, want 6", n)
	}
}

func TestStructuredOutputRefusesAStrictSchemaTheAPIRefuses(t *testing.T) {
	s := llm.NewServer()
	defer s.Close()
	s.SetHandler(func(req llm.Request) llm.Reply { return llm.JSON(map[string]any{"facts": []string{}}) })
	good := `{"model":"m","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema","json_schema":{"name":"facts","strict":true,"schema":{"type":"object","properties":{"facts":{"type":"array","items":{"type":"string"}}},"required":["facts"],"additionalProperties":false}}}}`
	status, body := postTo(t, s.URL+"/chat/completions", good)
	if status != http.StatusOK || !strings.Contains(body, `{\"facts\":[]}`) {
		t.Fatalf("a valid strict schema: %d %s", status, body)
	}
	if got := s.Requests()[0].SchemaName; got != "facts" {
		t.Errorf("schema name recorded %q", got)
	}
	for _, tc := range []struct{ name, body string }{
		{"strict without additionalProperties", strings.Replace(good, `,"additionalProperties":false`, "", 1)},
		{"strict with a property not required", strings.Replace(good, `"required":["facts"]`, `"required":[]`, 1)},
		{"a name with spaces", strings.Replace(good, `"name":"facts"`, `"name":"my facts"`, 1)},
		{"json_object without the word json", `{"model":"m","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_object"}}`},
	} {
		if status, body := postTo(t, s.URL+"/chat/completions", tc.body); status != http.StatusBadRequest {
			t.Errorf("%s: status %d (%s), want 400", tc.name, status, body)
		}
	}
}
