package markdown

import (
	"strings"
	"testing"
)

// Untrusted text escaped with Escape comes out as written on every surface: no link, no
// emphasis, no heading, no HTML, no autolink on the web chat's HTML and in Telegram's entities,
// and the visible text is the text itself.
func TestEscapedTextShowsAsWritten(t *testing.T) {
	for _, s := range []string{
		"[invoice.pdf](https://evil.example/steal)",
		"**urgent** _now_ ~~gone~~ `code`",
		"# heading\n> quote\n- item\n1. first",
		"<img src=x onerror=alert(1)> &amp; <https://evil.example>",
		"www.evil.example and https://evil.example/x?y=1",
		"report\\final_v2.txt",
		"||spoiler|| <@123> <t:0>",
		"![img](https://evil.example/p.png)",
	} {
		esc := Escape(s)
		if h := HTML(esc); strings.Contains(h, "<a") || strings.Contains(h, "<img") || strings.Contains(h, "<em") ||
			strings.Contains(h, "<strong") || strings.Contains(h, "<h1") || strings.Contains(h, "<code") || strings.Contains(h, "<blockquote") {
			t.Errorf("HTML(Escape(%q)) = %q: the text became markup", s, h)
		}
		text, entities := Telegram(esc)
		if len(entities) != 0 {
			t.Errorf("Telegram(Escape(%q)) has entities %+v", s, entities)
		}
		if strings.Join(strings.Fields(text), " ") != strings.Join(strings.Fields(s), " ") {
			t.Errorf("Telegram(Escape(%q)) shows %q, want the text as written", s, text)
		}
	}
}

// Discord drops a backslash before any punctuation, and its masked links need "](": an escaped
// name has neither unescaped, and no backslash precedes a letter or digit (which Discord would
// show).
func TestEscapeLeavesLettersAlone(t *testing.T) {
	got := Escape("a1 [x](y) é")
	if got != `a1 \[x\]\(y\) é` {
		t.Errorf("Escape = %q", got)
	}
}
