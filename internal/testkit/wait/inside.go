package wait

import (
	"runtime"
	"strings"
)

// Inside reports whether a goroutine of this process is inside every one of frames (each a part
// of a function's name in its stack, as runtime.Stack prints it): a probe for For when code
// under test reaches a point nothing outside it shows, such as a handler holding its answer
// until something it waits for happens. Each call reads every goroutine's stack.
func Inside(frames ...string) bool {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		all := true
		for _, f := range frames {
			if !strings.Contains(g, f) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}
