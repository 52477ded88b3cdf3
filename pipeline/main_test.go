package pipeline

import (
	"os"
	"testing"

	"relaybot/media/sandbox"
)

// TestMain lets the test binary be the reader process that reads the files of the tests'
// messages, as the bot's binary is.
func TestMain(m *testing.M) {
	sandbox.Main()
	os.Exit(m.Run())
}
