package native_test

import (
	"fmt"
	"testing"
	"time"

	"relaybot/internal/testkit/websearch"
	"relaybot/tools/native"
)

// BenchmarkWebSearch is one web_search call against a loopback SearXNG fake: a query the cache
// has not seen (the request, the decode, the cleaning) and one it answers from memory.
func BenchmarkWebSearch(b *testing.B) {
	fake := websearch.New(websearch.SearXNG, websearch.Options{})
	b.Cleanup(fake.Close)
	fake.SetResults(func(q string) []websearch.Result {
		out := make([]websearch.Result, 10)
		for i := range out {
			out[i] = websearch.Result{Title: fmt.Sprintf("<b>Result</b> %d about [%s]", i, q),
				URL: fmt.Sprintf("https://example.org/%d/(page)?q=%d", i, i), Snippet: "A snippet &amp; some <em>markup</em> to clean."}
		}
		return out
	})
	now := time.Unix(1e9, 0)
	l, err := native.NewLoader(native.Options{Now: func() time.Time { return now },
		Search: native.SearchOptions{Provider: native.ProviderSearXNG, BaseURL: fake.URL, Results: 10, CacheTTL: time.Hour}})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("miss", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if _, err := search(l, fmt.Sprintf("query %d", i)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("hit", func(b *testing.B) {
		if _, err := search(l, "the same query"); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, err := search(l, "the same query"); err != nil {
				b.Fatal(err)
			}
		}
	})
}
