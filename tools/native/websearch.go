package native

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode"

	"relaybot/tools"
)

// The web search providers web_search speaks to.
const (
	// ProviderSearXNG is a SearXNG instance's JSON API (GET /search?format=json): self-hosted,
	// no key; the instance must list json among its search.formats.
	ProviderSearXNG = "searxng"
	// ProviderBrave is the Brave Search API (GET /res/v1/web/search, X-Subscription-Token).
	ProviderBrave = "brave"
	// ProviderTavily is Tavily's search API (POST /search, Authorization: Bearer).
	ProviderTavily = "tavily"
)

// SearchProviders lists the providers web_search speaks to.
func SearchProviders() []string { return []string{ProviderSearXNG, ProviderBrave, ProviderTavily} }

// The public API of each provider that has one, used when SearchOptions.BaseURL is empty.
const (
	BraveBaseURL  = "https://api.search.brave.com/res/v1"
	TavilyBaseURL = "https://api.tavily.com"
)

// Limits of web_search.
const (
	// DefaultSearchResults is how many results a search returns when SearchOptions.Results is 0;
	// MaxSearchResults the most any provider is asked for (Brave and Tavily take at most 20).
	DefaultSearchResults = 5
	MaxSearchResults     = 20
	// MaxQueryChars caps a query (Brave refuses longer ones; Tavily advises under 400).
	MaxQueryChars = 400
	// searchCacheEntries bounds the per-process cache of results.
	searchCacheEntries = 256
	// maxSearchBody caps the provider's answer read.
	maxSearchBody = 2 << 20
	titleRunes    = 160
	snippetRunes  = 400
)

// SearchOptions configures web_search. An empty Provider leaves the tool out.
type SearchOptions struct {
	Provider string
	// BaseURL is the API's base: a SearXNG instance's root (required for searxng), or another
	// base for Brave's and Tavily's API (empty: their public one). The admin configured it, so it
	// is reached as a model endpoint is, private addresses included (decision 055), and never
	// through a redirect.
	BaseURL string
	// APIKey is sent to Brave (X-Subscription-Token) and Tavily (Bearer); a SearXNG instance
	// behind a proxy that wants one gets it as a Bearer token. It never reaches a log, an error
	// or the audit.
	APIKey string
	// Results is how many results a search returns (1..MaxSearchResults); 0 means
	// DefaultSearchResults.
	Results int
	// CacheTTL is how long a query's results are kept and answered again (per process, at most
	// 256 queries); 0 caches nothing.
	CacheTTL time.Duration
	// Timeout caps one search; 0 means DefaultTimeout.
	Timeout time.Duration
}

// searchResult is one result as every provider's answer is read into.
type searchResult struct {
	Title, URL, Snippet string
}

var webSearchSpec = tools.Spec{
	Name: WebSearch,
	Description: "Search the web. Returns numbered results (title, URL, snippet). Cite the results you use " +
		"as Markdown links with their number, e.g. [1](URL), using the URL exactly as given.",
	Parameters: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string",` +
		`"description":"What to search for, as you would type it into a search engine (at most 400 characters)."}},` +
		`"required":["query"],"additionalProperties":false}`),
	ReadOnly: true,
}

// searcher runs web_search: the configured provider behind a short cache.
type searcher struct {
	opts   SearchOptions
	client *http.Client
	cache  *resultCache
	now    func() time.Time
}

func newSearcher(opts SearchOptions, now func() time.Time) *searcher {
	if opts.Results <= 0 {
		opts.Results = DefaultSearchResults
	}
	opts.Results = min(opts.Results, MaxSearchResults)
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.BaseURL == "" {
		switch opts.Provider {
		case ProviderBrave:
			opts.BaseURL = BraveBaseURL
		case ProviderTavily:
			opts.BaseURL = TavilyBaseURL
		}
	}
	opts.BaseURL = strings.TrimRight(opts.BaseURL, "/")
	return &searcher{opts: opts, client: adminClient(opts.Timeout), cache: newResultCache(searchCacheEntries), now: now}
}

// adminClient is the client of an endpoint the admin configured (a search API, an images
// endpoint): any address, as the model endpoints are reached, but no redirect is followed, so
// the key it carries never travels to another origin.
func adminClient(timeout time.Duration) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.ResponseHeaderTimeout = timeout
	return &http.Client{
		Transport: t,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// webSearch runs web_search.
func (l *Loader) webSearch(ctx context.Context, raw json.RawMessage, r tools.Running) (tools.Result, error) {
	var a struct {
		Query string `json:"query"`
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		return tools.Result{}, fmt.Errorf("web_search: bad arguments: %w", err)
	}
	q := strings.Join(strings.Fields(a.Query), " ")
	switch {
	case q == "":
		return tools.Result{}, errors.New("web_search: query is empty")
	case len([]rune(q)) > MaxQueryChars:
		return tools.Result{}, fmt.Errorf("web_search: query is longer than %d characters; search for something shorter", MaxQueryChars)
	}
	s := l.search
	key := s.opts.Provider + "\x00" + strings.ToLower(q)
	if res, ok := s.cache.get(key, s.now()); ok {
		return tools.Result{Text: formatResults(q, res)}, nil
	}
	if r != nil {
		r.Progress(tools.Progress{Message: "searching the web"})
	}
	cctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	res, err := s.query(cctx, q)
	if err != nil {
		return tools.Result{}, s.searchError(ctx, cctx, err)
	}
	if s.opts.CacheTTL > 0 {
		s.cache.put(key, res, s.now().Add(s.opts.CacheTTL))
	}
	return tools.Result{Text: formatResults(q, res)}, nil
}

// query asks the provider and reads its answer into at most opts.Results clean results.
func (s *searcher) query(ctx context.Context, q string) ([]searchResult, error) {
	req, err := s.request(ctx, q)
	if err != nil {
		return nil, err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err // url.Error repeats the URL, with the query
		}
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxSearchBody+1))
	if err != nil {
		return nil, fmt.Errorf("reading the answer: %w", err)
	}
	if len(body) > maxSearchBody {
		return nil, fmt.Errorf("the answer is larger than %d bytes", maxSearchBody)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, &providerError{Status: resp.StatusCode, Detail: s.redact(errorDetail(body)), Provider: s.opts.Provider,
			Key: "tools.web_search.api_key"}
	}
	raw, err := decodeResults(s.opts.Provider, body)
	if err != nil {
		return nil, fmt.Errorf("reading the answer: %w", err)
	}
	var out []searchResult
	for _, r := range raw {
		if c, ok := cleanResult(r); ok {
			out = append(out, c)
		}
		if len(out) == s.opts.Results {
			break
		}
	}
	return out, nil
}

// request is the provider's search request for q.
func (s *searcher) request(ctx context.Context, q string) (*http.Request, error) {
	var (
		req *http.Request
		err error
	)
	switch s.opts.Provider {
	case ProviderBrave:
		v := url.Values{"q": {q}, "count": {fmt.Sprint(s.opts.Results)}}
		req, err = http.NewRequestWithContext(ctx, http.MethodGet, s.opts.BaseURL+"/web/search?"+v.Encode(), nil)
		if err == nil && s.opts.APIKey != "" {
			req.Header.Set("X-Subscription-Token", s.opts.APIKey)
		}
	case ProviderTavily:
		body, _ := json.Marshal(map[string]any{"query": q, "max_results": s.opts.Results, "search_depth": "basic"})
		req, err = http.NewRequestWithContext(ctx, http.MethodPost, s.opts.BaseURL+"/search", strings.NewReader(string(body)))
		if err == nil {
			req.Header.Set("Content-Type", "application/json")
		}
		if err == nil && s.opts.APIKey != "" {
			req.Header.Set("Authorization", "Bearer "+s.opts.APIKey)
		}
	default:
		v := url.Values{"q": {q}, "format": {"json"}, "pageno": {"1"}}
		req, err = http.NewRequestWithContext(ctx, http.MethodGet, s.opts.BaseURL+"/search?"+v.Encode(), nil)
		if err == nil && s.opts.APIKey != "" {
			req.Header.Set("Authorization", "Bearer "+s.opts.APIKey)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("building the request: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", DefaultAgent)
	return req, nil
}

// decodeResults reads the provider's answer.
func decodeResults(provider string, body []byte) ([]searchResult, error) {
	type item struct {
		Title       string `json:"title"`
		URL         string `json:"url"`
		Content     string `json:"content"`
		Description string `json:"description"`
	}
	var a struct {
		Results []item `json:"results"` // SearXNG, Tavily
		Web     struct {
			Results []item `json:"results"`
		} `json:"web"` // Brave
	}
	if err := json.Unmarshal(body, &a); err != nil {
		return nil, err
	}
	items := a.Results
	if provider == ProviderBrave {
		items = a.Web.Results
	}
	out := make([]searchResult, len(items))
	for i, it := range items {
		snippet := it.Content
		if provider == ProviderBrave {
			snippet = it.Description
		}
		out[i] = searchResult{Title: it.Title, URL: it.URL, Snippet: snippet}
	}
	return out, nil
}

// cleanResult makes a provider's result safe to hand to the model and, through its answer, to
// every surface: the URL an absolute http(s) URL without credentials, whitespace or the
// characters that would end a Markdown link's destination; title and snippet one line of plain
// text (HTML tags and entities, which Brave puts in its snippets, removed), without the brackets
// and backticks a Markdown link or code span is made of, each cut to a length. A result whose
// URL is not such a URL is dropped.
func cleanResult(r searchResult) (searchResult, bool) {
	u, err := url.Parse(strings.TrimSpace(r.URL))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return searchResult{}, false
	}
	link := u.String()
	if strings.ContainsFunc(link, func(c rune) bool { return unicode.IsSpace(c) || unicode.IsControl(c) }) {
		return searchResult{}, false
	}
	link = strings.NewReplacer("(", "%28", ")", "%29", "<", "%3C", ">", "%3E").Replace(link)
	if again, err := url.Parse(link); err != nil || again.Host == "" || again.Scheme != u.Scheme {
		return searchResult{}, false // such characters in the host: no URL to cite
	}
	title := plainLine(r.Title, titleRunes)
	if title == "" {
		title = u.Host
	}
	return searchResult{Title: title, URL: link, Snippet: plainLine(r.Snippet, snippetRunes)}, true
}

// markup are the characters a title or snippet loses: those Markdown builds links, images and
// code from.
var markup = strings.NewReplacer("[", "(", "]", ")", "`", "'", "<", "‹", ">", "›")

// plainLine is s as one line of plain text of at most n runes.
func plainLine(s string, n int) string {
	s = html.UnescapeString(stripTags(s))
	s = strings.Map(func(c rune) rune {
		if unicode.IsControl(c) || unicode.Is(unicode.Cf, c) {
			return ' '
		}
		return c
	}, s)
	s = strings.Join(strings.Fields(markup.Replace(s)), " ")
	if r := []rune(s); len(r) > n {
		s = strings.TrimSpace(string(r[:n-1])) + "…"
	}
	return s
}

// stripTags removes what looks like HTML tags ("<strong>", "</b>").
func stripTags(s string) string {
	if !strings.Contains(s, "<") {
		return s
	}
	var b strings.Builder
	in := false
	for _, c := range s {
		switch {
		case c == '<':
			in = true
		case c == '>' && in:
			in = false
		case !in:
			b.WriteRune(c)
		}
	}
	return b.String()
}

// formatResults is what the model reads of a search: the results numbered for citation.
func formatResults(q string, res []searchResult) string {
	var b strings.Builder
	if len(res) == 0 {
		fmt.Fprintf(&b, "No results for %q.", q)
		return b.String()
	}
	fmt.Fprintf(&b, "Web results for %q:\n", q)
	for i, r := range res {
		fmt.Fprintf(&b, "\n[%d] %s\nURL: %s\n", i+1, r.Title, r.URL)
		if r.Snippet != "" {
			fmt.Fprintf(&b, "%s\n", r.Snippet)
		}
	}
	b.WriteString("\nCite what you use as [number](URL) with the URL exactly as above.")
	return b.String()
}

// providerError is a provider's refusal: its HTTP status and what it said.
type providerError struct {
	Provider string
	// Key names the configuration key of the API key, for the line an admin acts on.
	Key    string
	Status int
	Detail string
}

func (e *providerError) Error() string {
	what := fmt.Sprintf("%s answered HTTP %d", e.Provider, e.Status)
	switch {
	case e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden && e.Provider != ProviderSearXNG:
		what += " (the bot's API key was refused: an admin must check " + e.Key + ")"
	case e.Status == http.StatusForbidden:
		what += " (the instance refuses format=json: an admin must add json to search.formats in its settings.yml)"
	case e.Status == http.StatusTooManyRequests || e.Status == 432 || e.Status == 433:
		what += " (rate limited or over the plan's limit: try again later or answer without searching)"
	case e.Status >= 500:
		what += " (the search service is failing: try again later)"
	}
	if e.Detail != "" {
		what += ": " + e.Detail
	}
	return what
}

// errorDetail is the message of a provider's error answer, one short line: Brave's
// error.detail, Tavily's detail.error, OpenAI's error.message, or the body's text.
func errorDetail(body []byte) string {
	var a struct {
		Error  json.RawMessage `json:"error"`
		Detail json.RawMessage `json:"detail"`
	}
	msg := ""
	if json.Unmarshal(body, &a) == nil {
		for _, raw := range []json.RawMessage{a.Error, a.Detail} {
			var s string
			var o struct {
				Detail  string `json:"detail"`
				Message string `json:"message"`
				Error   string `json:"error"`
			}
			switch {
			case len(raw) == 0:
			case json.Unmarshal(raw, &s) == nil && s != "":
				msg = s
			case json.Unmarshal(raw, &o) == nil:
				msg = firstNonEmpty(o.Detail, o.Message, o.Error)
			}
			if msg != "" {
				break
			}
		}
	} else {
		msg = stripTags(string(body))
	}
	return plainLine(msg, 200)
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// redact removes the API key from text a provider sent back.
func (s *searcher) redact(text string) string {
	if s.opts.APIKey == "" {
		return text
	}
	return strings.ReplaceAll(text, s.opts.APIKey, tools.Redacted)
}

// searchError is the tool's error for a failed search: a timeout wraps tools.ErrTimeout.
func (s *searcher) searchError(parent, cctx context.Context, err error) error {
	switch {
	case parent.Err() != nil:
		return fmt.Errorf("web_search: %w", parent.Err())
	case errors.Is(cctx.Err(), context.DeadlineExceeded) || tools.IsTimeout(err):
		return fmt.Errorf("web_search: %s gave no answer within %s: %w", s.opts.Provider, s.opts.Timeout, tools.ErrTimeout)
	}
	var perr *providerError
	if errors.As(err, &perr) {
		return fmt.Errorf("web_search: %w", err)
	}
	return fmt.Errorf("web_search: %s: %s", s.opts.Provider, s.redact(err.Error()))
}
