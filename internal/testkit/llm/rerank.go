package llm

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"unicode"
)

// maxRerankDocuments is the most documents one rerank request may carry (Cohere's limit; Jina's
// is larger).
const maxRerankDocuments = 1000

// RerankRequest is one recorded POST /v1/rerank.
type RerankRequest struct {
	Model     string
	Query     string
	Documents []string
	TopN      int
}

type wireRerankRequest struct {
	Model     string            `json:"model"`
	Query     *string           `json:"query"`
	Documents []json.RawMessage `json:"documents"`
	TopN      *int              `json:"top_n"`
}

// RerankRequests returns the rerank requests received, in order.
func (s *Server) RerankRequests() []RerankRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]RerankRequest(nil), s.rerankReq...)
}

// FailRerank makes the next n rerank requests fail with status.
func (s *Server) FailRerank(n, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rerankFail, s.rerankFailStatus = n, status
}

// serveRerank answers POST /v1/rerank in the Jina and Cohere shape: {model, query, documents
// (strings, or objects with "text"), top_n} answered by {model, results: [{index,
// relevance_score}], usage}, best first. It refuses what they refuse: no model, no query, no or
// too many documents, a top_n below 1. Its scores are the share of the query's words (their
// first five letters) a document holds, with a bonus for the query's word pairs found side by
// side: a signal of its own, not the keyword index's weights.
func (s *Server) serveRerank(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "reading body: "+err.Error())
		return
	}
	var wr wireRerankRequest
	if err := json.Unmarshal(body, &wr); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "request body is not a rerank request: "+err.Error())
		return
	}
	docs, msg := rerankDocuments(wr)
	if msg != "" {
		writeError(w, http.StatusBadRequest, "invalid_request_error", msg)
		return
	}
	top := len(docs)
	if wr.TopN != nil {
		top = min(*wr.TopN, len(docs))
	}
	s.mu.Lock()
	s.rerankReq = append(s.rerankReq, RerankRequest{Model: wr.Model, Query: *wr.Query, Documents: docs, TopN: top})
	fail, status := s.rerankFail > 0, s.rerankFailStatus
	if fail {
		s.rerankFail--
	}
	s.mu.Unlock()
	if fail {
		writeError(w, status, errorType(status, ""), "llm fake: rerank unavailable")
		return
	}
	type result struct {
		Index int     `json:"index"`
		Score float64 `json:"relevance_score"`
	}
	results := make([]result, len(docs))
	for i, d := range docs {
		results[i] = result{Index: i, Score: RerankScore(*wr.Query, d)}
	}
	sort.SliceStable(results, func(i, j int) bool { return results[i].Score > results[j].Score })
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"model": wr.Model, "results": results[:top],
		"usage": map[string]int{"total_tokens": len(strings.Fields(*wr.Query)) * len(docs)}})
}

func rerankDocuments(wr wireRerankRequest) ([]string, string) {
	switch {
	case wr.Model == "":
		return nil, "'model' is a required property"
	case wr.Query == nil || strings.TrimSpace(*wr.Query) == "":
		return nil, "'query' must be a non-empty string"
	case len(wr.Documents) == 0:
		return nil, "'documents' must hold at least one document"
	case len(wr.Documents) > maxRerankDocuments:
		return nil, fmt.Sprintf("'documents' holds %d documents, more than %d", len(wr.Documents), maxRerankDocuments)
	case wr.TopN != nil && *wr.TopN < 1:
		return nil, fmt.Sprintf("'top_n' must be at least 1, got %d", *wr.TopN)
	}
	out := make([]string, len(wr.Documents))
	for i, raw := range wr.Documents {
		var text string
		if err := json.Unmarshal(raw, &text); err == nil {
			out[i] = text
			continue
		}
		var obj struct {
			Text *string `json:"text"`
		}
		if err := json.Unmarshal(raw, &obj); err != nil || obj.Text == nil {
			return nil, fmt.Sprintf("'documents[%d]' must be a string or an object with 'text'", i)
		}
		out[i] = *obj.Text
	}
	return out, ""
}

// RerankScore is the fake's relevance of doc to query, between 0 and 2.
func RerankScore(query, doc string) float64 {
	stem := func(text string) []string {
		words := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
		for i, w := range words {
			if r := []rune(w); len(r) > 5 {
				words[i] = string(r[:5])
			}
		}
		return words
	}
	q, d := stem(query), stem(doc)
	if len(q) == 0 {
		return 0
	}
	has := map[string]bool{}
	pairs := map[[2]string]bool{}
	for i, w := range d {
		has[w] = true
		if i > 0 {
			pairs[[2]string{d[i-1], w}] = true
		}
	}
	hit, adjacent := 0, 0
	for i, w := range q {
		if has[w] {
			hit++
		}
		if i > 0 && pairs[[2]string{q[i-1], w}] {
			adjacent++
		}
	}
	score := float64(hit) / float64(len(q))
	if len(q) > 1 {
		score += float64(adjacent) / float64(len(q)-1)
	}
	return score
}
