//go:build race

package sandbox

// raceFactor widens the memory cap under the race detector, whose shadow memory grows with the
// heap it watches.
const raceFactor = 8
