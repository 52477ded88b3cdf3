// Package auditquery is the audit_query plugin: an admin-only tool that lets bot admins ask the bot
// about its own tool-call audit log in chat (recent calls, recent failures, slowest calls, slowest
// tools). Import it for its side effect and enable "audit_query" in the plugin list.
package auditquery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"relaybot/audit"
	"relaybot/chat"
	"relaybot/tools"
	"relaybot/tools/plugin"
)

// Name is the plugin's and the tool's name.
const Name = "audit_query"

// Limits of one answer.
const (
	defaultLimit = 10
	maxLimit     = 50
	defaultSince = 24 * time.Hour
	maxSince     = 366 * 24 * time.Hour
	errorChars   = 200
	argsChars    = 160
)

func init() {
	plugin.Register(Name, New)
}

// The views the tool offers.
const (
	viewRecent       = "recent"
	viewFailures     = "failures"
	viewSlowestCalls = "slowest_calls"
	viewSlowestTools = "slowest_tools"
)

var views = []string{viewRecent, viewFailures, viewSlowestCalls, viewSlowestTools}

// failureStatuses are the statuses the failures view shows.
var failureStatuses = func() []audit.Status {
	var out []audit.Status
	for _, s := range audit.Statuses {
		if s.Failed() {
			out = append(out, s)
		}
	}
	return out
}()

const schema = `{
  "type": "object",
  "properties": {
    "view": {"type": "string", "enum": ["recent", "failures", "slowest_calls", "slowest_tools"],
      "description": "recent: latest calls; failures: latest failed calls; slowest_calls: longest calls; slowest_tools: per-tool call counts, failures and durations. Default recent."},
    "tool": {"type": "string", "description": "Only calls of this tool."},
    "status": {"type": "string", "enum": ["running", "ok", "error", "timeout", "not_found", "unavailable", "bad_args", "cancelled", "denied", "interrupted"], "description": "Only calls with this status."},
    "chat_id": {"type": "string", "description": "Only calls made in this chat: PLATFORM:ID as the admin pages print it (telegram:-100123, web:ID; telegram:-100123#7 for one forum topic), or the bare chat id."},
    "since": {"type": "string", "description": "How far back to look, e.g. 30m, 24h, 7d, or since a time (RFC 3339 or 2006-01-02). At most a year. Default 24h."},
    "limit": {"type": "integer", "minimum": 1, "maximum": 50, "description": "At most this many rows. Default 10."}
  },
  "additionalProperties": false
}`

// New is the plugin's Factory: it needs deps.Audit.
func New(deps plugin.Deps) ([]plugin.Tool, error) {
	if deps.Audit == nil {
		return nil, errors.New("audit_query needs the audit log (Deps.Audit is nil)")
	}
	q := &querier{log: deps.Audit, now: time.Now}
	return []plugin.Tool{{
		Spec: tools.Spec{
			Name:        Name,
			Description: "Admins only: look at this bot's tool-call audit log — recent calls, recent failures, the slowest calls and the slowest tools, filtered by tool, status, chat and time. Outside a private chat it shows only the current chat's calls.",
			Parameters:  json.RawMessage(schema),
			AdminOnly:   true,
			ReadOnly:    true, // it reads the audit log and changes nothing
		},
		Run: q.run,
	}}, nil
}

type querier struct {
	log audit.Log
	now func() time.Time
}

type args struct {
	View   string `json:"view"`
	Tool   string `json:"tool"`
	Status string `json:"status"`
	ChatID string `json:"chat_id"`
	Since  string `json:"since"`
	Limit  int    `json:"limit"`
}

// bounds reads a's window and limit: where the window starts and how long it is (the last
// defaultSince unless asked, at most a year), and how many rows to show (at most maxLimit).
func (a args) bounds(now time.Time) (from time.Time, since time.Duration, limit int, err error) {
	since, from = defaultSince, now.Add(-defaultSince)
	if a.Since != "" {
		if from, err = audit.ParseSince(a.Since, now); err != nil {
			return time.Time{}, 0, 0, fmt.Errorf("audit_query: since: %w", err)
		}
		if since = now.Sub(from); since <= 0 || since > maxSince {
			return time.Time{}, 0, 0, fmt.Errorf("audit_query: since: %q must be in the last year", a.Since)
		}
	}
	switch limit = a.Limit; {
	case limit == 0:
		limit = defaultLimit
	case limit < 0:
		return time.Time{}, 0, 0, fmt.Errorf("audit_query: limit must be positive, got %d", limit)
	case limit > maxLimit:
		limit = maxLimit
	}
	return from, since, limit, nil
}

func (q *querier) run(ctx context.Context, inv tools.Invocation) (tools.Result, error) {
	// The Manager offers this tool only to admins; refuse here too, in case it is ever called
	// another way.
	if !inv.Turn.Admin {
		return tools.Result{}, errors.New("audit_query is only for bot admins")
	}
	var a args
	dec := json.NewDecoder(strings.NewReader(string(inv.Arguments)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return tools.Result{}, fmt.Errorf("audit_query: bad arguments: %w", err)
	}
	if a.View == "" {
		a.View = viewRecent
	}
	if !slices.Contains(views, a.View) {
		return tools.Result{}, fmt.Errorf("audit_query: unknown view %q (one of %s)", a.View, strings.Join(views, ", "))
	}
	from, since, limit, err := a.bounds(q.now())
	if err != nil {
		return tools.Result{}, err
	}
	ref, err := chat.FilterRef("", a.ChatID)
	if err != nil {
		return tools.Result{}, fmt.Errorf("audit_query: chat_id: %w", err)
	}
	query := audit.Filter{Tool: a.Tool, Since: from, Platform: string(ref.Platform), ChatID: ref.ChatID,
		ThreadID: ref.ThreadID, Limit: limit}
	if !inv.Turn.Private {
		// Outside a private chat with an admin the log shows only the chat it is asked from:
		// the group reads the answer too.
		if ref.ChatID != "" && (ref.ChatID != inv.Turn.ChatID || ref.Platform != "" && string(ref.Platform) != inv.Turn.Platform) {
			return tools.Result{}, errors.New("audit_query: other chats' calls are shown only in a private chat with the bot")
		}
		if a.View == viewSlowestTools {
			return tools.Result{}, errors.New("audit_query: slowest_tools covers every chat, so it is shown only in a private chat with the bot")
		}
		query.Platform, query.ChatID = inv.Turn.Platform, inv.Turn.ChatID
	}
	if a.Status != "" {
		st := audit.Status(a.Status)
		if !st.Valid() {
			return tools.Result{}, fmt.Errorf("audit_query: unknown status %q", a.Status)
		}
		query.Statuses = []audit.Status{st}
	}
	window := "in the last " + formatSince(since)
	switch a.View {
	case viewSlowestTools:
		stats, err := q.log.ToolStats(ctx, audit.Filter{Since: from})
		if err != nil {
			return tools.Result{}, fmt.Errorf("audit_query: reading tool statistics: %w", err)
		}
		return tools.Result{Text: formatStats(stats, a.Tool, limit, window)}, nil
	case viewFailures:
		if query.Statuses == nil {
			query.Statuses = failureStatuses
		}
	case viewSlowestCalls:
		query.Order = audit.Slowest
	}
	recs, _, err := q.log.ToolCalls(ctx, query)
	if err != nil {
		return tools.Result{}, fmt.Errorf("audit_query: reading the audit log: %w", err)
	}
	if len(recs) > limit {
		recs = recs[:limit]
	}
	return tools.Result{Text: formatRecords(a.View, recs, window)}, nil
}

func formatSince(d time.Duration) string {
	if d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	}
	return d.String()
}

func formatRecords(view string, recs []audit.Record, window string) string {
	title := map[string]string{
		viewRecent:       "Recent tool calls",
		viewFailures:     "Failed tool calls",
		viewSlowestCalls: "Slowest tool calls",
	}[view]
	if len(recs) == 0 {
		return fmt.Sprintf("%s %s: none.", title, window)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s (%d):\n", title, window, len(recs))
	for _, r := range recs {
		src := string(r.Source)
		if r.Server != "" {
			src += ":" + r.Server
		}
		if src == "" {
			src = "unknown"
		}
		fmt.Fprintf(&b, "- #%d %s %s [%s] %s %s, chat %s:%s, turn %d, round %d",
			r.ID, r.StartedAt.UTC().Format(time.RFC3339), r.ToolName, src, r.Status,
			r.Duration.Round(time.Millisecond), r.Platform, r.ChatID, r.TurnID, r.Round)
		if r.Arguments != "" && r.Arguments != "{}" {
			fmt.Fprintf(&b, "\n  args: %s", tools.Truncate(r.Arguments, argsChars))
		}
		if r.Error != "" {
			fmt.Fprintf(&b, "\n  error: %s", tools.Truncate(r.Error, errorChars))
		}
		b.WriteByte('\n')
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// toolStat is one line of the slowest_tools view: a tool's finished calls, whatever MCP server
// offered it.
type toolStat struct {
	tool     string
	source   audit.Source
	calls    int
	failures int
	avg, max time.Duration
}

// byTool folds the store's groups per source and server into one line per tool and source.
func byTool(stats []audit.Stat) []toolStat {
	type key struct {
		tool   string
		source audit.Source
	}
	at := map[key]int{}
	var out []toolStat
	for _, st := range stats {
		if st.Finished == 0 {
			continue
		}
		k := key{st.Tool, st.Source}
		i, ok := at[k]
		if !ok {
			at[k] = len(out)
			out = append(out, toolStat{tool: st.Tool, source: st.Source, calls: st.Finished,
				failures: st.Errors, avg: st.Avg, max: st.Max})
			continue
		}
		o := &out[i]
		calls := o.calls + st.Finished
		o.avg = (o.avg*time.Duration(o.calls) + st.Avg*time.Duration(st.Finished)) / time.Duration(calls)
		o.calls, o.failures = calls, o.failures+st.Errors
		o.max = max(o.max, st.Max)
	}
	return out
}

func formatStats(stats []audit.Stat, tool string, limit int, window string) string {
	rows := make([]toolStat, 0, len(stats))
	for _, s := range byTool(stats) {
		if tool == "" || s.tool == tool {
			rows = append(rows, s)
		}
	}
	slices.SortStableFunc(rows, func(a, b toolStat) int {
		switch {
		case a.avg > b.avg:
			return -1
		case a.avg < b.avg:
			return 1
		}
		return strings.Compare(a.tool, b.tool)
	})
	if len(rows) > limit {
		rows = rows[:limit]
	}
	if len(rows) == 0 {
		return fmt.Sprintf("Slowest tools %s: no calls.", window)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Slowest tools %s (by average duration):\n", window)
	for _, s := range rows {
		fmt.Fprintf(&b, "- %s [%s]: %d calls, %d failed, avg %s, max %s\n", s.tool, s.source, s.calls, s.failures,
			s.avg.Round(time.Millisecond), s.max.Round(time.Millisecond))
	}
	return strings.TrimSuffix(b.String(), "\n")
}
