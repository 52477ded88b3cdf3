package markdown

import (
	"strings"
	"testing"
)

func TestHTMLRendersMarkdownAndDropsWhatCouldRun(t *testing.T) {
	cases := []struct {
		name        string
		md          string
		want, never []string
	}{
		{"emphasis and code", "**b** _i_ ~~s~~ `c`", []string{"<strong>b</strong>", "<em>i</em>", "<del>s</del>", "<code>c</code>"}, nil},
		{"fenced code keeps its language", "```go\nx := 1\n```", []string{`<pre><code class="language-go">x := 1`}, nil},
		{"table", "| a | b |\n|---|---|\n| 1 | 2 |", []string{"<table>", "<th>a</th>", "<td>2</td>"}, nil},
		{"quote and nested list", "> q\n\n- a\n  - b", []string{"<blockquote>", "<ul>\n<li>b</li>"}, nil},
		{"links open safely", "[Go](https://en.wikipedia.org/wiki/Go_(programming_language))",
			[]string{`href="https://en.wikipedia.org/wiki/Go_(programming_language)"`, `rel="nofollow noopener"`, `target="_blank"`}, nil},
		{"single newline is a line break", "a\nb", []string{"a<br>"}, nil},
		{"script and handlers are dropped", `<script>alert(1)</script><img src=x onerror="alert(1)"><b onclick="x()">b</b>`,
			[]string{"<b>b</b>"}, []string{"<script", "onerror", "onclick", "alert(1)</script>"}},
		{"script URLs are dropped", `[x](javascript:alert(1)) <a href="javascript:alert(2)">y</a>`, nil, []string{`href="javascript`}},
		{"styles are dropped", `<p style="position:fixed">x</p>`, []string{"x"}, []string{"style"}},
		{"unclosed fence of a preview", "text\n```py\nprint(1)", []string{"<pre><code class=\"language-py\">print(1)"}, nil},
		{"dangling markers stay text", "a **b [c](https://x", []string{"a **b [c](https://x"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := HTML(c.md)
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Errorf("the page lacks %q:\n%s", w, got)
				}
			}
			for _, n := range c.never {
				if strings.Contains(got, n) {
					t.Errorf("the page carries %q:\n%s", n, got)
				}
			}
		})
	}
}

// TestMarkersPastTheBudgetShowAsCharacters: the first maxDelimiters markers of a paragraph match
// as usual; later ones are plain characters, which keeps hostile input linear.
func TestMarkersPastTheBudgetShowAsCharacters(t *testing.T) {
	early := strings.Repeat("*a* ", maxDelimiters/2)
	text, ents := Telegram(early + "*late*")
	if len(ents) != maxDelimiters/2 {
		t.Errorf("%d entities, want %d (one per early pair)", len(ents), maxDelimiters/2)
	}
	if !strings.HasSuffix(text, "*late*") {
		t.Errorf("the markers past the budget should stay as written, got …%q", text[len(text)-10:])
	}
}
