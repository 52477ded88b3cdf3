package main

import (
	"os"
	"testing"

	"relaybot/media/sandbox"
)

// Most of this package's tests wait far more than they compute: for a lease to lapse, a fault's
// ten seconds, a 429's retry-after, Telegram's pace of a message a second per chat and 30 a
// second in all, child replicas to start. The whole package is about 2 CPU-minutes under -race
// against 10 minutes of wall time. Those tests call t.Parallel, each with its own fake world,
// database and child processes, and run beside each other after the rest; .ci/run lets four
// run at once. On PostgreSQL a parallel test has a database of its own
// (storetest.PostgresDatabaseDSN), not a schema: the replicas' leases are advisory locks, which
// are the database's. A test stays out of that group when it asserts a
// wall-clock bound (TestThreeReplicasServeOneBot), touches the process (signals, environment,
// slog's default, OpenTelemetry's globals) or looks at every goroutine (wait.Inside).

// TestMain lets the test binary be the reader process that reads the files of the tests'
// messages, as main lets the bot's binary.
func TestMain(m *testing.M) {
	sandbox.Main()
	os.Exit(m.Run())
}
