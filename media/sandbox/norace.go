//go:build !race

package sandbox

// raceFactor widens the memory cap under the race detector; without it, the cap is the cap.
const raceFactor = 1
