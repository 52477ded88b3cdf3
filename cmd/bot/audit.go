package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"relaybot/audit"
	"relaybot/chat"
	"relaybot/config"
	"relaybot/internal/ellipsis"
	"relaybot/store"
)

// statusList is the statuses --status accepts (the DESIGN audit contract), for help and errors.
func statusList() string {
	out := make([]string, len(audit.Statuses))
	for i, s := range audit.Statuses {
		out[i] = string(s)
	}
	return strings.Join(out, ", ")
}

// argPreviewRunes is how much of the arguments the table shows.
const argPreviewRunes = 48

// runAudit prints the tool-call audit log: an aligned table by default, one JSON object per line
// with --json.
func runAudit(ctx context.Context, cfg *config.Config, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("audit", flag.ContinueOnError)
	fs.SetOutput(stdout)
	var (
		asJSON  = fs.Bool("json", false, "print one JSON object per line")
		since   = fs.String("since", "", "only calls started within this long (24h, 90m, 7d) or since this RFC 3339 time")
		until   = fs.String("until", "", "only calls started before this long ago (1h, 2d) or before this RFC 3339 time")
		f       audit.Filter
		limit   = fs.Int("limit", audit.DefaultLimit, "show at most N calls")
		turn    = fs.Int64("turn", 0, "only calls of this turn id")
		cursor  = fs.String("cursor", "", "continue after the last page (printed at the end of a full page)")
		statusF = fs.String("status", "", "only calls with this status: "+statusList())
		sourceF = fs.String("source", "", "only calls of tools from this source: native, plugin, mcp, skill")
	)
	fs.StringVar(&f.Tool, "tool", "", "only calls of this tool")
	chatF := fs.String("chat", "", "only calls in this chat, as the admin pages and this table print it (telegram:-100123, web:ID, telegram:-100123#7 for a topic), or a bare chat id")
	platformF := fs.String("platform", "", "only calls on this platform (telegram, discord, web)")
	fs.StringVar(&f.UserID, "user", "", "only calls by this user id")
	fs.StringVar(&f.Server, "server", "", "only calls to this MCP server")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: bot audit [-config PATH] [--json] [--since 24h] [--tool NAME] [--status STATUS] [--chat PLATFORM:ID] [--limit N] ...\n\nPrints tool calls, newest first.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	now := time.Now()
	var err error
	if f.Since, err = audit.ParseSince(*since, now); err != nil {
		return fmt.Errorf("%w: --since: %v", errUsage, err)
	}
	if f.Until, err = audit.ParseSince(*until, now); err != nil {
		return fmt.Errorf("%w: --until: %v", errUsage, err)
	}
	if st := audit.Status(*statusF); st != "" {
		if !st.Valid() {
			return fmt.Errorf("%w: --status %q: want one of %s", errUsage, *statusF, statusList())
		}
		f.Statuses = []audit.Status{st}
	}
	if *limit <= 0 {
		return fmt.Errorf("%w: --limit %d: want a positive number", errUsage, *limit)
	}
	f.Source, f.TurnID, f.Cursor = audit.Source(*sourceF), *turn, *cursor
	ref, err := chat.FilterRef(*platformF, *chatF)
	if err != nil {
		return fmt.Errorf("%w: --chat: %v", errUsage, err)
	}
	f.Platform, f.ChatID, f.ThreadID = string(ref.Platform), ref.ChatID, ref.ThreadID

	if cfg.Storage.Driver == store.DriverSQLite || cfg.Storage.Driver == "" {
		// Reading must not create an empty database where the bot's one was expected.
		path, _, _ := strings.Cut(strings.TrimPrefix(cfg.Storage.DSN, "file:"), "?")
		if _, err := os.Stat(path); err != nil {
			return fmt.Errorf("no database at %s (run bot migrate or bot serve first): %w", path, err)
		}
	}
	s, err := openStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer s.Close()
	cur, latest, err := s.SchemaVersion(ctx)
	if err != nil {
		return err
	}
	if cur < latest {
		return fmt.Errorf("database schema is at version %d, this bot needs %d: run bot migrate", cur, latest)
	}

	rows, next, err := readAudit(ctx, s.ToolCalls, f, *limit)
	if err != nil {
		return err
	}
	if *asJSON {
		return writeAuditJSON(stdout, rows)
	}
	ids := make([]int64, 0, len(rows))
	for _, r := range rows {
		ids = append(ids, r.ConversationID)
	}
	chats, err := s.Turns.ConversationChats(ctx, ids)
	if err != nil {
		return err
	}
	return writeAuditTable(stdout, rows, chats, next)
}

// readAudit reads up to limit records matching f from log, page by page, and the cursor after
// the last one (empty when there are no more).
func readAudit(ctx context.Context, log audit.Log, f audit.Filter, limit int) ([]audit.Record, string, error) {
	var rows []audit.Record
	next := ""
	for remaining := limit; remaining > 0; {
		f.Limit = min(remaining, audit.MaxLimit)
		page, n, err := log.ToolCalls(ctx, f)
		if err != nil {
			if errors.Is(err, audit.ErrBadCursor) {
				return nil, "", fmt.Errorf("%w: --cursor: %v", errUsage, err)
			}
			return nil, "", err
		}
		rows = append(rows, page...)
		remaining -= len(page)
		next = n
		if n == "" {
			break
		}
		f.Cursor = n
	}
	return rows, next, nil
}

func writeAuditJSON(w io.Writer, rows []audit.Record) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for _, r := range rows {
		if err := enc.Encode(r); err != nil {
			return fmt.Errorf("write audit row %d: %w", r.ID, err)
		}
	}
	return nil
}

// writeAuditTable prints rows as a table; chats are their conversations' chats, so a forum
// topic's call prints with its thread as the admin pages print it (and --chat reads it back).
func writeAuditTable(w io.Writer, rows []audit.Record, chats map[int64]chat.Ref, next string) error {
	if len(rows) == 0 {
		_, err := fmt.Fprintln(w, "no tool calls match")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME (UTC)\tCHAT\tUSER\tTOOL\tSOURCE\tSTATUS\tDURATION\tARGUMENTS")
	for _, r := range rows {
		source := string(r.Source)
		if r.Server != "" {
			source += "/" + r.Server
		}
		if source == "" {
			source = "-"
		}
		dur := "-"
		if !r.FinishedAt.IsZero() {
			dur = formatDuration(r.Duration)
		}
		where := chat.Ref{Platform: chat.Platform(r.Platform), ChatID: r.ChatID}
		if ref, ok := chats[r.ConversationID]; ok && ref.Chat() == where {
			where = ref
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			r.StartedAt.UTC().Format("2006-01-02 15:04:05"), cell(where.String()),
			cell(r.UserID), cell(r.ToolName), cell(source), cell(string(r.Status)), dur, preview(r.Arguments))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write audit table: %w", err)
	}
	if next != "" {
		if _, err := fmt.Fprintf(w, "more: bot audit ... --cursor %s\n", next); err != nil {
			return fmt.Errorf("write audit table: %w", err)
		}
	}
	return nil
}

func formatDuration(d time.Duration) string {
	switch {
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	default:
		return d.Round(time.Second).String()
	}
}

// cell keeps a value on one line, out of the way of the column separator and harmless to the
// terminal: tool names, chat ids and arguments come from users and models, and a raw ESC or BEL
// would let them drive the admin's terminal (recolour, retitle, hide rows).
func cell(s string) string {
	if s == "" {
		return "-"
	}
	return escapeTerminal(s)
}

// escapeTerminal writes every control character (C0, DEL, C1), every Unicode bidi control and
// every invalid UTF-8 byte as a visible Go-style escape (\x1b, \u202e); the rest is unchanged.
func escapeTerminal(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, "\\x%02x", s[i])
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, "\\x%02x", r)
		case unicode.IsControl(r) || isBidiControl(r):
			fmt.Fprintf(&b, "\\u%04x", r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// isBidiControl reports the marks, embeddings, overrides and isolates that reorder what a
// terminal shows (the "Trojan Source" characters).
func isBidiControl(r rune) bool {
	return r == 0x061c || r == 0x200e || r == 0x200f || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069)
}

// preview is the start of the arguments, on one line.
func preview(args string) string {
	return cell(ellipsis.Cut(strings.Join(strings.Fields(args), " "), argPreviewRunes))
}
