package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"relaybot/config"
	"relaybot/internal/lifecycle"
)

// runServe runs the bot until ctx ends (SIGTERM or Ctrl-C): it migrates the database, recovers
// turns and tool calls a previous run left running, starts the MCP servers, every enabled
// adapter, the admin listener and the retention sweeper, and logs where each part listens. On
// shutdown it takes no new messages, lets running turns finish for chat.shutdown_grace_sec,
// cancels the rest (their partial answers delivered and saved), flushes the audit log and
// returns nil.
func runServe(ctx context.Context, cfg *config.Config, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stdout)
	fs.Usage = func() {
		fmt.Fprintln(stdout, "usage: bot serve [-config PATH]\n\nRuns the bot until SIGTERM or Ctrl-C; SIGHUP reloads the config file.")
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: serve takes no arguments, got %q", errUsage, fs.Args())
	}
	// A second SIGTERM or Ctrl-C during the grace period cancels the running turns at once.
	hurry := make(chan os.Signal, 1)
	signal.Notify(hurry, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(hurry)
	// SIGHUP (systemctl reload, a closed terminal) reloads the config instead of ending the bot.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	return serveSignals(ctx, cfg, slog.Default(), hurry, hup)
}

// serve builds the bot from cfg, runs it until ctx ends and shuts it down. A value on hurry
// (which may be nil) after ctx ended ends the grace period early.
func serve(ctx context.Context, cfg *config.Config, log *slog.Logger, hurry <-chan os.Signal) error {
	return serveSignals(ctx, cfg, log, hurry, nil)
}

// serveSignals is serve with a channel of SIGHUPs (nil: none), each of which reloads the config
// file (reload).
func serveSignals(ctx context.Context, cfg *config.Config, log *slog.Logger, hurry, hup <-chan os.Signal) error {
	b, err := build(ctx, cfg, log)
	if err != nil {
		if b != nil {
			b.close()
		}
		return err
	}
	b.hurry = hurry
	if hup != nil {
		b.background = append(b.background, b.reloadOnSignal(hup))
	}
	return b.run(ctx)
}

// run runs every part of the bot until ctx ends or a part fails, then shuts down in order:
// receiving stops, running turns get the grace period, the rest is cancelled and saved, and
// the audit log is flushed (lifecycle.Run).
func (b *bot) run(ctx context.Context) error {
	defer b.close()
	receivers := make([]lifecycle.Part, 0, len(b.connectors))
	for _, c := range b.connectors {
		lim := c.Limits()
		b.log.Info("receiving", "platform", c.Name(), "max_len", lim.MaxLen, "per_chat", lim.PerChat.N, "per", lim.PerChat.Per)
		receivers = append(receivers, lifecycle.Part{Name: c.Name(), Run: func(ctx context.Context) error { return c.Run(ctx, b.pipe) }})
	}
	if t := b.tasks; t != nil {
		// The scheduler takes new work like a platform: it stops first, and its runs drain.
		t.Answer(b.pipe)
		receivers = append(receivers, lifecycle.Part{Name: "tasks", Run: t.Run})
	}
	b.log.Info("bot running", "adapters", len(b.connectors), "grace", b.grace)
	return lifecycle.Run(ctx, lifecycle.Plan{
		Receivers: receivers, Background: b.background, Drain: b.pipe.Shutdown,
		Grace: b.grace, Hurry: b.hurry, Log: b.log,
	})
}

// errNothingToServe is returned when no adapter is enabled and the web chat is off.
var errNothingToServe = errors.New("nothing to serve: enable [telegram], [discord] or the web chat ([admin] enabled and web_chat)")

// shutdownGrace is the grace period of the config (0: cancel running turns at once).
func shutdownGrace(cfg *config.Config) time.Duration {
	return cfg.Chat.ShutdownGrace
}
