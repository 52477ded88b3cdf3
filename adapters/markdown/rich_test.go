package markdown

import (
	"strings"
	"testing"
)

// A rich message keeps what Telegram's rich HTML documents and nothing else, closes what the
// model left open, and is measured against the limits.
func TestRichHTMLKeepsOnlyTelegramsTags(t *testing.T) {
	tests := []struct {
		name, md    string
		has, hasNot []string
	}{
		{"folds stay collapsed", "<details>\n<summary>💭 Thought</summary>\n\nI think *so*\n\n</details>\n\nAnswer.",
			[]string{"<details>", "<summary>💭 Thought</summary>", "<em>so</em>", "<p>Answer.</p>"}, []string{"open"}},
		{"an unclosed fold is closed", "<details>\n<summary>⏳ search…</summary>\n\nstill running",
			[]string{"</details>"}, nil},
		{"tables and code", "| a | b |\n|---|---|\n| 1 | 2 |\n\n```go\nx := 1 < 2\n```",
			[]string{"<table>", "<th>a</th>", "<td>2</td>", `<code class="language-go">x := 1 &lt; 2`}, []string{"<thead>", "<tbody>"}},
		{"scripts, images and unsafe links go", "<script>alert(1)</script>\n\n![pic](http://x/p.png) [bad](javascript:x) [ok](https://e.com)",
			[]string{`<a href="https://e.com">ok</a>`, "bad"}, []string{"<script", "alert", "<img", "javascript"}},
		{"a single newline stays a newline", "one\ntwo", []string{"<p>one\ntwo</p>"}, []string{"<br"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, _ := RichHTML(tt.md)
			for _, s := range tt.has {
				if !strings.Contains(h, s) {
					t.Errorf("the rich message has no %q:\n%s", s, h)
				}
			}
			for _, s := range tt.hasNot {
				if strings.Contains(h, s) {
					t.Errorf("the rich message has %q:\n%s", s, h)
				}
			}
		})
	}
}

func TestRichHTMLMeasuresAgainstTheLimits(t *testing.T) {
	if _, s := RichHTML(strings.Repeat("word ", 7000)); TelegramRichLimits.Fits(s) {
		t.Errorf("35,000 characters fit (%+v)", s)
	}
	if _, s := RichHTML(strings.Repeat("para\n\n", 501)); TelegramRichLimits.Fits(s) {
		t.Errorf("501 paragraphs fit (%+v)", s)
	}
	wide := "|" + strings.Repeat(" c |", 21) + "\n|" + strings.Repeat("---|", 21)
	if _, s := RichHTML(wide); TelegramRichLimits.Fits(s) {
		t.Errorf("a table of 21 columns fits (%+v)", s)
	}
	if _, s := RichHTML(strings.Repeat("> ", 20) + "deep"); TelegramRichLimits.Fits(s) {
		t.Errorf("20 nested quotes fit (%+v)", s)
	}
	if _, s := RichHTML("# Title\n\nSome **bold** text."); !TelegramRichLimits.Fits(s) {
		t.Errorf("a short answer does not fit (%+v)", s)
	}
}
