package store

import (
	"context"
	"slices"
	"testing"
	"time"

	"relaybot/audit"
)

// TestToolCallPagesGoBothWaysAndCount: a page older than another comes back with after=, the
// newest page has no Prev, and the count ignores the page, on both databases.
func TestToolCallPagesGoBothWaysAndCount(t *testing.T) {
	forEachDriver(t, func(t *testing.T, driver string) {
		ctx := context.Background()
		s := newStore(t, driver)
		base := time.Now().UTC().Add(-time.Hour).Truncate(time.Second)
		for i := range 5 {
			// Two calls share each start time, so the id breaks the tie.
			rec := audit.Record{ToolName: string(rune('a' + i)), StartedAt: base.Add(time.Duration(i/2) * time.Minute)}
			if err := s.ToolCalls.StartToolCall(ctx, &rec); err != nil {
				t.Fatal(err)
			}
		}
		names := func(p audit.Page) string {
			var b []byte
			for _, r := range p.Items {
				b = append(b, r.ToolName...)
			}
			return string(b)
		}
		var seen []string
		p, err := s.ToolCalls.ToolCallPage(ctx, audit.Filter{Limit: 2})
		for err == nil {
			seen = append(seen, names(p))
			if (p.Prev == "") != (len(seen) == 1) {
				t.Errorf("page %q has prev %q; want one on every page but the newest", names(p), p.Prev)
			}
			if p.Next == "" {
				break
			}
			p, err = s.ToolCalls.ToolCallPage(ctx, audit.Filter{Limit: 2, Cursor: p.Next})
		}
		if err != nil || !slices.Equal(seen, []string{"ed", "cb", "a"}) {
			t.Fatalf("older pages = %v, %v; want ed cb a", seen, err)
		}
		var back []string
		for p.Prev != "" && err == nil {
			p, err = s.ToolCalls.ToolCallPage(ctx, audit.Filter{Limit: 2, After: p.Prev})
			back = append(back, names(p))
		}
		if err != nil || !slices.Equal(back, []string{"cb", "ed"}) {
			t.Errorf("newer pages = %v, %v; want cb ed", back, err)
		}
		if n, err := s.ToolCalls.CountToolCalls(ctx, audit.Filter{Limit: 2, Cursor: p.Next}); err != nil || n != 5 {
			t.Errorf("CountToolCalls = %d, %v; want 5", n, err)
		}
		if _, _, err := s.ToolCalls.ToolCalls(ctx, audit.Filter{Cursor: p.Next, After: p.Next}); err == nil {
			t.Error("a page both older and newer than another was served")
		}
	})
}
