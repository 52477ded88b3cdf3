package markdown

import (
	"strings"
	"testing"
)

// BenchmarkTelegram renders a 100-token answer with bold, italics, inline code, emoji and
// paragraphs (the answer of the Telegram adapter's BenchmarkCall), as every draft, edit and
// send of it does.
//
//	go test ./adapters/markdown -run '^$' -bench Telegram -benchmem
func BenchmarkTelegram(b *testing.B) {
	words := []string{"The ", "**quick** ", "brown ", "fox ", "jumps ", "over ", "`lazy` ", "dogs; ", "中文 ", "🙂 ", "and\n\n", "_then_ "}
	var md strings.Builder
	for i := range 100 {
		md.WriteString(words[i%len(words)])
	}
	b.ReportAllocs()
	for b.Loop() {
		Telegram(md.String())
	}
}
