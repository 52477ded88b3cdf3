package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"relaybot/audit"
	"relaybot/chat"
	"relaybot/config"
)

// seedAudit writes a small audit log and returns a config pointing at it.
func seedAudit(t *testing.T) *config.Config {
	t.Helper()
	ctx := context.Background()
	cfg := config.Default()
	cfg.Storage.DSN = filepath.Join(t.TempDir(), "bot.db")
	var out bytes.Buffer
	if err := runMigrate(ctx, &cfg, nil, &out); err != nil {
		t.Fatalf("runMigrate: %v", err)
	}
	if !strings.Contains(out.String(), fmt.Sprintf("migrated from schema version 0 to %d", latestSchema(t))) {
		t.Errorf("migrate printed %q", out.String())
	}
	s, err := openStore(ctx, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	base := time.Now().UTC().Add(-time.Hour).Truncate(time.Second)
	recs := []struct {
		rec    audit.Record
		finish bool
	}{
		{audit.Record{Platform: "telegram", ChatID: "-100", UserID: "42", TurnID: 1, Round: 1,
			ToolCallID: "call_1", ToolName: "web_search", Source: "native",
			Arguments: `{"query": "weather in Paris tomorrow", "lang": "en", "max_results": 5}`,
			Status:    audit.StatusOK, Result: "sunny", Duration: 1500 * time.Millisecond,
			TraceID: "4bf92f3577b34da6a3ce929d0e0e4736"}, true},
		{audit.Record{Platform: "discord", ChatID: "777", UserID: "9", TurnID: 2, Round: 1,
			ToolCallID: "call_2", ToolName: "fetch", Source: "mcp", Server: "web",
			Arguments: "{\"url\":\n\"https://example.com\"}", Status: audit.StatusTimeout,
			Error: "tool call timed out", Duration: 300 * time.Second}, true},
		{audit.Record{Platform: "telegram", ChatID: "-100", UserID: "42", TurnID: 3, Round: 2,
			ToolCallID: "call_3", ToolName: "web_search", Source: "native", Arguments: `{}`}, false},
	}
	for i, r := range recs {
		rec := r.rec
		status := rec.Status
		rec.Status = ""
		rec.StartedAt = base.Add(time.Duration(i) * time.Minute)
		if err := s.ToolCalls.StartToolCall(ctx, &rec); err != nil {
			t.Fatal(err)
		}
		if r.finish {
			rec.Status = status
			rec.FinishedAt = rec.StartedAt.Add(rec.Duration)
			if err := s.ToolCalls.FinishToolCall(ctx, &rec); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return &cfg
}

func TestAuditTable(t *testing.T) {
	cfg := seedAudit(t)
	var out bytes.Buffer
	if err := runAudit(context.Background(), cfg, []string{"--since", "24h"}, &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("table has %d lines, want header + 3:\n%s", len(lines), out.String())
	}
	header := lines[0]
	for _, col := range []string{"TIME (UTC)", "CHAT", "USER", "TOOL", "SOURCE", "STATUS", "DURATION", "ARGUMENTS"} {
		if !strings.Contains(header, col) {
			t.Errorf("header %q lacks %s", header, col)
		}
	}
	// Newest first; every column starts at the same offset on every line.
	wantOrder := []string{"running", "timeout", "ok"}
	status := strings.Index(header, "STATUS")
	for i, l := range lines[1:] {
		if !strings.HasPrefix(l[status:], wantOrder[i]) {
			t.Errorf("line %d: status column reads %q, want %s\n%s", i+1, l[status:], wantOrder[i], out.String())
		}
	}
	for _, want := range []string{"telegram:-100", "discord:777", "mcp/web", "1.5s", "5m0s", `{"url": "https://example.com"}`, `{"query": "weather in Paris tomorrow", "lang": …`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	if !strings.Contains(lines[1], " - ") {
		t.Errorf("a running call shows no duration, got %q", lines[1])
	}
}

func TestAuditJSON(t *testing.T) {
	cfg := seedAudit(t)
	var out bytes.Buffer
	if err := runAudit(context.Background(), cfg, []string{"--json", "--tool", "web_search", "--status", "ok", "--chat", "-100"}, &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	if len(lines) != 1 {
		t.Fatalf("got %d lines, want 1:\n%s", len(lines), out.String())
	}
	var row map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &row); err != nil {
		t.Fatalf("line is not JSON: %v\n%s", err, lines[0])
	}
	for _, k := range []string{"id", "turn_id", "conversation_id", "platform", "chat_id", "user_id", "round",
		"tool_call_id", "tool_name", "source", "server", "status", "arguments", "result", "error",
		"started_at", "finished_at", "duration_ms", "trace_id"} {
		if _, ok := row[k]; !ok {
			t.Errorf("JSON row lacks %q: %s", k, lines[0])
		}
	}
	if row["tool_call_id"] != "call_1" || row["duration_ms"] != 1500.0 || row["result"] != "sunny" || row["trace_id"] != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("wrong row: %s", lines[0])
	}
	started, _ := row["started_at"].(string)
	if ts, err := time.Parse(time.RFC3339, started); err != nil || !strings.HasSuffix(started, "Z") || ts.IsZero() {
		t.Errorf("started_at %q is not RFC 3339 UTC", started)
	}

	// --limit pages: two rows, then the cursor of the rest.
	out.Reset()
	if err := runAudit(context.Background(), cfg, []string{"--limit", "2"}, &out); err != nil {
		t.Fatal(err)
	}
	last := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	more := last[len(last)-1]
	cursor, ok := strings.CutPrefix(more, "more: bot audit ... --cursor ")
	if !ok {
		t.Fatalf("a full page ends without a cursor:\n%s", out.String())
	}
	out.Reset()
	if err := runAudit(context.Background(), cfg, []string{"--json", "--cursor", cursor}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `"tool_call_id":"call_1"`) || strings.Count(out.String(), "\n") != 1 {
		t.Errorf("the next page should hold only the oldest call:\n%s", out.String())
	}
}

func TestAuditBadInput(t *testing.T) {
	cfg := seedAudit(t)
	for _, args := range [][]string{
		{"--status", "weird"}, {"--since", "yesterday"}, {"--limit", "0"}, {"--cursor", "nope"}, {"extra"},
	} {
		err := runAudit(context.Background(), cfg, args, &bytes.Buffer{})
		if !errors.Is(err, errUsage) {
			t.Errorf("runAudit %q = %v, want a usage error", args, err)
		}
	}
	missing := config.Default()
	missing.Storage.DSN = filepath.Join(t.TempDir(), "none.db")
	if err := runAudit(context.Background(), &missing, nil, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "no database") {
		t.Errorf("audit of a missing database = %v, want 'no database'", err)
	}
}

func TestMigrateTwice(t *testing.T) {
	cfg := seedAudit(t)
	var out bytes.Buffer
	if err := runMigrate(context.Background(), cfg, nil, &out); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != fmt.Sprintf("sqlite database already at schema version %d\n", latestSchema(t)) {
		t.Errorf("second migrate printed %q", got)
	}
}

// TestAuditTableEscapesTerminalControls writes calls whose model- and user-chosen fields carry
// terminal escape sequences and checks that the table shows them as text: a raw ESC or BEL would
// let a model retitle or clear the admin's terminal, a bidi override would reorder what it shows.
func TestAuditTableEscapesTerminalControls(t *testing.T) {
	cfg := seedAudit(t)
	ctx := context.Background()
	s, err := openStore(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("a", 40) + "\x1b[2J\x1b[H\x07 end"
	fields := []struct {
		name string
		rec  audit.Record
		want string // how the hostile part reads in the table
	}{
		{"tool name with OSC title and BEL", audit.Record{ToolName: "x\x1b]0;pwned\x07y"}, `x\x1b]0;pwned\x07y`},
		{"tool name with CSI clear screen", audit.Record{ToolName: "t\x1b[2J\x1b[1;1H"}, `t\x1b[2J\x1b[1;1H`},
		{"chat id with CR overwriting the line", audit.Record{ChatID: "1\rFAKE"}, `web:1\x0dFAKE`},
		{"user id with backspaces and DEL", audit.Record{UserID: "u\b\b\x7f"}, `u\x08\x08\x7f`},
		{"server with a C1 CSI", audit.Record{Source: "mcp", Server: "s\u009b31m"}, `mcp/s\u009b31m`},
		{"tool name with a bidi override", audit.Record{ToolName: "evil\u202egnp.exe"}, `evil\u202egnp.exe`},
		// The store replaces invalid UTF-8 before writing, so the table shows the replacement.
		{"tool name with invalid UTF-8", audit.Record{ToolName: "bad\xff\xfe"}, "bad\ufffd"},
		{"arguments cut after an escape", audit.Record{Arguments: long}, strings.Repeat("a", 40) + `\x1b[2J\x1b[H…`},
	}
	base := time.Now().UTC().Add(-30 * time.Minute).Truncate(time.Second)
	for i, f := range fields {
		rec := f.rec
		rec.Platform, rec.TurnID, rec.Round = "web", int64(100+i), 1
		if rec.ChatID == "" {
			rec.ChatID = "1"
		}
		if rec.ToolName == "" {
			rec.ToolName = "plain"
		}
		rec.ToolCallID = fmt.Sprintf("call_%d", i)
		rec.StartedAt = base.Add(time.Duration(i) * time.Second)
		if err := s.ToolCalls.StartToolCall(ctx, &rec); err != nil {
			t.Fatalf("%s: %v", f.name, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := runAudit(ctx, cfg, []string{"--platform", "web"}, &out); err != nil {
		t.Fatal(err)
	}
	table := out.String()
	if !utf8.ValidString(table) {
		t.Errorf("the table hands invalid UTF-8 to the terminal:\n%q", table)
	}
	for _, r := range strings.TrimSuffix(table, "\n") {
		if r != '\n' && (unicode.IsControl(r) || (r >= 0x202a && r <= 0x202e)) {
			t.Errorf("the table hands %U to the terminal raw:\n%q", r, table)
		}
	}
	for _, f := range fields {
		if !strings.Contains(table, f.want) {
			t.Errorf("%s: the table does not show %q:\n%s", f.name, f.want, table)
		}
	}
	if lines := strings.Count(table, "\n"); lines != len(fields)+1 {
		t.Errorf("table has %d lines, want a header and one line per call:\n%s", lines, table)
	}
}

// TestAuditFindsAChatAsTheAdminPagesPrintIt: bot audit --chat takes the chat as the admin pages
// and the audit table print it (web:ID, telegram:ID#topic), the bare id beside --platform keeps
// working, and a reference that is not a chat is a usage error that says why.
func TestAuditFindsAChatAsTheAdminPagesPrintIt(t *testing.T) {
	ctx := context.Background()
	cfg := config.Default()
	cfg.Storage.DSN = filepath.Join(t.TempDir(), "bot.db")
	if err := runMigrate(ctx, &cfg, nil, &bytes.Buffer{}); err != nil {
		t.Fatalf("runMigrate: %v", err)
	}
	s, err := openStore(ctx, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	base := time.Now().UTC().Add(-time.Hour).Truncate(time.Second)
	for i, k := range []chat.Key{
		{Platform: chat.Web, ChatID: "5f2a9c"}, {Platform: chat.Web, ChatID: "77b0e1"},
		{Platform: chat.Telegram, ChatID: "-100123", ThreadID: "7"}, {Platform: chat.Telegram, ChatID: "-100123", ThreadID: "8"},
	} {
		conv, err := s.Conversations.Conversation(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		rec := audit.Record{ConversationID: conv.ID, Platform: string(k.Platform), ChatID: k.ChatID, UserID: "u",
			ToolCallID: fmt.Sprintf("call_%d", i), ToolName: fmt.Sprintf("tool_of_%s", strings.ReplaceAll(k.Ref().String(), ":", "_")),
			Source: audit.SourceNative, Arguments: "{}", StartedAt: base.Add(time.Duration(i) * time.Minute)}
		if err := s.ToolCalls.StartToolCall(ctx, &rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want []string // tool names, newest first
	}{
		{[]string{"--chat", "web:5f2a9c"}, []string{"tool_of_web_5f2a9c"}},
		{[]string{"--chat", " Web:77b0e1 "}, []string{"tool_of_web_77b0e1"}},
		{[]string{"--chat", "telegram:-100123#7"}, []string{"tool_of_telegram_-100123#7"}},
		{[]string{"--chat", "telegram:-100123"}, []string{"tool_of_telegram_-100123#8", "tool_of_telegram_-100123#7"}},
		{[]string{"--chat", "-100123", "--platform", "telegram"}, []string{"tool_of_telegram_-100123#8", "tool_of_telegram_-100123#7"}},
		{[]string{"--chat", "5f2a9c"}, []string{"tool_of_web_5f2a9c"}},
	} {
		var out bytes.Buffer
		if err := runAudit(ctx, &cfg, append([]string{"--json"}, tc.args...), &out); err != nil {
			t.Errorf("bot audit %q: %v", tc.args, err)
			continue
		}
		var got []string
		for line := range strings.Lines(out.String()) {
			var r audit.Record
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatalf("bot audit %q printed %q: %v", tc.args, line, err)
			}
			got = append(got, r.ToolName)
		}
		if strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("bot audit %q found %q, want %q", tc.args, got, tc.want)
		}
	}
	// The table prints a topic's calls with their thread, as the admin pages do, so what it
	// prints reads back with --chat.
	var table bytes.Buffer
	if err := runAudit(ctx, &cfg, []string{"--chat", "telegram:-100123"}, &table); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"telegram:-100123#7 ", "telegram:-100123#8 "} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("the audit table does not print the topic %q:\n%s", want, table.String())
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--chat", "slack:C1"}, `"slack" names no platform`},
		{[]string{"--chat", "web:5f2a9c", "--platform", "discord"}, "is on web, but the platform filter says"},
		{[]string{"--chat", "telegram:-100123#"}, "empty thread id"},
	} {
		err := runAudit(ctx, &cfg, tc.args, &bytes.Buffer{})
		if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("bot audit %q = %v, want a usage error saying %q", tc.args, err, tc.want)
		}
	}
}
