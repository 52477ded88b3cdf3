package main

import (
	"context"
	"errors"
	"io"

	"relaybot/config"
)

// runAudit is not built yet: it says so and fails rather than pretending.
func runAudit(ctx context.Context, cfg *config.Config, args []string, stdout io.Writer) error {
	return errors.New("audit is not built yet in this version")
}
