package markdown

import (
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

// telegramEntityTypes are the entity types the renderer may emit.
var telegramEntityTypes = map[string]bool{
	"bold": true, "italic": true, "strikethrough": true, "code": true, "pre": true,
	"text_link": true, "blockquote": true, "expandable_blockquote": true,
}

// FuzzTelegram checks what Telegram would refuse or a reader would notice, on any input: no
// panic, valid UTF-8 out of valid UTF-8 in, entities inside the text (in UTF-16 units, never
// splitting a surrogate pair), properly nested, nothing inside code or pre, no quote inside a
// quote, links only to URLs Telegram takes, and no surrounding whitespace Telegram would trim.
func FuzzTelegram(f *testing.F) {
	for _, s := range []string{
		"**bold** _it_ ~~s~~ `code` [l](https://x.org/a_(b)) > q",
		"| a | b |\n|---|:-:|\n| 1 | **2** |",
		"> quote\n>> nested\n\n- a\n  - b\n    1. c",
		"```go\nx := 1\n", "start **bold [half](https://x", "😀 **🙂** `👍🏽`",
		"*_ **a [b `c ~~d ", "<b>raw</b> &amp; \\*esc\\*", "![img](https://x.org/i.png) <https://auto.link>",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, md string) {
		if !utf8.ValidString(md) {
			return
		}
		text, ents := Telegram(md)
		if !utf8.ValidString(text) {
			t.Fatalf("text is not valid UTF-8: %q", text)
		}
		if text != strings.TrimRight(text, " \t\n") {
			t.Errorf("text ends in whitespace Telegram trims: %q", text)
		}
		// boundary[u] is true where a character starts at UTF-16 unit u.
		boundary := map[int]bool{}
		u := 0
		for _, r := range text {
			boundary[u] = true
			u += utf16Len(string(r))
		}
		boundary[u] = true
		for i, e := range ents {
			if !telegramEntityTypes[e.Type] {
				t.Errorf("entity %d has type %q", i, e.Type)
			}
			if e.Offset < 0 || e.Length <= 0 || e.Offset+e.Length > u {
				t.Fatalf("entity %+v is outside the text of %d units: %q", e, u, text)
			}
			if !boundary[e.Offset] || !boundary[e.Offset+e.Length] {
				t.Errorf("entity %+v splits a character in %q", e, text)
			}
			if e.Type == "text_link" && !clickable(e.URL) {
				t.Errorf("text_link to %q", e.URL)
			}
			for j, o := range ents {
				if j == i {
					continue
				}
				inside := o.Offset >= e.Offset && o.Offset+o.Length <= e.Offset+e.Length
				disjoint := o.Offset >= e.Offset+e.Length || e.Offset >= o.Offset+o.Length
				if !inside && !disjoint && !(e.Offset >= o.Offset && e.Offset+e.Length <= o.Offset+o.Length) {
					t.Errorf("entities %+v and %+v overlap without nesting", e, o)
				}
				if inside && !(o.Offset == e.Offset && o.Length == e.Length) {
					if e.Type == "code" || e.Type == "pre" {
						t.Errorf("%+v inside %s", o, e.Type)
					}
					if strings.HasSuffix(e.Type, "blockquote") && strings.HasSuffix(o.Type, "blockquote") {
						t.Errorf("quote %+v inside quote %+v", o, e)
					}
				}
			}
		}
	})
}

// htmlTag finds the tags of the output; text between them is escaped and cannot run.
var htmlTag = regexp.MustCompile(`<[^>]*>?`)

// unsafeTag matches a tag that must never reach the web chat's page.
var unsafeTag = regexp.MustCompile(`(?i)^<\s*/?\s*(script|iframe|object|embed|style|form|input|svg|math|link|meta|base)\b|\son[a-z]+\s*=|javascript:|vbscript:|data:|style\s*=`)

// FuzzHTML checks that no input makes the web chat's HTML carry a script, an event handler, a
// style or a script URL.
func FuzzHTML(f *testing.F) {
	for _, s := range []string{
		"<script>alert(1)</script>", `<img src=x onerror="alert(1)">`, "[x](javascript:alert(1))",
		"<a href=\"jav&#x09;ascript:alert(1)\">x</a>", "```html\n<script>x</script>\n```",
		"<svg onload=alert(1)>", "<p style=\"color:red\">x</p>", "**b** `c` | t |\n|--|\n| 1 |",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, md string) {
		if !utf8.ValidString(md) {
			return
		}
		out := HTML(md)
		for _, tag := range htmlTag.FindAllString(out, -1) {
			if unsafeTag.MatchString(tag) {
				t.Errorf("HTML of %q carries the tag %q:\n%s", md, tag, out)
			}
		}
	})
}
