package markdown

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestTelegramRendersWhatTheLineScannerCouldNot(t *testing.T) {
	cases := []struct {
		name string
		md   string
		text string
		ents []Entity
	}{
		{"table becomes an aligned pre block",
			"| Name | Qty |\n|:--|--:|\n| apple | 3 |\n| kiwi **x** | 12 |",
			"Name   | Qty\n-------+----\napple  |   3\nkiwi x |  12",
			[]Entity{{Type: "pre", Offset: 0, Length: 51}}},
		{"blockquote with emphasis inside",
			"> quoted **bold**\n> second\n\nafter",
			"quoted bold\nsecond\n\nafter",
			[]Entity{{Type: "bold", Offset: 7, Length: 4}, {Type: "blockquote", Offset: 0, Length: 18}}},
		{"long quote is expandable",
			"> " + strings.Repeat("line\n> ", 11) + "end",
			strings.Repeat("line\n", 11) + "end",
			[]Entity{{Type: "expandable_blockquote", Offset: 0, Length: 58}}},
		{"nested lists indent under their item",
			"- a\n  - b\n    1. c\n    2. d\n- e",
			"• a\n  ◦ b\n    1. c\n    2. d\n• e", nil},
		{"task list",
			"- [x] done\n- [ ] todo",
			"• ☑ done\n• ☐ todo", nil},
		{"link with parentheses in the URL",
			"[Go](https://en.wikipedia.org/wiki/Go_(programming_language)) rocks",
			"Go rocks",
			[]Entity{{Type: "text_link", Offset: 0, Length: 2, URL: "https://en.wikipedia.org/wiki/Go_(programming_language)"}}},
		{"unclosed bold and unclosed fence in a preview",
			"start **bold\n```go\nx := 1",
			"start **bold\nx := 1",
			[]Entity{{Type: "pre", Offset: 13, Length: 6, Language: "go"}}},
		{"half a link stays text", "see [docs](https://x.org/a", "see [docs](https://x.org/a", nil},
		{"dangling markers stay", "a ** b __ c ~~", "a ** b __ c ~~", nil},
		{"escapes and character references", `a \*b\* &amp; c`, "a *b* & c", nil},
		{"strikethrough and underscore bold",
			"~~gone~~ and __b__", "gone and b",
			[]Entity{{Type: "strikethrough", Offset: 0, Length: 4}, {Type: "bold", Offset: 9, Length: 1}}},
		{"bold italic nest",
			"***both***", "both",
			[]Entity{{Type: "bold", Offset: 0, Length: 4}, {Type: "italic", Offset: 0, Length: 4}}},
		{"offsets count UTF-16 after astral characters",
			"😀😀 `x` **y**", "😀😀 x y",
			[]Entity{{Type: "code", Offset: 5, Length: 1}, {Type: "bold", Offset: 7, Length: 1}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			text, ents := Telegram(c.md)
			if text != c.text {
				t.Errorf("Telegram shows %q, want %q", text, c.text)
			}
			if !reflect.DeepEqual(ents, c.ents) {
				t.Errorf("entities = %+v, want %+v", ents, c.ents)
			}
		})
	}
}

// A fold (<details> with a summary) is one expandable blockquote in Telegram: the summary and
// the first lines show, the rest on a tap; no HTML tag reaches the user. A fold cut off by a
// message split (no </details>, or a lone </details>) still reads well.
func TestFoldsBecomeExpandableBlockquotes(t *testing.T) {
	tests := []struct {
		name, md, text string
		ents           []Entity
	}{
		{"reasoning then answer", "<details>\n<summary>Thinking</summary>\n\nThe user wants **two** things.\n\n</details>\n\nHere they are.",
			"Thinking\nThe user wants two things.\n\nHere they are.",
			[]Entity{{Type: "bold", Offset: 24, Length: 3}, {Type: "expandable_blockquote", Offset: 0, Length: 35}}},
		{"unclosed at the end of a part", "Answer.\n\n<details>\n<summary>✓ 2 tools · 1.2 s</summary>\n\n✓ a 1.0 s\n✓ b 0.2 s",
			"Answer.\n\n✓ 2 tools · 1.2 s\n✓ a 1.0 s\n✓ b 0.2 s",
			[]Entity{{Type: "expandable_blockquote", Offset: 9, Length: 37}}},
		{"lone closer at the start of a part", "still thinking\n\n</details>\n\nThe answer.", "still thinking\n\nThe answer.", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text, ents := Telegram(tt.md)
			if text != tt.text {
				t.Fatalf("text = %q, want %q", text, tt.text)
			}
			if !slices.Equal(ents, tt.ents) {
				t.Errorf("entities = %+v, want %+v", ents, tt.ents)
			}
		})
	}
}
