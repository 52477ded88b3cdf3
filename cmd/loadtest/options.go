package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"
)

// Options configure one load run.
type Options struct {
	// Chats is the number of concurrent chats, each with its own user.
	Chats int
	// ChatType is the kind of those chats: "private" (the default: previews are drafts),
	// "group" (supergroups, where the bot is mentioned and previews are a message and its
	// edits) or "mix" (every other chat a group).
	ChatType string
	// Turns is the number of messages each chat sends, one after the other (each waits for the
	// previous answer's final text). 0 runs for Duration instead.
	Turns int
	// Duration is how long chats keep sending new messages when Turns is 0; answers in flight
	// at its end are still awaited.
	Duration time.Duration
	// Think is the pause between an answer's final text and the chat's next message, as a
	// user reads; 0 sends the next message at once.
	Think time.Duration
	// Ramp spreads the chats' first messages evenly over this time.
	Ramp time.Duration

	// Rate is the model's tokens per second per answer (0: as fast as possible).
	Rate float64
	// Tokens is the length of each text answer, in chunks of Token.
	Tokens int
	// Token is the content of each chunk.
	Token string
	// ToolShare is the share of turns (0 to 1) whose first answer calls a tool.
	ToolShare float64
	// ToolLatency, when positive, makes the tool an MCP "sleep" of this long (an MCP server over
	// streamable HTTP in this process); 0 uses the native current_time tool.
	ToolLatency time.Duration

	// GlobalPerSecond is the bot's Telegram budget of sends and edits a second, enforced by the
	// fake Telegram too; above 30 the bot is configured for paid broadcast (at most 1,000).
	// 0 means Telegram's default of 30.
	GlobalPerSecond int
	// DB is the bot's database: "sqlite" (default, in the work folder) or "postgres" (a fresh
	// schema in PostgresDSN, dropped after the run).
	DB string
	// PostgresDSN is the PostgreSQL server for DB "postgres".
	PostgresDSN string
	// Replicas is the number of `bot serve` processes sharing the database (more than one needs
	// DB "postgres"); 0 means 1.
	Replicas int
	// Telegram is how the bot receives updates: "polling" or "webhook" (the fake Telegram posts
	// every update to a round-robin proxy in this process, which hands it to the replicas in
	// turn). Empty is polling for one replica, webhook for more.
	Telegram string

	// Bot is the bot binary; empty builds ./cmd/bot from Src.
	Bot string
	// Src is the module root to build from; empty asks `go env GOMOD`.
	Src string
	// ProfileDir, when set, receives the bot's CPU profile of the load, its heap profile at the
	// end of the load and the goroutines left after it (from the admin listener's /debug/pprof/).
	ProfileDir string
	// Baseline runs the bare go-openai client on the same streams after the load.
	Baseline bool
	// OTel exports the bot's traces to a loopback OTLP/HTTP receiver in this process, to
	// measure what tracing costs.
	OTel bool
	// TurnTimeout caps the wait for one answer's final text; 0 picks one from Chats (the
	// global budget makes a queue of Chats/GlobalPerSecond seconds).
	TurnTimeout time.Duration
	// Timeout caps the whole run, build and shutdown included.
	Timeout time.Duration
	// WorkDir holds the config, the database and the logs; empty makes (and removes) a
	// temporary one.
	WorkDir string

	// Progress receives a progress line a second while the load runs; nil is quiet.
	Progress io.Writer
	// Log receives what the tool does; nil discards it.
	Log *slog.Logger
}

// defaults fills zero values and checks the rest.
func (o *Options) defaults() error {
	for _, check := range []func() error{o.loadDefaults, o.answerDefaults, o.deploymentDefaults} {
		if err := check(); err != nil {
			return err
		}
	}
	if o.TurnTimeout <= 0 {
		o.TurnTimeout = 60*time.Second + time.Duration(o.Chats)*time.Second*3/time.Duration(o.GlobalPerSecond)
	}
	if o.Timeout <= 0 {
		o.Timeout = 10*time.Minute + 2*o.Duration + 2*o.TurnTimeout
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return nil
}

// loadDefaults checks the chats and their pace.
func (o *Options) loadDefaults() error {
	if o.Chats <= 0 {
		return fmt.Errorf("chats: must be at least 1, got %d", o.Chats)
	}
	if o.Chats > 20000 {
		return fmt.Errorf("chats: at most 20000, got %d", o.Chats)
	}
	switch o.ChatType {
	case "":
		o.ChatType = surfacePrivate
	case surfacePrivate, surfaceGroup, "mix":
	default:
		return fmt.Errorf("chat-type: must be private, group or mix, got %q", o.ChatType)
	}
	if o.Think < 0 || o.Ramp < 0 {
		return fmt.Errorf("think and ramp: must not be negative")
	}
	if o.Turns < 0 {
		return fmt.Errorf("turns: must not be negative, got %d", o.Turns)
	}
	if o.Turns == 0 && o.Duration <= 0 {
		return fmt.Errorf("give -turns or a positive -duration")
	}
	if o.GlobalPerSecond == 0 {
		o.GlobalPerSecond = 30
	}
	if o.GlobalPerSecond < 1 || o.GlobalPerSecond > 1000 {
		return fmt.Errorf("global: must be between 1 and 1000, got %d", o.GlobalPerSecond)
	}
	return nil
}

// answerDefaults checks the model's answers and the tool.
func (o *Options) answerDefaults() error {
	if o.Tokens <= 0 {
		o.Tokens = 100
	}
	if o.Token == "" {
		o.Token = "tok "
	}
	if strings.TrimSpace(o.Token) == "" {
		return fmt.Errorf("token: must not be blank")
	}
	if n := o.Tokens * len(o.Token); n > 4000 {
		return fmt.Errorf("tokens: an answer of %d bytes would not fit one Telegram message (4096); use fewer tokens", n)
	}
	if o.ToolShare < 0 || o.ToolShare > 1 {
		return fmt.Errorf("tool-share: must be between 0 and 1, got %v", o.ToolShare)
	}
	if o.Rate < 0 {
		return fmt.Errorf("rate: must not be negative, got %v", o.Rate)
	}
	if o.ToolLatency < 0 {
		return fmt.Errorf("tool-latency: must not be negative, got %v", o.ToolLatency)
	}
	return nil
}

// deploymentDefaults checks the database, the replicas and how they receive updates.
func (o *Options) deploymentDefaults() error {
	switch o.DB {
	case "":
		o.DB = "sqlite"
	case "sqlite":
	case "postgres":
		if o.PostgresDSN == "" {
			return fmt.Errorf("db postgres: give -postgres-dsn or set BOT_TEST_POSTGRES_DSN")
		}
	default:
		return fmt.Errorf("db: must be sqlite or postgres, got %q", o.DB)
	}
	if o.Replicas == 0 {
		o.Replicas = 1
	}
	if o.Replicas < 1 || o.Replicas > 16 {
		return fmt.Errorf("replicas: must be between 1 and 16, got %d", o.Replicas)
	}
	if o.Replicas > 1 && o.DB != "postgres" {
		return fmt.Errorf("replicas: %d replicas need -db postgres (a second process on one SQLite file is refused)", o.Replicas)
	}
	switch o.Telegram {
	case "":
		o.Telegram = "polling"
		if o.Replicas > 1 {
			o.Telegram = "webhook"
		}
	case "polling", "webhook":
	default:
		return fmt.Errorf("telegram: must be polling or webhook, got %q", o.Telegram)
	}
	return nil
}

// surfaceOf is the surface of chat i: with ChatType "mix", every odd chat is a group.
func (o *Options) surfaceOf(i int) string {
	switch {
	case o.ChatType == surfaceGroup, o.ChatType == "mix" && i%2 == 1:
		return surfaceGroup
	}
	return surfacePrivate
}

// loadMain parses the flags, runs the load and prints the report.
func loadMain(ctx context.Context, args []string, stdout, stderr io.Writer, log *slog.Logger) error {
	fs := flag.NewFlagSet("loadtest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o Options
	fs.IntVar(&o.Chats, "chats", 100, "concurrent chats")
	fs.StringVar(&o.ChatType, "chat-type", "private", "the chats: private (previews are drafts), group (supergroups: a message and its edits) or mix (every other chat a group)")
	fs.IntVar(&o.Turns, "turns", 0, "messages per chat (0: run for -duration)")
	fs.DurationVar(&o.Duration, "duration", 30*time.Second, "how long chats send messages when -turns is 0")
	fs.DurationVar(&o.Think, "think", 3*time.Second, "pause between an answer and the chat's next message")
	fs.DurationVar(&o.Ramp, "ramp", time.Second, "spread the chats' first messages over this time")
	fs.Float64Var(&o.Rate, "rate", 50, "model tokens per second per answer (0: as fast as possible)")
	fs.IntVar(&o.Tokens, "tokens", 100, "answer length in tokens")
	fs.StringVar(&o.Token, "token", "tok ", "content of each token")
	fs.Float64Var(&o.ToolShare, "tool-share", 0.2, "share of turns that call a tool first (0..1)")
	fs.DurationVar(&o.ToolLatency, "tool-latency", 0, "tool latency: 0 uses the native current_time tool, more an MCP sleep tool of that long")
	fs.IntVar(&o.GlobalPerSecond, "global", 30, "Telegram's sends and edits a second for the whole bot, in the bot and the fake (above 30: paid broadcast, at most 1000)")
	fs.StringVar(&o.DB, "db", "sqlite", "the bot's database: sqlite or postgres")
	fs.StringVar(&o.PostgresDSN, "postgres-dsn", os.Getenv("BOT_TEST_POSTGRES_DSN"), "PostgreSQL server for -db postgres (a schema is made and dropped)")
	fs.StringVar(&o.Bot, "bot", "", "bot binary (default: build ./cmd/bot)")
	fs.StringVar(&o.Src, "src", "", "module root to build the bot from (default: go env GOMOD)")
	fs.StringVar(&o.ProfileDir, "profile", "", "write the bot's cpu.pprof, heap.pprof and goroutines.txt here")
	fs.BoolVar(&o.Baseline, "baseline", true, "also measure a bare go-openai client on the same streams")
	fs.BoolVar(&o.OTel, "otel", false, "export the bot's traces (OTLP/HTTP) to a receiver in this process")
	fs.DurationVar(&o.TurnTimeout, "turn-timeout", 0, "longest wait for one answer (default 60s + 3 s × chats / global)")
	fs.DurationVar(&o.Timeout, "timeout", 0, "cap on the whole run (default 10m + 2×duration + 2×turn-timeout)")
	fs.StringVar(&o.WorkDir, "dir", "", "keep config, database and bot log here (default: a temporary folder, removed)")
	replicas := fs.String("replicas", "1", "bot serve processes on one database (more than 1: -db postgres); a list such as 1,2,3 runs each in turn, and a run of more than one is compared with a run of one (added first when not listed)")
	fs.StringVar(&o.Telegram, "telegram", "", "how the bots receive updates: polling, or webhook through a round-robin proxy (default: polling for one replica, webhook when -replicas has more)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	quiet := fs.Bool("q", false, "no progress line")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if !*quiet {
		o.Progress = stderr
	}
	o.Log = log
	counts, err := replicaCounts(*replicas)
	if err != nil {
		return err
	}
	command := "loadtest " + strings.Join(args, " ")
	if len(counts) > 1 {
		return compareMain(ctx, o, counts, command, *asJSON, stdout)
	}
	o.Replicas = counts[0]
	rep, err := Run(ctx, o)
	if rep != nil {
		rep.Command = command
		if *asJSON {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			if jerr := enc.Encode(rep); jerr != nil {
				return fmt.Errorf("writing report: %w", jerr)
			}
		} else {
			rep.WriteText(stdout)
		}
	}
	return err
}
