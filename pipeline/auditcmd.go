package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"relaybot/adapters"
	"relaybot/adapters/markdown"
	"relaybot/audit"
	"relaybot/internal/ellipsis"
)

// Bounds of /audit's n.
const (
	auditDefaultN = 10
	auditMaxN     = 20
)

// parseAuditArgs reads "/audit [tool] [status] [n]" in any order: a number is n, a known status
// is the status, anything else the tool.
func parseAuditArgs(args string) (audit.Filter, error) {
	f := audit.Filter{Limit: auditDefaultN}
	for _, w := range strings.Fields(args) {
		if n, err := strconv.Atoi(w); err == nil {
			if n < 1 || n > auditMaxN {
				return f, fmt.Errorf("n must be between 1 and %d, got %d", auditMaxN, n)
			}
			f.Limit = n
			continue
		}
		if st := audit.Status(strings.ToLower(w)); st.Valid() && len(f.Statuses) == 0 {
			f.Statuses = []audit.Status{st}
			continue
		}
		if f.Tool != "" {
			return f, fmt.Errorf("more than one tool name: %q and %q", f.Tool, w)
		}
		f.Tool = w
	}
	return f, nil
}

// audit answers /audit: admins get the latest matching tool calls; anyone else is refused,
// and the refusal goes into the audit log. Only a private chat with an admin lists every chat's
// calls; anywhere else the list is that chat's own, so a group never sees the tool names and
// arguments of another chat.
func (c *commands) audit(r *request) {
	ctx, in, args, out, log := r.ctx, r.in, r.in.Args, r.out, r.log
	if !c.access.IsAdmin(in) {
		log.Warn("pipeline: /audit refused: not an admin")
		c.recordRefusal(in, args, log)
		c.say(out, "Only bot admins can use /audit.", log)
		return
	}
	if c.opts.Audit == nil {
		c.say(out, "The audit log is not available in this server.", log)
		return
	}
	f, err := parseAuditArgs(args)
	if err != nil {
		c.say(out, fmt.Sprintf("Usage: /audit [tool] [status] [n]: %v", err), log)
		return
	}
	if in.Kind != adapters.Private {
		f.Platform, f.ChatID = string(in.Chat.Platform), in.Chat.ChatID
	}
	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), saveTimeout)
	defer cancel()
	entries, _, err := c.opts.Audit.ToolCalls(qctx, f)
	if err != nil {
		c.failed(r, "/audit", err)
		return
	}
	c.say(out, formatAudit(f, entries), log)
}

// formatAudit renders tool calls as a compact list, newest first, escaped as Markdown: tool
// names and arguments are the model's words and show as written.
func formatAudit(f audit.Filter, entries []audit.Record) string {
	var b strings.Builder
	what := []string{}
	if f.Tool != "" {
		what = append(what, f.Tool)
	}
	for _, st := range f.Statuses {
		what = append(what, string(st))
	}
	if f.ChatID != "" {
		what = append(what, "this chat only")
	}
	suffix := ""
	if len(what) > 0 {
		suffix = " (" + strings.Join(what, ", ") + ")"
	}
	if len(entries) == 0 {
		return markdown.Escape("No tool calls" + suffix + ".")
	}
	fmt.Fprintf(&b, "Latest tool calls%s, newest first, UTC:", suffix)
	for _, e := range entries {
		fmt.Fprintf(&b, "\n%s %s %s %s %s", e.StartedAt.UTC().Format("01-02 15:04:05"), e.ToolName, e.Status,
			tookText(e.Duration), preview(e.Arguments, 40))
	}
	return markdown.Escape(b.String())
}

// preview flattens s to one line of at most n characters.
func preview(s string, n int) string {
	return ellipsis.Cut(strings.Join(strings.Fields(s), " "), n)
}

// recordRefusal writes a refused /audit into the audit log as a denied call of the "/audit"
// command, so admins see who tried.
func (c *commands) recordRefusal(in adapters.Inbound, args string, log *slog.Logger) {
	if c.opts.Recorder == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), saveTimeout)
	defer cancel()
	argJSON, _ := json.Marshal(map[string]string{"args": args}) // a map of strings always encodes
	now := c.opts.Now().UTC()
	rec := &audit.Record{
		Platform:      string(in.Chat.Platform),
		ChatID:        in.Chat.ChatID,
		UserID:        in.UserID,
		ToolCallID:    "cmd_" + in.MessageID,
		ToolName:      "/audit",
		Status:        audit.StatusRunning,
		Arguments:     string(argJSON),
		ArgumentsSize: len(argJSON),
		StartedAt:     now,
	}
	if err := c.opts.Recorder.Start(ctx, rec); err != nil {
		log.Error("pipeline: /audit refusal not recorded", "err", err)
		return
	}
	rec.Status = audit.StatusDenied
	rec.Error = "not an admin"
	rec.FinishedAt = now
	if err := c.opts.Recorder.Finish(ctx, rec); err != nil {
		log.Error("pipeline: /audit refusal not recorded", "err", err)
	}
}
