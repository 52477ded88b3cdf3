//go:build !(linux && cgo)

package store

// mallocArenaCap is 0: only glibc's malloc makes an arena per thread, and only there is it capped.
const mallocArenaCap = 0

// mallocArenas is -1: the C library cannot say.
func mallocArenas() int { return -1 }
