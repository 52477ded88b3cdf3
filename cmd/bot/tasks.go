package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"relaybot/admin"
	"relaybot/chat"
	"relaybot/config"
	"relaybot/internal/ellipsis"
	"relaybot/store"
)

// runTasks prints the scheduled tasks, newest first: an aligned table by default, one JSON
// object per line with -json (the fields of GET /api/v1/tasks).
func runTasks(ctx context.Context, cfg *config.Config, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("tasks", flag.ContinueOnError)
	fs.SetOutput(stdout)
	asJSON := fs.Bool("json", false, "print one JSON object per line")
	chatF := fs.String("chat", "", "only tasks in this chat (telegram:-100123, or a bare chat id)")
	all := fs.Bool("all", false, "also the tasks with no runs to come (done, cancelled)")
	limit := fs.Int("limit", 500, "show at most N tasks")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: bot tasks [-config PATH] [-json] [-chat PLATFORM:ID] [-all] [-limit N]\n\nPrints the scheduled tasks, newest first.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	if *limit <= 0 {
		return fmt.Errorf("%w: -limit %d: want a positive number", errUsage, *limit)
	}
	ref, err := chat.FilterRef("", *chatF)
	if err != nil {
		return fmt.Errorf("%w: -chat: %v", errUsage, err)
	}
	s, err := openForReading(ctx, cfg)
	if err != nil {
		return err
	}
	defer s.Close()
	list, err := s.Tasks.ListTasks(ctx, store.TaskFilter{Platform: string(ref.Platform), ChatID: ref.ChatID, Live: !*all, Limit: *limit})
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		for _, t := range list {
			if err := enc.Encode(admin.TaskItemOf(t)); err != nil {
				return err
			}
		}
		return nil
	}
	return writeTasksTable(stdout, list)
}

// openForReading opens the bot's database for a command that reads it: never an empty new
// SQLite file, and only at the schema this bot knows.
func openForReading(ctx context.Context, cfg *config.Config) (*store.Database, error) {
	if cfg.Storage.Driver == store.DriverSQLite || cfg.Storage.Driver == "" {
		path, _, _ := strings.Cut(strings.TrimPrefix(cfg.Storage.DSN, "file:"), "?")
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("no database at %s (run bot migrate or bot serve first): %w", path, err)
		}
	}
	s, err := openStore(ctx, cfg)
	if err != nil {
		return nil, err
	}
	cur, latest, err := s.SchemaVersion(ctx)
	if err == nil && cur < latest {
		err = fmt.Errorf("database schema is at version %d, this bot needs %d: run bot migrate", cur, latest)
	}
	if err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func writeTasksTable(w io.Writer, list []store.Task) error {
	if len(list) == 0 {
		_, err := fmt.Fprintln(w, "no scheduled tasks")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tCHAT\tUSER\tKIND\tNEXT RUN (UTC)\tSCHEDULE\tZONE\tSTATE\tRUNS\tLAST\tTEXT")
	for _, t := range list {
		next := "-"
		if t.NextRunAt != nil {
			next = t.NextRunAt.UTC().Format(time.DateTime)
		}
		ref := chat.Ref{Platform: chat.Platform(t.Platform), ChatID: t.ChatID, ThreadID: t.ThreadID}
		last := t.LastStatus
		if last == "" {
			last = "-"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", t.ID, ref, t.UserID, t.Kind, next,
			t.Schedule, t.Timezone, t.State, t.Runs, last, ellipsis.Cut(strings.Join(strings.Fields(t.Text), " "), 48))
	}
	return tw.Flush()
}
