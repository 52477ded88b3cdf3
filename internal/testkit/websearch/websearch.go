// Package websearch is a loopback fake of three web search APIs, each speaking its real wire
// protocol and refusing what the real one refuses: a SearXNG instance's JSON API
// (GET /search?format=json; 403 when json is not among its formats, 429 from its limiter),
// the Brave Search API (GET /res/v1/web/search with X-Subscription-Token; 401 for a missing or
// wrong token, 422 for bad parameters, 429 over the rate limit) and Tavily's search API
// (POST /search with Authorization: Bearer; 401, 400, 429, 432 over the plan's credits).
package websearch

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
)

// Providers the fake speaks as.
const (
	SearXNG = "searxng"
	Brave   = "brave"
	Tavily  = "tavily"
)

// Result is one search result as the fake answers it.
type Result struct {
	Title, URL, Snippet string
}

// Options configures a fake.
type Options struct {
	// Key is the API key the fake takes (Brave, Tavily; a SearXNG fake with a Key wants it as a
	// Bearer token, as a proxy in front of one would). Empty: a SearXNG fake takes none; Brave's
	// and Tavily's always want one, so empty refuses every request.
	Key string
	// NoJSON makes a SearXNG fake refuse format=json, as an instance whose settings.yml lists
	// only html does.
	NoJSON bool
}

// Request is one request the fake received.
type Request struct {
	Query string
	Count int
}

// Server is a running fake of one provider.
type Server struct {
	// URL is the base the bot is configured with: the instance's root for SearXNG, .../res/v1
	// for Brave, the API root for Tavily.
	URL string

	provider string
	opts     Options
	srv      *httptest.Server

	mu       sync.Mutex
	results  func(q string) []Result
	limited  int // the next requests answered 429
	requests []Request
}

// New starts a fake of provider (SearXNG, Brave or Tavily).
func New(provider string, opts Options) *Server {
	s := &Server{provider: provider, opts: opts, results: DefaultResults}
	mux := http.NewServeMux()
	switch provider {
	case SearXNG:
		mux.HandleFunc("/search", s.searxng)
	case Brave:
		mux.HandleFunc("/res/v1/web/search", s.brave)
	case Tavily:
		mux.HandleFunc("/search", s.tavily)
	default:
		panic("websearch: unknown provider " + provider)
	}
	s.srv = httptest.NewServer(mux)
	s.URL = s.srv.URL
	if provider == Brave {
		s.URL += "/res/v1"
	}
	return s
}

// Close stops the fake.
func (s *Server) Close() { s.srv.Close() }

// DefaultResults answers any query with three results about it.
func DefaultResults(q string) []Result {
	out := make([]Result, 3)
	for i := range out {
		out[i] = Result{Title: fmt.Sprintf("Result %d about %s", i+1, q),
			URL:     fmt.Sprintf("https://example.org/%d?q=%s", i+1, strings.ReplaceAll(q, " ", "+")),
			Snippet: fmt.Sprintf("What page %d says about %s.", i+1, q)}
	}
	return out
}

// SetResults makes the fake answer with f's results.
func (s *Server) SetResults(f func(q string) []Result) {
	s.mu.Lock()
	s.results = f
	s.mu.Unlock()
}

// RateLimit makes the next n requests be refused as over the rate limit (429).
func (s *Server) RateLimit(n int) {
	s.mu.Lock()
	s.limited = n
	s.mu.Unlock()
}

// Requests returns the accepted requests, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// take records an accepted request and returns its results, or reports that it is to be
// refused as over the limit.
func (s *Server) take(q string, count int) ([]Result, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.limited > 0 {
		s.limited--
		return nil, false
	}
	s.requests = append(s.requests, Request{Query: q, Count: count})
	res := s.results(q)
	if count > 0 && len(res) > count {
		res = res[:count]
	}
	return res, true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// searxng answers as searx/webapp.py's /search does.
func (s *Server) searxng(w http.ResponseWriter, r *http.Request) {
	if s.opts.Key != "" && r.Header.Get("Authorization") != "Bearer "+s.opts.Key {
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
		return
	}
	format := r.FormValue("format")
	if format != "" && format != "html" && (format != "json" || s.opts.NoJSON) {
		http.Error(w, "Forbidden", http.StatusForbidden)
		return
	}
	q := r.FormValue("q")
	if q == "" {
		http.Error(w, "Bad Request", http.StatusBadRequest)
		return
	}
	res, ok := s.take(q, 0)
	if !ok {
		http.Error(w, "Too Many Requests", http.StatusTooManyRequests)
		return
	}
	if format != "json" {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, "<!DOCTYPE html><html><body>results</body></html>")
		return
	}
	items := make([]map[string]any, len(res))
	for i, x := range res {
		items[i] = map[string]any{"url": x.URL, "title": x.Title, "content": x.Snippet, "engine": "fake",
			"engines": []string{"fake"}, "score": 1.0 / float64(i+1), "category": "general"}
	}
	writeJSON(w, http.StatusOK, map[string]any{"query": q, "number_of_results": len(res), "results": items,
		"answers": []any{}, "corrections": []any{}, "infoboxes": []any{}, "suggestions": []any{}, "unresponsive_engines": []any{}})
}

// braveError is the Brave Search API's error body.
func braveError(w http.ResponseWriter, status int, code, detail string) {
	writeJSON(w, status, map[string]any{"type": "ErrorResponse", "time": 1765000000,
		"error": map[string]any{"id": "00000000-0000-0000-0000-000000000000", "status": status, "code": code, "detail": detail, "meta": map[string]any{}}})
}

// brave answers as GET /res/v1/web/search does.
func (s *Server) brave(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		braveError(w, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", "Method Not Allowed")
		return
	}
	switch tok := r.Header.Get("X-Subscription-Token"); {
	case tok == "":
		braveError(w, http.StatusUnauthorized, "SUBSCRIPTION_TOKEN_MISSING", "The request requires a subscription token.")
		return
	case tok != s.opts.Key || s.opts.Key == "":
		braveError(w, http.StatusUnauthorized, "SUBSCRIPTION_TOKEN_INVALID", "The provided subscription token is invalid.")
		return
	}
	q := r.URL.Query().Get("q")
	count := 20
	if c := r.URL.Query().Get("count"); c != "" {
		n, err := strconv.Atoi(c)
		if err != nil || n < 1 || n > 20 {
			braveError(w, http.StatusUnprocessableEntity, "VALIDATION", "Unable to validate request parameter(s): count must be between 1 and 20.")
			return
		}
		count = n
	}
	if q == "" || len([]rune(q)) > 400 || len(strings.Fields(q)) > 50 {
		braveError(w, http.StatusUnprocessableEntity, "VALIDATION", "Unable to validate request parameter(s): q must have 1 to 400 characters and at most 50 words.")
		return
	}
	res, ok := s.take(q, count)
	if !ok {
		w.Header().Set("X-RateLimit-Remaining", "0, 0")
		braveError(w, http.StatusTooManyRequests, "RATE_LIMITED", "Request rate limit exceeded for plan.")
		return
	}
	items := make([]map[string]any, len(res))
	for i, x := range res {
		items[i] = map[string]any{"type": "search_result", "title": x.Title, "url": x.URL, "description": x.Snippet,
			"is_source_local": false, "family_friendly": true}
	}
	writeJSON(w, http.StatusOK, map[string]any{"type": "search", "query": map[string]any{"original": q},
		"web": map[string]any{"type": "search", "results": items, "family_friendly": true}})
}

// tavilyError is Tavily's error body.
func tavilyError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]any{"detail": map[string]any{"error": msg}})
}

// tavily answers as POST /search does.
func (s *Server) tavily(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		tavilyError(w, http.StatusMethodNotAllowed, "Method Not Allowed")
		return
	}
	if key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); !ok || key == "" || key != s.opts.Key {
		tavilyError(w, http.StatusUnauthorized, "Unauthorized: missing or invalid API key.")
		return
	}
	var body struct {
		Query       string `json:"query"`
		MaxResults  *int   `json:"max_results"`
		SearchDepth string `json:"search_depth"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		tavilyError(w, http.StatusBadRequest, "Invalid JSON body.")
		return
	}
	count := 5
	switch {
	case strings.TrimSpace(body.Query) == "":
		tavilyError(w, http.StatusBadRequest, "Query is missing.")
		return
	case body.MaxResults != nil && (*body.MaxResults < 0 || *body.MaxResults > 20):
		tavilyError(w, http.StatusBadRequest, "max_results must be between 0 and 20.")
		return
	case body.SearchDepth != "" && body.SearchDepth != "basic" && body.SearchDepth != "advanced" &&
		body.SearchDepth != "fast" && body.SearchDepth != "ultra-fast":
		tavilyError(w, http.StatusBadRequest, "Invalid search depth.")
		return
	case body.MaxResults != nil:
		count = *body.MaxResults
	}
	res, ok := s.take(body.Query, count)
	if !ok {
		tavilyError(w, http.StatusTooManyRequests, "Your request has been blocked due to excessive requests. Please reduce rate of requests.")
		return
	}
	items := make([]map[string]any, len(res))
	for i, x := range res {
		items[i] = map[string]any{"title": x.Title, "url": x.URL, "content": x.Snippet, "score": 1.0 / float64(i+1), "raw_content": nil}
	}
	writeJSON(w, http.StatusOK, map[string]any{"query": body.Query, "answer": nil, "images": []any{}, "results": items,
		"response_time": 0.5, "request_id": "fake"})
}
