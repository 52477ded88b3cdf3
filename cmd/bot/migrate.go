package main

import (
	"context"
	"errors"
	"io"

	"relaybot/config"
)

// runMigrate is not built yet: it says so and fails rather than pretending.
func runMigrate(ctx context.Context, cfg *config.Config, args []string, stdout io.Writer) error {
	return errors.New("migrate is not built yet in this version")
}
