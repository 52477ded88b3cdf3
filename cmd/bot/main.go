// Command bot runs the relaybot server and its admin tools.
//
//	bot serve   -config PATH   run the bot (adapters, agent, MCP servers, admin listener)
//	bot audit   -config PATH   read the tool-call audit log (see bot audit -h)
//	bot migrate -config PATH   apply database migrations
//	bot version                print the version
//
// -config defaults to $BOT_CONFIG, then ./config.toml.
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
	"runtime/debug"
	"strings"
	"syscall"

	"relaybot/config"
	"relaybot/media/sandbox"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

const usage = `usage: bot <command> [flags]

commands:
  serve     run the bot
  audit     read the tool-call audit log
  tasks     list the scheduled tasks (-json for one object per line)
  migrate   apply database migrations
  memory    list, forget and re-embed what the bot remembers of people (bot memory -h)
  knowledge add, list, remove and search the knowledge bases' documents (bot knowledge -h)
  healthcheck  exit 0 when the admin listener's /healthz answers (for container healthchecks)
  version   print the version

Every command but version takes -config PATH (default $BOT_CONFIG, then ./config.toml).
`

func main() {
	// Started as a reader of untrusted bytes (media/sandbox), the binary reads and exits.
	sandbox.Main()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// errUsage marks errors caused by the command line; they exit with status 2.
var errUsage = errors.New("usage")

// run executes one subcommand and returns the process exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	cmd, rest := args[0], args[1:]
	if cmd == "version" {
		fmt.Fprintln(stdout, versionString())
		return 0
	}
	if cmd == "-h" || cmd == "--help" || cmd == "help" {
		fmt.Fprint(stdout, usage)
		return 0
	}
	var sub func(context.Context, *config.Config, []string, io.Writer) error
	switch cmd {
	case "serve":
		sub = runServe
	case "audit":
		sub = runAudit
	case "tasks":
		sub = runTasks
	case "migrate":
		sub = runMigrate
	case "memory":
		sub = runMemory
	case "knowledge":
		sub = runKnowledge
	case "healthcheck":
		sub = runHealthcheck
	default:
		fmt.Fprintf(stderr, "bot: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
	configPath, rest, err := configFlag(rest)
	if err != nil {
		fmt.Fprintf(stderr, "bot %s: %v\n", cmd, err)
		return 2
	}
	cfg, err := config.Load(config.Path(configPath))
	if err != nil {
		fmt.Fprintf(stderr, "bot %s: %v\n", cmd, err)
		return 1
	}
	logger := newLogger(cfg.Log, stderr)
	for _, w := range cfg.Warnings {
		logger.Warn("config", "warning", w)
	}
	slog.SetDefault(logger)
	if err := sub(ctx, cfg, rest, stdout); err != nil {
		fmt.Fprintf(stderr, "bot %s: %v\n", cmd, err)
		if errors.Is(err, errUsage) || errors.Is(err, flag.ErrHelp) {
			return 2
		}
		return 1
	}
	return 0
}

// configFlag takes -config/--config PATH (or =PATH) out of args, wherever it stands, so that
// each subcommand's own flags stay its own.
func configFlag(args []string) (string, []string, error) {
	var path string
	rest := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-config" || a == "--config":
			if i+1 >= len(args) {
				return "", nil, fmt.Errorf("%w: %s needs a path", errUsage, a)
			}
			path = args[i+1]
			i++
		case strings.HasPrefix(a, "-config=") || strings.HasPrefix(a, "--config="):
			_, path, _ = strings.Cut(a, "=")
		default:
			rest = append(rest, a)
		}
	}
	return path, rest, nil
}

func newLogger(c config.Log, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(c.Level)) // validated by config
	opts := &slog.HandlerOptions{Level: level}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

func versionString() string {
	v := version
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				v += " (" + s.Value[:12] + ")"
			}
		}
		return fmt.Sprintf("bot %s %s", v, info.GoVersion)
	}
	return "bot " + v
}
