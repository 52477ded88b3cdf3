package pipeline

import (
	"strings"
	"testing"

	"relaybot/adapters/markdown"
	"relaybot/chat"
)

func TestTheAnswersSourcesFoldOnTelegramAndTheWebAndAreAFooterOnDiscord(t *testing.T) {
	places := []string{"guide.pdf, page 3", "faq.md › Wifi", "old_notes.txt"}
	answer := "The password is on the fridge [2], see also [1]."
	for _, tc := range []struct {
		platform chat.Platform
		want     string
	}{
		{chat.Telegram, "<details>\n<summary>📚 Sources</summary>\n\n\\[1\\] guide\\.pdf\\, page 3\n\n\\[2\\] faq\\.md › Wifi\n\n</details>"},
		{chat.Web, "<details>\n<summary>📚 Sources</summary>\n\n\\[1\\] guide\\.pdf\\, page 3\n\n\\[2\\] faq\\.md › Wifi\n\n</details>"},
		{chat.Discord, "-# 📚 Sources\n-# \\[1\\] guide\\.pdf\\, page 3\n-# \\[2\\] faq\\.md › Wifi"},
	} {
		v := view{s: newSurface(tc.platform, "")}
		v.addSources(places)
		v.addSources(places[:1]) // the same passage found twice is listed once
		if got := v.sourcesBlock(answer); got != tc.want {
			t.Errorf("%s: sources\n%q\nwant\n%q", tc.platform, got, tc.want)
		}
	}
	// Telegram shows the fold as an expandable quote; the web as a <details> block.
	v := view{s: newSurface(chat.Telegram, "")}
	v.addSources(places)
	text, ents := markdown.Telegram(answer + "\n\n" + v.sourcesBlock(answer))
	if len(ents) == 0 || ents[len(ents)-1].Type != "expandable_blockquote" {
		t.Fatalf("on Telegram the sources are %q %+v, want an expandable quote", text, ents)
	}
	if html := markdown.HTML(answer + "\n\n" + v.sourcesBlock(answer)); !containsAll(html, "<details>", "<summary>📚 Sources</summary>", "[1] guide.pdf, page 3") {
		t.Fatalf("in the web chat the sources are %q, want a <details> block", html)
	}
	// An answer that cites no number lists every source; one with none has no block.
	if got := v.sourcesBlock("It depends."); !containsAll(got, "old\\_notes") {
		t.Fatalf("an answer citing nothing lists %q, want every source", got)
	}
	if got := (&view{s: newSurface(chat.Telegram, "")}).sourcesBlock("hi [1]"); got != "" {
		t.Fatalf("a turn without sources shows %q", got)
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
