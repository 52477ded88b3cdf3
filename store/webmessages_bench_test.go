package store

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"relaybot/chat"
)

// BenchmarkKeepWebMessage is what the web chat's keeper costs a message: one upsert of one
// message whole (a 2 KB answer with folded reasoning and a tool line), as it writes one at a
// time when a reply is final.
func BenchmarkKeepWebMessage(b *testing.B) {
	ctx := context.Background()
	s := newStore(b, "sqlite")
	text := "<details>\n<summary>💭 Thought</summary>\n\n" + strings.Repeat("reasoning ", 100) +
		"\n\n</details>\n\n" + strings.Repeat("answer ", 150)
	pos := time.Now().UnixMicro()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		// Every message appears and is final once: half the writes insert, half replace.
		id := fmt.Sprintf("m%d", i/2)
		if err := s.WebChat.KeepWebMessages(ctx, "chat", []chat.Line{{ID: id, Pos: pos + int64(i/2), Text: text}}); err != nil {
			b.Fatal(err)
		}
	}
}
