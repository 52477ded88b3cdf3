package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"relaybot/config"
	"relaybot/store"
)

// runMigrate applies the database migrations the binary carries and prints the schema version.
func runMigrate(ctx context.Context, cfg *config.Config, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.SetOutput(stdout)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: bot migrate [-config PATH]\n\nApplies the database migrations not yet applied and prints the schema version.")
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	s, err := openStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer s.Close()
	before, _, err := s.SchemaVersion(ctx)
	if err != nil {
		return err
	}
	if err := s.Migrate(ctx); err != nil {
		return err
	}
	after, _, err := s.SchemaVersion(ctx)
	if err != nil {
		return err
	}
	if after == before {
		fmt.Fprintf(stdout, "%s database already at schema version %d\n", s.Driver(), after)
	} else {
		fmt.Fprintf(stdout, "%s database migrated from schema version %d to %d\n", s.Driver(), before, after)
	}
	return s.Close()
}

// openStore opens the database the config names (without migrating it).
func openStore(ctx context.Context, cfg *config.Config) (*store.Database, error) {
	return store.Open(ctx, store.Options{
		Driver: string(cfg.Storage.Driver),
		DSN:    cfg.Storage.DSN,
		Logger: slog.Default().With("component", "store"),
	})
}
