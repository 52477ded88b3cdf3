package native

import (
	"net/url"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

// citation matches a result's number and URL lines as formatResults writes them.
var citation = regexp.MustCompile(`(?m)^\[(\d+)\] (.*)\nURL: (\S*)$`)

// FuzzSearchAnswer reads any bytes as a provider's answer and as its error (parsers of untrusted
// bytes): an error's detail is one short line; of results, what
// reaches the model is valid UTF-8, its URLs are http(s) without anything that ends a Markdown
// link, and its titles and snippets hold no bracket or backtick a link or code span is made of.
func FuzzSearchAnswer(f *testing.F) {
	f.Add(ProviderSearXNG, []byte(`{"results":[{"title":"A [x](tg://y)","url":"https://a.example/(b)","content":"<b>c</b>"}]}`))
	f.Add(ProviderBrave, []byte(`{"web":{"results":[{"title":"T\u202e","url":"javascript:x","description":"d"},{"title":"","url":"http://h/ p"}]}}`))
	f.Add(ProviderTavily, []byte(`{"results":[{"title":"`+strings.Repeat("[", 500)+`","url":"https://u:p@h/","content":"\u0000"}]}`))
	f.Add("error", []byte(`{"error":{"detail":"bad\nkey","status":422}}`))
	f.Add("error", []byte(`{"detail":{"error":"Unauthorized"}}`))
	f.Fuzz(func(t *testing.T, provider string, body []byte) {
		if d := errorDetail(body); strings.ContainsAny(d, "\n\r") || utf8.RuneCountInString(d) > 200 {
			t.Fatalf("an error's detail is not one short line: %q", d)
		}
		raw, err := decodeResults(provider, body)
		if err != nil {
			return
		}
		var res []searchResult
		for _, r := range raw {
			if c, ok := cleanResult(r); ok {
				res = append(res, c)
			}
		}
		text := formatResults("q", res)
		if !utf8.ValidString(text) && utf8.Valid(body) {
			t.Fatalf("not UTF-8: %q", text)
		}
		for _, r := range res {
			if strings.ContainsAny(r.Title+r.Snippet, "[]`<>\n") || strings.ContainsAny(r.URL, " ()<>\n\t") {
				t.Fatalf("result not clean: %+v", r)
			}
			u, err := url.Parse(r.URL)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.User != nil {
				t.Fatalf("URL %q is not a plain http(s) URL", r.URL)
			}
		}
		if got := len(citation.FindAllString(text, -1)); got != len(res) {
			t.Fatalf("%d results, %d numbered in\n%s", len(res), got, text)
		}
	})
}
