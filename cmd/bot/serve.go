package main

import (
	"context"
	"errors"
	"io"

	"relaybot/config"
)

// runServe is not built yet: it says so and fails rather than pretending.
func runServe(ctx context.Context, cfg *config.Config, args []string, stdout io.Writer) error {
	return errors.New("serve is not built yet in this version")
}
