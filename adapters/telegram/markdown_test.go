package telegram

import (
	"reflect"
	"testing"
)

func TestRender(t *testing.T) {
	cases := []struct {
		name string
		md   string
		text string
		ents []Entity
	}{
		{"plain", "hello world", "hello world", nil},
		{"bold", "a **b** c", "a b c", []Entity{{Type: "bold", Offset: 2, Length: 1}}},
		{"italic star", "an *it* x", "an it x", []Entity{{Type: "italic", Offset: 3, Length: 2}}},
		{"italic underscore", "an _it_ x", "an it x", []Entity{{Type: "italic", Offset: 3, Length: 2}}},
		{"snake_case stays", "call my_func_name now", "call my_func_name now", nil},
		{"strike", "~~no~~", "no", []Entity{{Type: "strikethrough", Offset: 0, Length: 2}}},
		{"inline code keeps markers", "use `a*b*c` ok", "use a*b*c ok", []Entity{{Type: "code", Offset: 4, Length: 5}}},
		{"link", "see [docs](https://x.org/a_b) now", "see docs now", []Entity{{Type: "text_link", Offset: 4, Length: 4, URL: "https://x.org/a_b"}}},
		{"bad link keeps its target as text", "see [docs](javascript:x)", "see docs (javascript:x)", nil},
		{"heading", "# Title\ntext", "Title\ntext", []Entity{{Type: "bold", Offset: 0, Length: 5}}},
		{"bullets", "- one\n* two", "• one\n• two", nil},
		{"pre with language", "before\n```go\nx := 1\n```\nafter", "before\nx := 1\nafter", []Entity{{Type: "pre", Offset: 7, Length: 6, Language: "go"}}},
		{"unclosed fence runs to end", "a\n```py\nprint(1)", "a\nprint(1)", []Entity{{Type: "pre", Offset: 2, Length: 8, Language: "py"}}},
		{"unclosed bold stays", "this is **unfinished", "this is **unfinished", nil},
		{"utf16 offsets after emoji", "🙂 **b**", "🙂 b", []Entity{{Type: "bold", Offset: 3, Length: 1}}},
		{"nested", "**bold _it_**", "bold it", []Entity{{Type: "italic", Offset: 5, Length: 2}, {Type: "bold", Offset: 0, Length: 7}}},
		{"escape", `a \*b\* c`, "a *b* c", nil},
		{"cjk", "中文**粗体**", "中文粗体", []Entity{{Type: "bold", Offset: 2, Length: 2}}},
		{"link with parentheses", "see [Go](https://en.wikipedia.org/wiki/Go_(programming_language)) ok", "see Go ok", []Entity{{Type: "text_link", Offset: 4, Length: 2, URL: "https://en.wikipedia.org/wiki/Go_(programming_language)"}}},
		{"link then parenthesis", "([a](https://x.org/b)) c", "(a) c", []Entity{{Type: "text_link", Offset: 1, Length: 1, URL: "https://x.org/b"}}},
		{"bold nested in italic", "*a **b** c*", "a b c", []Entity{{Type: "bold", Offset: 2, Length: 1}, {Type: "italic", Offset: 0, Length: 5}}},
		{"italic then bold", "*a* **b**", "a b", []Entity{{Type: "italic", Offset: 0, Length: 1}, {Type: "bold", Offset: 2, Length: 1}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			text, ents := Render(c.md)
			if text != c.text {
				t.Errorf("text = %q, want %q", text, c.text)
			}
			if !reflect.DeepEqual(ents, c.ents) {
				t.Errorf("entities = %+v, want %+v", ents, c.ents)
			}
		})
	}
}
