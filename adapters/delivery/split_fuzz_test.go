package delivery

import (
	"strings"
	"testing"
	"unicode/utf8"

	"relaybot/adapters"
)

// fenceOpenAfter reports whether a code fence is still open at the end of s, reading fences as
// Split does.
func fenceOpenAfter(s string) bool {
	var cur fence
	for _, line := range strings.Split(s, "\n") {
		m, ok := fenceLine(line)
		if !ok {
			continue
		}
		t := strings.TrimSpace(line)
		if !cur.open {
			cur = fence{open: true, marker: m}
		} else if strings.HasPrefix(t, cur.marker) && strings.Trim(t, cur.marker[:1]) == "" {
			cur = fence{}
		}
	}
	return cur.open
}

// codeAndProse drops the lines that open or close a code fence (as Split reads them) and all
// whitespace: what remains is what a reader sees, code and prose alike. A fence-like line inside
// a block is code and stays.
func codeAndProse(s string) string {
	var b strings.Builder
	var cur fence
	for _, line := range strings.Split(s, "\n") {
		if m, ok := fenceLine(line); ok {
			t := strings.TrimSpace(line)
			if !cur.open {
				cur = fence{open: true, marker: m}
				continue
			}
			if strings.HasPrefix(t, cur.marker) && strings.Trim(t, cur.marker[:1]) == "" {
				cur = fence{}
				continue
			}
		}
		for _, r := range line {
			if r != ' ' && r != '\t' {
				b.WriteRune(r)
			}
		}
	}
	return b.String()
}

// FuzzSplit checks what a reader of the parts would notice on any text and limit: no part over
// the limit or cut through a character, all of the text in order (apart from whitespace at
// cuts and the fence lines Split adds), and every part but the last closes the code block it
// opened or reopened, so no message shows the rest of the chat as code.
func FuzzSplit(f *testing.F) {
	f.Add("hello world", 16, false)
	f.Add("para one\n\npara two is a little longer than the limit", 20, true)
	f.Add("```go\nfunc main() {\n\tprintln(\"hi\")\n}\n```\nafter the code", 24, false)
	f.Add("🙂🙂🙂 👍🏽👍🏽 🇩🇪🇩🇪 漢字漢字 é́é́", 17, true)
	f.Add("~~~~ python long info string here\nx = 1\n~~~~\n", 20, false)
	f.Fuzz(func(t *testing.T, text string, max int, utf16 bool) {
		if !utf8.ValidString(text) || strings.ContainsAny(text, "\r\v\f") {
			return
		}
		max = 24 + (max%400+400)%400
		// A run of backticks or tildes too long for a message cannot be cut without starting
		// a message with a fence; such runs are not Markdown a model writes.
		if strings.Contains(text, strings.Repeat("`", max/4)) || strings.Contains(text, strings.Repeat("~", max/4)) {
			return
		}
		// Nor a run of blanks longer than a message before "```" in mid-line: the blanks go at
		// the cut and the next message starts with the backticks.
		if strings.Contains(strings.ReplaceAll(text, "\t", " "), strings.Repeat(" ", max/4)) {
			return
		}
		// Nor can a line longer than a message that starts like a fence but is none ("```a`b"):
		// any cut leaves a fence line in front.
		for _, line := range strings.Split(text, "\n") {
			t := strings.TrimLeft(line, " ")
			if Length(line, adapters.UTF16) > max/2 && (strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~")) {
				if _, ok := fenceLine(line); !ok {
					return
				}
			}
		}
		unit := adapters.Runes
		if utf16 {
			unit = adapters.UTF16
		}
		parts := Split(text, max, unit)
		if strings.Join(strings.Fields(shortenOpeners(text, max, unit)), "") != strings.Join(strings.Fields(text), "") {
			t.Fatalf("shortening fence openers lost text: %q", text)
		}
		for i, p := range parts {
			if n := Length(p, unit); n > max {
				t.Errorf("part %d is %d units, limit %d: %q", i, n, max, p)
			}
			if !utf8.ValidString(p) {
				t.Errorf("part %d is cut through a character: %q", i, p)
			}
			if i < len(parts)-1 && fenceOpenAfter(p) {
				t.Errorf("part %d leaves a code block open: %q", i, p)
			}
		}
		if len(parts) > 0 && fenceOpenAfter(parts[len(parts)-1]) && !fenceOpenAfter(text) {
			t.Errorf("the last part leaves a code block open that the text closed: %q", parts[len(parts)-1])
		}
		// Split may break an over-long opening fence line in two (its tail becomes code):
		// everything else is the text's own.
		got, want := codeAndProse(strings.Join(parts, "\n")), codeAndProse(text)
		if trimmed := strings.TrimRight(text, " \t\n"); Length(trimmed, unit) > max {
			want = codeAndProse(shortenOpeners(trimmed, max, unit))
		}
		if got != want {
			t.Errorf("the parts do not hold the text:\n got %q\nwant %q\nparts %q", got, want, parts)
		}
	})
}
