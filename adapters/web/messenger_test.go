package web

import (
	"context"
	"strings"
	"testing"

	"relaybot/adapters"
)

// TestBotMarkdownReachesTheBrowserRenderedAndSanitised: the page used to get only the raw text
// and show asterisks and fences; now each bot message carries its Markdown as sanitised HTML,
// a half-written preview included, while the user's own message stays plain text.
func TestBotMarkdownReachesTheBrowserRenderedAndSanitised(t *testing.T) {
	final := "**Sunny** in `Paris`\n\n```\nuv 3\n```\n<script>alert(1)</script><img src=x onerror=\"alert(1)\"> [x](javascript:alert(1))"
	h := &scriptedHandler{steps: []string{"**Sun", final}, seen: make(chan string), got: make(chan adapters.Inbound, 1)}
	_, srv := newChat(t, h)
	b := newBrowser(t, srv)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := b.events(ctx)

	b.send("**not markup from me**")
	<-h.got
	if user := nextMsg(t, events, nil); user.Role != "user" || user.HTML != "" {
		t.Fatalf("the user's message = %+v, want plain text without HTML", user)
	}
	preview := nextMsg(t, events, nil)
	if preview.HTML != "<p>**Sun</p>" {
		t.Errorf("the preview of an unfinished bold shows %q, want the text as it is", preview.HTML)
	}
	h.seen <- preview.Text
	m := nextMsg(t, events, nil)
	for _, want := range []string{"<strong>Sunny</strong>", "<code>Paris</code>", "<pre><code>uv 3\n</code></pre>"} {
		if !strings.Contains(m.HTML, want) {
			t.Errorf("the final answer's HTML lacks %q:\n%s", want, m.HTML)
		}
	}
	for _, bad := range []string{"<script", "onerror", `href="javascript`} {
		if strings.Contains(m.HTML, bad) {
			t.Errorf("the final answer's HTML carries %q:\n%s", bad, m.HTML)
		}
	}
	if m.Text != final {
		t.Errorf("the raw text changed: %q", m.Text)
	}
}
