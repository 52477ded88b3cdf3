package pipeline

import (
	"slices"
	"sync"
	"testing"
	"testing/synctest"

	"relaybot/chat"
	"relaybot/tools"
)

// A flood of progress while the view is busy reaches it as one update carrying each call's
// latest report, in the order the calls first reported; nothing reaches it after the answer
// is delivered (stop).
func TestAProgressFloodWhileTheViewIsBusyReachesItMerged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var (
			mu      sync.Mutex
			updates [][]string
		)
		release := make(chan struct{})
		f := newProgressFeed(func(ids []string, ps []tools.Progress) {
			mu.Lock()
			var u []string
			for i, id := range ids {
				u = append(u, id+":"+ps[i].Message)
			}
			updates = append(updates, u)
			first := len(updates) == 1
			mu.Unlock()
			if first {
				<-release // the view's lock held elsewhere
			}
		})
		f.report(tools.Call{ToolCall: chat.ToolCall{ID: "a"}}, tools.Progress{Message: "a1"})
		synctest.Wait()
		for _, m := range []string{"a2", "a3", "a4"} {
			f.report(tools.Call{ToolCall: chat.ToolCall{ID: "a"}}, tools.Progress{Message: m})
		}
		f.report(tools.Call{ToolCall: chat.ToolCall{ID: "b"}}, tools.Progress{Message: "b1"})
		f.report(tools.Call{ToolCall: chat.ToolCall{ID: "a"}}, tools.Progress{Done: 5, Total: 10})
		close(release)
		synctest.Wait()
		f.stop()
		f.report(tools.Call{ToolCall: chat.ToolCall{ID: "a"}}, tools.Progress{Message: "late"})
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		want := [][]string{{"a:a1"}, {"a:a4", "b:b1"}}
		if !slices.EqualFunc(updates, want, slices.Equal) {
			t.Fatalf("the status lines were updated with %q, want %q", updates, want)
		}
	})
}
