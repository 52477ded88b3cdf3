package main

import (
	"os"
	"testing"

	"relaybot/media/sandbox"
)

// TestMain lets the test binary be the reader process that reads the files of the tests'
// messages, as main lets the bot's binary.
func TestMain(m *testing.M) {
	sandbox.Main()
	os.Exit(m.Run())
}
