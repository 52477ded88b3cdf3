package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"relaybot/adapters"
	"relaybot/tools"
)

// AuditFilter selects the tool calls /audit lists.
type AuditFilter struct {
	Tool   string // empty: every tool
	Status string // empty: every status
	// Platform and ChatID, when set, keep only the calls made in that chat: /audit in a group
	// shows that group's calls and nothing of other chats.
	Platform string
	ChatID   string
	Limit    int
}

// AuditEntry is one tool call as /audit lists it.
type AuditEntry struct {
	StartedAt time.Time
	Tool      string
	Status    string
	Duration  time.Duration
	Arguments string // redacted JSON
}

// AuditLog reads the latest tool calls for the /audit command (the store's audit queries).
type AuditLog interface {
	RecentToolCalls(ctx context.Context, f AuditFilter) ([]AuditEntry, error)
}

// Bounds of /audit's n.
const (
	auditDefaultN = 10
	auditMaxN     = 20
)

// auditStatuses are the statuses /audit recognises as its status argument.
var auditStatuses = map[string]bool{
	string(tools.StatusRunning): true, string(tools.StatusOK): true, string(tools.StatusError): true,
	string(tools.StatusTimeout): true, string(tools.StatusNotFound): true, string(tools.StatusBadArgs): true,
	string(tools.StatusCancelled): true, string(tools.StatusDenied): true, string(tools.StatusInterrupted): true,
}

// parseAuditArgs reads "/audit [tool] [status] [n]" in any order: a number is n, a known status
// is the status, anything else the tool.
func parseAuditArgs(args string) (AuditFilter, error) {
	f := AuditFilter{Limit: auditDefaultN}
	for _, w := range strings.Fields(args) {
		if n, err := strconv.Atoi(w); err == nil {
			if n < 1 || n > auditMaxN {
				return f, fmt.Errorf("n must be between 1 and %d, got %d", auditMaxN, n)
			}
			f.Limit = n
			continue
		}
		if auditStatuses[strings.ToLower(w)] && f.Status == "" {
			f.Status = strings.ToLower(w)
			continue
		}
		if f.Tool != "" {
			return f, fmt.Errorf("more than one tool name: %q and %q", f.Tool, w)
		}
		f.Tool = w
	}
	return f, nil
}

// auditCommand answers /audit: admins get the latest matching tool calls; anyone else is refused,
// and the refusal goes into the audit log. Only a private chat with an admin lists every chat's
// calls; anywhere else the list is that chat's own, so a group never sees the tool names and
// arguments of another chat.
func (p *Pipeline) auditCommand(ctx context.Context, in adapters.Inbound, args string, out adapters.Responder, log *slog.Logger) {
	if !p.access.isAdmin(in) {
		log.Warn("pipeline: /audit refused: not an admin")
		p.recordRefusal(in, args, log)
		p.notice(out, "Only bot admins can use /audit.", log)
		return
	}
	if p.opts.Audit == nil {
		p.notice(out, "The audit log is not available in this server.", log)
		return
	}
	f, err := parseAuditArgs(args)
	if err != nil {
		p.notice(out, fmt.Sprintf("Usage: /audit [tool] [status] [n]: %v", err), log)
		return
	}
	if in.Kind != adapters.Private {
		f.Platform, f.ChatID = string(in.Chat.Platform), in.Chat.ChatID
	}
	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), saveTimeout)
	defer cancel()
	entries, err := p.opts.Audit.RecentToolCalls(qctx, f)
	if err != nil {
		log.Error("pipeline: /audit query failed", "err", err)
		p.notice(out, "The audit log could not be read: "+err.Error(), log)
		return
	}
	p.notice(out, formatAudit(f, entries), log)
}

// formatAudit renders tool calls as a compact list, newest first.
func formatAudit(f AuditFilter, entries []AuditEntry) string {
	var b strings.Builder
	what := []string{}
	if f.Tool != "" {
		what = append(what, f.Tool)
	}
	if f.Status != "" {
		what = append(what, f.Status)
	}
	if f.ChatID != "" {
		what = append(what, "this chat only")
	}
	suffix := ""
	if len(what) > 0 {
		suffix = " (" + strings.Join(what, ", ") + ")"
	}
	if len(entries) == 0 {
		return "No tool calls" + suffix + "."
	}
	fmt.Fprintf(&b, "Latest tool calls%s, newest first, UTC:", suffix)
	for _, e := range entries {
		fmt.Fprintf(&b, "\n%s %s %s %s %s", e.StartedAt.UTC().Format("01-02 15:04:05"), e.Tool, e.Status,
			formatDuration(e.Duration), preview(e.Arguments, 40))
	}
	return b.String()
}

func formatDuration(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%d ms", d.Milliseconds())
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}

// preview flattens s to one line of at most n characters.
func preview(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// recordRefusal writes a refused /audit into the audit log as a denied call of the "/audit"
// command, so admins see who tried.
func (p *Pipeline) recordRefusal(in adapters.Inbound, args string, log *slog.Logger) {
	if p.opts.Recorder == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), saveTimeout)
	defer cancel()
	argJSON, _ := json.Marshal(map[string]string{"args": args}) // a map of strings always encodes
	now := p.opts.Now().UTC()
	rec := &tools.Record{
		Platform:      string(in.Chat.Platform),
		ChatID:        in.Chat.ChatID,
		UserID:        in.UserID,
		ToolCallID:    "cmd_" + in.MessageID,
		ToolName:      "/audit",
		Status:        tools.StatusRunning,
		Arguments:     string(argJSON),
		ArgumentsSize: len(argJSON),
		StartedAt:     now,
	}
	if err := p.opts.Recorder.Start(ctx, rec); err != nil {
		log.Error("pipeline: /audit refusal not recorded", "err", err)
		return
	}
	rec.Status = tools.StatusDenied
	rec.Error = "not an admin"
	rec.FinishedAt = now
	if err := p.opts.Recorder.Finish(ctx, rec); err != nil {
		log.Error("pipeline: /audit refusal not recorded", "err", err)
	}
}
