package knowledge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"

	"relaybot/provider"
)

// maxRerankAnswer bounds the body read from a rerank endpoint.
const maxRerankAnswer = 1 << 20

// Reranker orders texts by how well they answer a query through a POST {base_url}/rerank
// endpoint of the Jina and Cohere shape: {model, query, documents, top_n} answered by
// {results: [{index, relevance_score}]}.
type Reranker struct {
	e  provider.Endpoint
	hc *http.Client
}

// NewReranker returns the reranker of e, reached through hc (nil: http.DefaultClient).
func NewReranker(e provider.Endpoint, hc *http.Client) *Reranker {
	if hc == nil {
		hc = http.DefaultClient
	}
	return &Reranker{e: e, hc: hc}
}

// Rerank returns the indexes of texts, best first (every index once: those the endpoint left
// out follow in their order).
func (r *Reranker) Rerank(ctx context.Context, query string, texts []string) ([]int, error) {
	if r.e.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.e.Timeout)
		defer cancel()
	}
	body, err := json.Marshal(map[string]any{"model": r.e.Model, "query": query, "documents": texts, "top_n": len(texts)})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(r.e.BaseURL, "/")+"/rerank", bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("rerank: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if r.e.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+r.e.APIKey)
	}
	resp, err := r.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("rerank %s: %w", r.e.Label(), err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxRerankAnswer))
	if err != nil {
		return nil, fmt.Errorf("rerank %s: %w", r.e.Label(), err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("rerank %s: HTTP %d: %.200s", r.e.Label(), resp.StatusCode, data)
	}
	var ans struct {
		Results []struct {
			Index int     `json:"index"`
			Score float64 `json:"relevance_score"`
		} `json:"results"`
	}
	if err := json.Unmarshal(data, &ans); err != nil {
		return nil, fmt.Errorf("rerank %s: the answer is not JSON of results: %w", r.e.Label(), err)
	}
	sort.SliceStable(ans.Results, func(i, j int) bool { return ans.Results[i].Score > ans.Results[j].Score })
	seen := make([]bool, len(texts))
	out := make([]int, 0, len(texts))
	for _, res := range ans.Results {
		if res.Index < 0 || res.Index >= len(texts) || seen[res.Index] {
			return nil, fmt.Errorf("rerank %s: the answer names document %d of %d", r.e.Label(), res.Index, len(texts))
		}
		seen[res.Index] = true
		out = append(out, res.Index)
	}
	for i, s := range seen {
		if !s {
			out = append(out, i)
		}
	}
	return out, nil
}
