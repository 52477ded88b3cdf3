package delivery

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"unicode/utf8"

	"relaybot/adapters"
	"relaybot/internal/ellipsis"
)

// checkSplit asserts what a reader of the parts would notice: none too long, no broken
// character, balanced fences, and all of the text in order.
func checkSplit(t *testing.T, text string, parts []string, max int, unit adapters.LengthUnit) {
	t.Helper()
	for i, p := range parts {
		if n := Length(p, unit); n > max {
			t.Errorf("part %d is %d units, limit %d", i, n, max)
		}
		if !utf8.ValidString(p) {
			t.Errorf("part %d is not valid UTF-8 (cut through a character)", i)
		}
		if strings.Count(p, "```")%2 != 0 {
			t.Errorf("part %d has unbalanced fences:\n%s", i, p)
		}
	}
	// Nothing lost, nothing reordered: apart from fence lines (which Split adds at cuts) and
	// whitespace (dropped at cuts), the parts hold exactly the text.
	if got, want := content(strings.Join(parts, "\n")), content(text); got != want {
		t.Fatalf("content differs:\n got %d bytes\nwant %d bytes", len(got), len(want))
	}
}

// content drops fence lines and all whitespace.
func content(s string) string {
	var b strings.Builder
	for _, line := range strings.Split(s, "\n") {
		if _, ok := fenceLine(line); ok {
			continue
		}
		for _, r := range line {
			if r != ' ' && r != '\t' {
				b.WriteRune(r)
			}
		}
	}
	return b.String()
}

func TestSplit(t *testing.T) {
	para := strings.Repeat("Lorem ipsum dolor sit amet, 漢字かな交じり文 🙂👍🏽🇩🇪 consectetur.\n", 20)
	code := "```go\n" + strings.Repeat("fmt.Println(\"héllo 世界 👨‍👩‍👧\") // comment\n", 60) + "```\n"
	long := strings.Repeat("🙂", 5000)
	cases := []struct {
		name string
		text string
		max  int
		unit adapters.LengthUnit
	}{
		{"short", "hello", 4096, adapters.UTF16},
		{"paragraphs", strings.Repeat(para+"\n", 8), 4096, adapters.UTF16},
		{"code block across cut", para + code + para + code + para, 1000, adapters.UTF16},
		{"9000 mixed", mixed9000(), 4096, adapters.UTF16},
		{"one long emoji line", long, 4096, adapters.UTF16},
		{"runes discord", para + code + para, 2000, adapters.Runes},
		{"tiny limit", "ab🇩🇪cd👍🏽ef", 4, adapters.UTF16},
		// The cut falls inside the line "```sh": cutting there used to leave "```s" and "h",
		// after which prose was shown as code and the code as prose.
		{"fence line at the cut", "```go\nfmt.Println(1)\nx \n```\n```sh\nls\n```\nafter the blocks", 14, adapters.UTF16},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			parts := Split(c.text, c.max, c.unit)
			if len(parts) == 0 {
				t.Fatal("no parts")
			}
			if min := (Length(c.text, c.unit) + c.max - 1) / c.max; len(parts) > 2*min+2 {
				t.Errorf("%d parts for a text that fits in %d", len(parts), min)
			}
			checkSplit(t, c.text, parts, c.max, c.unit)
		})
	}
}

// mixed9000 builds a text of about 9,000 characters with code blocks, emoji and CJK placed
// around the 4,096-unit marks.
func mixed9000() string {
	var b strings.Builder
	for b.Len() < 12000 {
		b.WriteString("## Section\n\nSome prose with **bold** and `code`, emoji 👩‍💻🎉 and 中文字符测试。\n\n")
		b.WriteString("```python\n")
		for i := 0; i < 25; i++ {
			b.WriteString("print('第二行 🐍 line')\n")
		}
		b.WriteString("```\n\n")
		b.WriteString(strings.Repeat("漢", 120) + "\n")
	}
	return b.String()
}

// TestSplitLongFenceLine: an opening fence line longer than a message keeps its marker on
// every part and its text as code. (It used to be cut through the marker's line, so the first
// message was an unclosed fence and the rest of the line showed as prose.)
func TestSplitLongFenceLine(t *testing.T) {
	cases := []struct{ name, text, want string }{
		{"no language", "```" + strings.Repeat("x", 100) + "\n```", strings.Repeat("x", 100)},
		{"long info after the language", "~~~~ python " + strings.Repeat("y", 60) + "\nx = 1\n~~~~", strings.Repeat("y", 60) + "x = 1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			parts := Split(c.text, 30, adapters.UTF16)
			var code strings.Builder
			for i, p := range parts {
				lines := strings.Split(p, "\n")
				if _, ok := fenceLine(lines[0]); !ok || len(lines) < 3 || strings.Trim(lines[len(lines)-1], "`~") != "" {
					t.Fatalf("part %d is not a closed code block: %q", i, p)
				}
				code.WriteString(strings.Join(lines[1:len(lines)-1], ""))
			}
			if strings.ReplaceAll(code.String(), " ", "") != strings.ReplaceAll(c.want, " ", "") {
				t.Fatalf("the code blocks hold %q, want %q (parts %q)", code.String(), c.want, parts)
			}
		})
	}
}

func TestSplitGraphemes(t *testing.T) {
	// A flag and a skin-toned thumb must never be cut in half.
	text := strings.Repeat("🇩🇪👍🏽", 100)
	for _, max := range []int{5, 7, 9, 11} {
		for _, p := range Split(text, max, adapters.UTF16) {
			if strings.HasSuffix(p, "\U0001F1E9") || strings.HasPrefix(p, "\U0001F1EA") || strings.HasPrefix(p, "\U0001F3FD") {
				t.Fatalf("max %d: cut inside a cluster: %q", max, p)
			}
		}
	}
}

func TestPreview(t *testing.T) {
	text := strings.Repeat("word 🙂 ", 2000)
	p := Preview(text, 4096, adapters.UTF16)
	if n := Length(p, adapters.UTF16); n > 4096 {
		t.Fatalf("preview is %d units", n)
	}
	if !strings.HasSuffix(p, ellipsis.Mark) {
		t.Fatal("cut preview lacks the ellipsis")
	}
	if !strings.HasPrefix(text, strings.TrimSuffix(p, ellipsis.Mark)) {
		t.Fatal("preview is not a prefix of the text")
	}
	if got := Preview("short", 4096, adapters.UTF16); got != "short" {
		t.Fatalf("short text changed: %q", got)
	}
}

func TestLength(t *testing.T) {
	cases := []struct {
		s     string
		utf16 int
		runes int
	}{
		{"abc", 3, 3},
		{"漢字", 2, 2},
		{"🙂", 2, 1},
		{"👍🏽", 4, 2},
	}
	for _, c := range cases {
		if got := Length(c.s, adapters.UTF16); got != c.utf16 {
			t.Errorf("Length(%q, UTF16) = %d, want %d", c.s, got, c.utf16)
		}
		if got := Length(c.s, adapters.Runes); got != c.runes {
			t.Errorf("Length(%q, Runes) = %d, want %d", c.s, got, c.runes)
		}
	}
}

// TestSplitRandom splits seeded random Markdown (prose lines, emoji, CJK, long words, balanced
// code blocks) at small limits, where every kind of cut happens, and checks each result as a
// reader would.
func TestSplitRandom(t *testing.T) {
	words := []string{"word", "漢字", "🙂", "👍🏽", "é", "🇩🇪", strings.Repeat("y", 50), "x"}
	rng := rand.New(rand.NewSource(1))
	for it := 0; it < 1500; it++ {
		var b strings.Builder
		open := false
		for range rng.Intn(30) {
			switch rng.Intn(6) {
			case 0:
				if open {
					b.WriteString("```\n")
				} else {
					b.WriteString("```go\n")
				}
				open = !open
			case 1:
				b.WriteString("\n")
			default:
				if rng.Intn(4) == 0 {
					b.WriteString("  ")
				}
				for range rng.Intn(8) {
					b.WriteString(words[rng.Intn(len(words))])
					if rng.Intn(3) > 0 {
						b.WriteString(" ")
					}
				}
				b.WriteString("\n")
			}
		}
		if open {
			b.WriteString("```\n")
		}
		text := b.String()
		for _, max := range []int{20, 37, 64} {
			for _, unit := range []adapters.LengthUnit{adapters.UTF16, adapters.Runes} {
				parts := Split(text, max, unit)
				if strings.TrimSpace(text) != "" && len(parts) == 0 {
					t.Fatalf("no parts for %q", text)
				}
				checkSplit(t, text, parts, max, unit)
				if t.Failed() {
					t.Fatalf("max %d unit %d text %q\nparts %q", max, unit, text, parts)
				}
			}
		}
	}
}

// TestSplitNeverTurnsInlineBackticksIntoAFence: a cut right before "```" in the middle of a line
// used to start the next message with it, which Telegram then showed as an empty code block
// instead of the text.
func TestSplitNeverTurnsInlineBackticksIntoAFence(t *testing.T) {
	text := strings.Repeat("word ", 8) + "```inline``` and ~~~tilde~~~ stay text " + strings.Repeat("word ", 8)
	for max := 24; max < 60; max++ {
		for _, p := range Split(text, max, adapters.UTF16) {
			if _, ok := fenceLine(p); ok {
				t.Fatalf("limit %d: a part starts as a code fence: %q", max, p)
			}
		}
	}
}

// A tall answer is split at the line limit as well as the length limit, so a UI that clips tall
// messages never hides lines; reopened and closing fence lines count, and nothing is lost.
func TestSplitLinesKeepsMessagesShort(t *testing.T) {
	var prose, code strings.Builder
	for i := range 40 {
		fmt.Fprintf(&prose, "line %d\n", i)
	}
	code.WriteString("intro\n```go\n")
	for i := range 40 {
		fmt.Fprintf(&code, "x := %d\n", i)
	}
	code.WriteString("```\nend")
	for _, text := range []string{prose.String(), code.String()} {
		parts := SplitLines(text, 4000, 17, adapters.Runes)
		if len(parts) < 3 {
			t.Fatalf("%d parts for %d lines, want at least 3", len(parts), strings.Count(text, "\n")+1)
		}
		var got []string
		for i, p := range parts {
			if n := strings.Count(p, "\n") + 1; n > 17 {
				t.Errorf("part %d has %d lines:\n%s", i, n, p)
			}
			if strings.Count(p, "```")%2 != 0 {
				t.Errorf("part %d has unbalanced fences:\n%s", i, p)
			}
			for _, l := range strings.Split(p, "\n") {
				if !strings.HasPrefix(l, "```") {
					got = append(got, l)
				}
			}
		}
		var want []string
		for _, l := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
			if !strings.HasPrefix(l, "```") {
				want = append(want, l)
			}
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("the parts do not carry every line in order, once")
		}
	}
}
