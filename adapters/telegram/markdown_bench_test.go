package telegram

import (
	"strings"
	"testing"
)

// hostileLine is 64 KB of one line built to defeat an emphasis pass that rescans for a closer:
// runs of unmatched openers, unmatched "[" and stray backticks.
func hostileLine() string {
	var b strings.Builder
	for b.Len() < 64<<10 {
		b.WriteString("*_ **a [b `c ~~d ")
	}
	return b.String()
}

// BenchmarkRenderHostileLine measures one 64 KB line of unmatched markers: the renderer must be
// linear in it, not quadratic (a chat's reply would stall the delivery goroutine for seconds).
func BenchmarkRenderHostileLine(b *testing.B) {
	line := hostileLine()
	b.SetBytes(int64(len(line)))
	for b.Loop() {
		Render(line)
	}
}
