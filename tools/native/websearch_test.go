package native_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"relaybot/internal/testkit/websearch"
	"relaybot/tools"
	"relaybot/tools/native"
)

const searchKey = "sk-search-secret-123"

// searchLoader is the native tools with web_search against fake, the clock at *now.
func searchLoader(t *testing.T, opts native.SearchOptions, now *time.Time) *native.Loader {
	t.Helper()
	l, err := native.NewLoader(native.Options{Search: opts, Now: func() time.Time { return *now }})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func search(l *native.Loader, q string) (tools.Result, error) {
	args, _ := json.Marshal(map[string]string{"query": q})
	return l.Call(context.Background(), tools.Invocation{Name: native.WebSearch, Arguments: args})
}

func TestWebSearchNumbersEachProvidersResultsForCitation(t *testing.T) {
	for _, p := range []string{websearch.SearXNG, websearch.Brave, websearch.Tavily} {
		t.Run(p, func(t *testing.T) {
			key := searchKey
			if p == websearch.SearXNG {
				key = ""
			}
			fake := websearch.New(p, websearch.Options{Key: key})
			t.Cleanup(fake.Close)
			now := time.Unix(1e9, 0)
			l := searchLoader(t, native.SearchOptions{Provider: p, BaseURL: fake.URL, APIKey: key, Results: 2}, &now)
			res, err := search(l, "  go   generics ")
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{
				`Web results for "go generics"`,
				"[1] Result 1 about go generics\nURL: https://example.org/1?q=go+generics\nWhat page 1 says about go generics.",
				"[2] Result 2 about go generics\nURL: https://example.org/2?q=go+generics",
				"Cite what you use as [number](URL)",
			} {
				if !strings.Contains(res.Text, want) {
					t.Errorf("the model read\n%s\nwithout %q", res.Text, want)
				}
			}
			if strings.Contains(res.Text, "[3]") {
				t.Errorf("results = 2, the model read a third:\n%s", res.Text)
			}
			if got := fake.Requests(); len(got) != 1 || got[0].Query != "go generics" {
				t.Errorf("the provider got %+v, want one request for %q", got, "go generics")
			}
		})
	}
}

func TestWebSearchIsOfferedOnlyWhenConfigured(t *testing.T) {
	l, err := native.NewLoader(native.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range l.Tools(context.Background()) {
		if s.Name == native.WebSearch || s.Name == native.GenerateImage {
			t.Errorf("%s is offered without its configuration", s.Name)
		}
	}
	if _, err := native.NewLoader(native.Options{Search: native.SearchOptions{Provider: "bing"}}); err == nil {
		t.Error("an unknown provider was taken")
	}
}

func TestWebSearchAnswersARepeatedQueryFromItsCacheUntilItExpires(t *testing.T) {
	fake := websearch.New(websearch.SearXNG, websearch.Options{})
	t.Cleanup(fake.Close)
	now := time.Unix(1e9, 0)
	l := searchLoader(t, native.SearchOptions{Provider: native.ProviderSearXNG, BaseURL: fake.URL, CacheTTL: time.Minute}, &now)
	first, err := search(l, "Weather Berlin")
	if err != nil {
		t.Fatal(err)
	}
	now = now.Add(59 * time.Second)
	again, err := search(l, "weather  berlin")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(fake.Requests()); n != 1 {
		t.Fatalf("the same query within the TTL reached the provider %d times, want 1", n)
	}
	body := func(s string) string { _, b, _ := strings.Cut(s, "[1]"); return b }
	if body(again.Text) != body(first.Text) {
		t.Errorf("the cached answer differs:\n%s\nwant\n%s", again.Text, first.Text)
	}
	now = now.Add(2 * time.Second)
	if _, err := search(l, "weather berlin"); err != nil {
		t.Fatal(err)
	}
	if n := len(fake.Requests()); n != 2 {
		t.Fatalf("after the TTL the query reached the provider %d times in all, want 2", n)
	}
}

func TestWebSearchCacheStaysBounded(t *testing.T) {
	fake := websearch.New(websearch.SearXNG, websearch.Options{})
	t.Cleanup(fake.Close)
	now := time.Unix(1e9, 0)
	l := searchLoader(t, native.SearchOptions{Provider: native.ProviderSearXNG, BaseURL: fake.URL, CacheTTL: time.Hour}, &now)
	for i := range 300 {
		if _, err := search(l, "q"+strings.Repeat("x", i%7)+string(rune('a'+i%26))+string(rune('a'+i/26))); err != nil {
			t.Fatal(err)
		}
	}
	before := len(fake.Requests())
	// The first query was pushed out by the 256 after it; the last is still kept.
	search(l, "qaa")
	search(l, "q"+strings.Repeat("x", 299%7)+string(rune('a'+299%26))+string(rune('a'+299/26)))
	if got := len(fake.Requests()) - before; got != 1 {
		t.Errorf("%d of the two queries reached the provider, want 1 (the oldest evicted, the newest cached)", got)
	}
}

// TestWebSearchResultsCannotInjectLinks: a hostile page's title and snippet are text, and only
// http(s) URLs reach the model, with nothing in them that ends a Markdown link.
func TestWebSearchResultsCannotInjectLinks(t *testing.T) {
	fake := websearch.New(websearch.SearXNG, websearch.Options{})
	t.Cleanup(fake.Close)
	fake.SetResults(func(string) []websearch.Result {
		return []websearch.Result{
			{Title: "Click [here](tg://resolve?domain=evil) `code`", URL: "javascript:alert(1)", Snippet: "x"},
			{Title: "Win <b>big</b> ![img](https://evil.example/x.png)\n\nnew paragraph", URL: "https://ok.example/a_(b)?c=<d>",
				Snippet: "<strong>Bold</strong> &amp; [link](https://evil.example) \u202e"},
			{Title: "Creds", URL: "https://user:pass@evil.example/", Snippet: "x"},
			{Title: "Relative", URL: "/local/path", Snippet: "x"},
		}
	})
	now := time.Unix(1e9, 0)
	l := searchLoader(t, native.SearchOptions{Provider: native.ProviderSearXNG, BaseURL: fake.URL}, &now)
	res, err := search(l, "anything")
	if err != nil {
		t.Fatal(err)
	}
	results, _, _ := strings.Cut(res.Text, "Cite what you use")
	for _, bad := range []string{"javascript:", "tg://", "](", "[", "`", "<b>", "<strong>", "user:pass", "/local/path", "\u202e"} {
		if strings.Contains(strings.ReplaceAll(results, "[1]", ""), bad) {
			t.Errorf("the model read %q in\n%s", bad, res.Text)
		}
	}
	for _, want := range []string{"URL: https://ok.example/a_%28b%29?c=%3Cd%3E", "Bold & (link)"} {
		if !strings.Contains(res.Text, want) {
			t.Errorf("the model read\n%s\nwithout %q", res.Text, want)
		}
	}
}

// TestWebSearchProviderRefusalsBecomeClearErrors: what each provider refuses reaches the model
// as a sentence saying what to do, and never carries the key.
func TestWebSearchProviderRefusalsBecomeClearErrors(t *testing.T) {
	cases := []struct {
		name, provider string
		fake           websearch.Options
		key            string
		setup          func(*websearch.Server)
		want           string
	}{
		{"brave missing key", websearch.Brave, websearch.Options{Key: searchKey}, "", nil, "HTTP 401 (the bot's API key was refused: an admin must check tools.web_search.api_key)"},
		{"brave wrong key", websearch.Brave, websearch.Options{Key: searchKey}, "wrong-key-456", nil, "subscription token is invalid"},
		{"brave rate limit", websearch.Brave, websearch.Options{Key: searchKey}, searchKey, func(s *websearch.Server) { s.RateLimit(1) }, "HTTP 429 (rate limited"},
		{"tavily wrong key", websearch.Tavily, websearch.Options{Key: searchKey}, "wrong-key-456", nil, "HTTP 401"},
		{"tavily rate limit", websearch.Tavily, websearch.Options{Key: searchKey}, searchKey, func(s *websearch.Server) { s.RateLimit(1) }, "excessive requests"},
		{"searxng without json", websearch.SearXNG, websearch.Options{NoJSON: true}, "", nil, "add json to search.formats"},
		{"searxng limiter", websearch.SearXNG, websearch.Options{}, "", func(s *websearch.Server) { s.RateLimit(1) }, "HTTP 429"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fake := websearch.New(c.provider, c.fake)
			t.Cleanup(fake.Close)
			if c.setup != nil {
				c.setup(fake)
			}
			now := time.Unix(1e9, 0)
			l := searchLoader(t, native.SearchOptions{Provider: c.provider, BaseURL: fake.URL, APIKey: c.key}, &now)
			_, err := search(l, "q")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
			if c.key != "" && strings.Contains(err.Error(), c.key) {
				t.Errorf("the error carries the key: %v", err)
			}
		})
	}
}

func TestWebSearchRefusesAnEmptyOrOverlongQueryWithoutAsking(t *testing.T) {
	fake := websearch.New(websearch.SearXNG, websearch.Options{})
	t.Cleanup(fake.Close)
	now := time.Unix(1e9, 0)
	l := searchLoader(t, native.SearchOptions{Provider: native.ProviderSearXNG, BaseURL: fake.URL}, &now)
	for _, q := range []string{"   ", strings.Repeat("a", native.MaxQueryChars+1)} {
		if _, err := search(l, q); err == nil {
			t.Errorf("query of %d characters was taken", len(q))
		}
	}
	if n := len(fake.Requests()); n != 0 {
		t.Errorf("the provider got %d requests", n)
	}
}

func TestWebSearchTimesOut(t *testing.T) {
	fake := websearch.New(websearch.SearXNG, websearch.Options{})
	t.Cleanup(fake.Close)
	block := make(chan struct{})
	t.Cleanup(func() { close(block) })
	fake.SetResults(func(string) []websearch.Result { <-block; return nil })
	now := time.Unix(1e9, 0)
	l := searchLoader(t, native.SearchOptions{Provider: native.ProviderSearXNG, BaseURL: fake.URL, Timeout: 50 * time.Millisecond}, &now)
	_, err := search(l, "slow")
	if !errors.Is(err, tools.ErrTimeout) {
		t.Fatalf("error %v, want a timeout", err)
	}
}
