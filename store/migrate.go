package store

import (
	"context"
	"fmt"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"relaybot/migrations"
)

func (s *conn) provider() (*goose.Provider, error) {
	fsys, err := migrations.For(s.driver)
	if err != nil {
		return nil, fmt.Errorf("store: migrations: %w", err)
	}
	dialect := goose.DialectSQLite3
	var opts []goose.ProviderOption
	if s.driver == DriverPostgres {
		dialect = goose.DialectPostgres
		// Two servers starting at once must not both migrate.
		locker, err := lock.NewPostgresSessionLocker()
		if err != nil {
			return nil, fmt.Errorf("store: migrations: postgres lock: %w", err)
		}
		opts = append(opts, goose.WithSessionLocker(locker))
	}
	p, err := goose.NewProvider(dialect, s.wsql, fsys, opts...)
	if err != nil {
		return nil, fmt.Errorf("store: migrations: %w", err)
	}
	return p, nil
}

// Migrate applies every migration not yet applied, in order.
func (s *Database) Migrate(ctx context.Context) error {
	p, err := s.provider()
	if err != nil {
		return err
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("store: migrate %s: %w", s.driver, err)
	}
	return nil
}

// SchemaVersion reports the version of the last migration applied and the newest one the binary
// carries.
func (s *Database) SchemaVersion(ctx context.Context) (current, latest int64, err error) {
	p, err := s.provider()
	if err != nil {
		return 0, 0, err
	}
	current, latest, err = p.GetVersions(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("store: schema version: %w", err)
	}
	return current, latest, nil
}
