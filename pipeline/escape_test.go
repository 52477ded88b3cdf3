package pipeline

import (
	"errors"
	"strings"
	"testing"

	"relaybot/adapters/markdown"
	"relaybot/audit"
	"relaybot/internal/testkit/llm"
	"relaybot/tools"
)

// slippedMarkup reports what of the HTML a Markdown text renders to is markup the text's writer
// could have slipped in: a link, an image, emphasis.
func slippedMarkup(md string) string {
	h := markdown.HTML(md)
	for _, tag := range []string{"<a", "<img", "<strong", "<em"} {
		if strings.Contains(h, tag) {
			return h
		}
	}
	return ""
}

// A file named as a Markdown link is named as written in the line that says it was not read:
// no link in the reply, the name's characters all there.
func TestAFileNamedAsALinkIsNamedAsWritten(t *testing.T) {
	h := newHarness(t, Options{})
	const name = "[invoice](https://evil.example/pay).bin"
	h.llm.Push(llm.Text("I could not read it."))
	out := &recResponder{}
	<-h.handle(document("51", "1", name, "application/octet-stream", []byte{0, 1, 2, 3, 0xff, 0xfe}), out)
	raw := out.RawNotices()
	if len(raw) != 1 {
		t.Fatalf("notices %q, want one line", raw)
	}
	if m := slippedMarkup(raw[0]); m != "" {
		t.Errorf("the notice %q renders as %q: the file name became markup", raw[0], m)
	}
	if shown := out.Notices()[0]; !strings.Contains(shown, name) {
		t.Errorf("the chat shows %q, want the file name %q as written", shown, name)
	}
}

// A tool's status line shows the tool's name, its progress message and its error as written:
// a model-chosen name, or a server's message shaped as a link or emphasis, stays text.
func TestStatusLinesShowToolWordsAsWritten(t *testing.T) {
	v := &view{track: true}
	v.startTool("c1", "[docs](https://evil.example)")
	v.progress("c1", tools.Progress{Message: "**urgent**: sign in at [your bank](https://evil.example/login)"})
	if m := slippedMarkup(v.render()); m != "" {
		t.Errorf("the running line renders as %q", m)
	}
	v.finishTool("c1", "[docs](https://evil.example)", tools.Failed(audit.StatusError, errors.New("see ![x](https://evil.example/p.png)")))
	if m := slippedMarkup(v.render()); m != "" {
		t.Errorf("the failed line renders as %q", m)
	}
	if text, _ := markdown.Telegram(v.render()); !strings.Contains(text, "[docs](https://evil.example)") || !strings.Contains(text, "![x](https://evil.example/p.png)") {
		t.Errorf("the chat shows %q, want the name and the error as written", text)
	}
}
