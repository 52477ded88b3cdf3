package markdown

import (
	"strings"
	"testing"
)

// TestOnlyWebAndMailLinksAreClickableOnAnySurface: a label the model (or a user's text echoed
// in a notice) chose never hides a tg://, javascript: or relative destination; the destination
// is shown as text instead.
func TestOnlyWebAndMailLinksAreClickableOnAnySurface(t *testing.T) {
	cases := []struct {
		name      string
		md        string
		clickable string // the one destination that may be a link; "" for none
	}{
		{"telegram proxy", "[Verify](tg://proxy?server=evil.example&port=443&secret=ee)", ""},
		{"telegram resolve", "Join [the group](tg://resolve?domain=scam)", ""},
		{"user mention", "[admin](tg://user?id=1)", ""},
		{"autolink of an app scheme", "<tg://proxy?server=evil.example>", ""},
		{"reference definition", "[Verify][v]\n\n[v]: tg://proxy?server=evil.example", ""},
		{"script", "[x](javascript:alert(1))", ""},
		{"relative path", "[log in](/admin/login)", ""},
		{"https stays a link", "[docs](https://example.com/docs)", "https://example.com/docs"},
		{"mail stays a link", "[write](mailto:ops@example.com)", "mailto:ops@example.com"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			text, ents := Telegram(c.md)
			var links []string
			for _, e := range ents {
				if e.Type == "text_link" {
					links = append(links, e.URL)
				}
			}
			if c.clickable == "" && len(links) > 0 {
				t.Errorf("Telegram shows a clickable %v for %q", links, c.md)
			}
			if c.clickable != "" && (len(links) != 1 || links[0] != c.clickable) {
				t.Errorf("Telegram links = %v, want [%s]", links, c.clickable)
			}
			if c.clickable == "" && strings.Contains(c.md, "tg://") && !strings.Contains(text, "tg://") {
				t.Errorf("Telegram text %q lost the destination the model wrote", text)
			}

			html := HTML(c.md)
			hrefs := strings.Count(html, "href=")
			if c.clickable == "" && hrefs > 0 {
				t.Errorf("the web chat shows a link: %s", html)
			}
			if c.clickable != "" && !strings.Contains(html, `href="`+c.clickable+`"`) {
				t.Errorf("the web chat lost the link to %s: %s", c.clickable, html)
			}

			d := Discord(c.md)
			if c.clickable == "" && d == c.md {
				t.Errorf("Discord gets %q unchanged: its link is clickable there", c.md)
			}
			if c.clickable != "" && d != c.md {
				t.Errorf("Discord gets %q, want the clickable link unchanged", d)
			}
			if got, want := len([]rune(d)), len([]rune(c.md)); got != want {
				t.Errorf("Discord text is %d runes, want %d (the split must still fit)", got, want)
			}
		})
	}
}

func TestDiscordLeavesCodeAlone(t *testing.T) {
	for _, md := range []string{"`[x](tg://a)`", "```\n[x](tg://a) <tg://b>\n```", "a < b and c > d", "see [1]: a note"} {
		if got := Discord(md); got != md {
			t.Errorf("Discord(%q) = %q, want it unchanged", md, got)
		}
	}
}
