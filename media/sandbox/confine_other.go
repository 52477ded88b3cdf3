//go:build !linux

package sandbox

import (
	"os/exec"
)

// isolate has the reader killed when the context ends.
func isolate(cmd *exec.Cmd) {}

// confine leaves the memory cap to the garbage collector where the kernel offers no data
// limit; the wall-clock deadline still holds.
func confine(lim Limits) error {
	softLimit(lim)
	return nil
}
