// Command loadtest measures the bot under load. It starts the testkit's fake model
// (internal/testkit/llm) and fake Telegram Bot API (internal/testkit/telegram, enforcing
// Telegram's limits), runs the bot as a separate `bot serve` process against them with a
// generated config, drives N concurrent chats, and reports turns per second, the latency a user
// sees (to the first visible text: a draft, a send or an edit; and to the whole answer), drafts
// and edits per reply, 429s, the bot's CPU and memory, goroutines left behind, and whether every
// turn and audit row reached the database. The chats are private (previews are drafts), groups
// (-chat-type group: supergroups where the bot is mentioned, previews are a message and its
// edits) or both (-chat-type mix), and the latencies are reported per kind of chat too. The bot
// binary is dropped from the page cache before the bots start, so their idle memory is a cold
// start's. It also measures a bare go-openai streaming loop on
// the same streams (the `baseline` role, run as a child process) so the bot's CPU per token reads
// as a ratio to the least a Go client can spend.
//
// With -otel the bot exports its traces over OTLP/HTTP to a receiver in this process (the
// report counts the spans), to measure what tracing costs.
//
// With -replicas N (and -db postgres) the bot runs as N `bot serve` processes on one database,
// reached by webhook through a round-robin proxy in this process; CPU is summed over them, and
// each message is checked to be answered exactly once. A list (-replicas 1,2,3) runs each
// deployment in turn and compares it with one replica.
//
// Usage:
//
//	loadtest [-chats N] [-chat-type private|group|mix] [-turns K | -duration D] [-rate TOK/S] [-tokens N] [-tool-share F]
//	         [-tool-latency D] [-global N] [-db sqlite|postgres] [-replicas N|1,2,3]
//	         [-telegram polling|webhook] [-otel] [-bot PATH] [-profile DIR] [-json]
//	loadtest stream [-chars N] [-chunk 5ms,20ms] [-modes telegram-edits,telegram-drafts,...] [-json]
//	loadtest voice [-n 20] [-transcribe 300ms] [-in-flight 50] [-note-kb 256] [-bot PATH] [-json]
//
// The stream role measures what one long answer looks like on each streaming surface (Telegram
// edits in a private chat and a group, Telegram drafts, Telegram drafts ending in a rich message,
// Discord edits): time from the first token
// to the first visible text, the longest time the text stood still while the model produced, and
// the time from the model's last chunk to the final text, with the requests it took.
//
// The voice role measures what a voice note adds to the time from the user's send to the
// model's first token shown in the chat (against a text message; the transcription endpoint's
// latency is set), and the bot's memory per voice note in flight.
//
// Everything listens on loopback only, every loop is bounded in count and time (-timeout), and the
// tool stops by itself.
package main

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

// roleEnv selects the role of a loadtest process: empty runs the load, "baseline" is the child
// reading streams with a bare go-openai loop. An environment variable rather than a subcommand
// so that the package's test binary can play the child too.
const roleEnv = "RELAYBOT_LOADTEST_ROLE"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	args := os.Args[1:]
	var err error
	switch {
	case os.Getenv(roleEnv) == "baseline":
		err = baselineMain(ctx, args, os.Stdout)
	case len(args) > 0 && args[0] == "baseline":
		err = baselineMain(ctx, args[1:], os.Stdout)
	case len(args) > 0 && args[0] == "stream":
		err = streamMain(ctx, args[1:], os.Stdout)
	case len(args) > 0 && args[0] == "voice":
		err = voiceMain(ctx, args[1:], os.Stdout)
	default:
		err = loadMain(ctx, args, os.Stdout, os.Stderr, log)
	}
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			log.Error("loadtest failed", "err", err)
		}
		os.Exit(1)
	}
}
