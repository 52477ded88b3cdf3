package admin

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"relaybot/audit"
	"relaybot/chat"
	"relaybot/store"
)

// statuses and sources are the values the audit log holds, as the filter forms offer them.
var (
	statuses = valuesOf(audit.Statuses)
	sources  = valuesOf(audit.Sources)
)

// statusFailed, as a status filter, keeps every call that failed (audit.Status.Failed).
const statusFailed = "failed"

// failedStatuses are the statuses of the calls that failed.
func failedStatuses() []audit.Status {
	var out []audit.Status
	for _, st := range audit.Statuses {
		if st.Failed() {
			out = append(out, st)
		}
	}
	return out
}

// valuesOf returns the values of a list of statuses or sources as strings.
func valuesOf[T ~string](vs []T) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = string(v)
	}
	return out
}

// filterParams are the query parameters that select audit rows, in the order forms show them.
var filterParams = []string{"since", "until", "q", "tool", "status", "source", "server", "platform", "chat", "user", "turn", "decision", "approval", "limit", "cursor", "after"}

// maxSearch caps the text of a calls search (q=).
const maxSearch = 200

// parseFilter reads the audit filter from query parameters: since and until are RFC 3339 times
// or durations back from now ("24h", "90m", "7d"); chat is a chat as the pages print it
// ("telegram:-100123", "web:ID", with "#thread" for one thread) or a bare chat id beside
// platform; turn and limit are numbers.
func parseFilter(q url.Values, now time.Time) (audit.Filter, error) {
	var f audit.Filter
	for key := range q {
		if !slices.Contains(filterParams, key) && key != "format" {
			return f, fmt.Errorf("unknown parameter %q (want one of %s)", key, strings.Join(filterParams, ", "))
		}
	}
	var err error
	if f.Since, err = audit.ParseSince(q.Get("since"), now); err != nil {
		return f, fmt.Errorf("since: %w", err)
	}
	if f.Until, err = audit.ParseSince(q.Get("until"), now); err != nil {
		return f, fmt.Errorf("until: %w", err)
	}
	f.Tool = strings.TrimSpace(q.Get("tool"))
	switch v := audit.Status(strings.TrimSpace(q.Get("status"))); {
	case v == statusFailed:
		f.Statuses = failedStatuses()
	case v != "":
		if !v.Valid() {
			return f, fmt.Errorf("status %q is not one of %s, %s", v, strings.Join(statuses, ", "), statusFailed)
		}
		f.Statuses = []audit.Status{v}
	}
	f.Source = audit.Source(strings.TrimSpace(q.Get("source")))
	if f.Source != "" && !f.Source.Valid() {
		return f, fmt.Errorf("source %q is not one of %s", f.Source, strings.Join(sources, ", "))
	}
	f.Server = strings.TrimSpace(q.Get("server"))
	ref, err := chat.FilterRef(q.Get("platform"), q.Get("chat"))
	if err != nil {
		return f, fmt.Errorf("chat: %w", err)
	}
	f.Platform, f.ChatID, f.ThreadID = string(ref.Platform), ref.ChatID, ref.ThreadID
	f.UserID = strings.TrimSpace(q.Get("user"))
	if v := strings.TrimSpace(q.Get("turn")); v != "" {
		if f.TurnID, err = strconv.ParseInt(v, 10, 64); err != nil || f.TurnID <= 0 {
			return f, fmt.Errorf("turn %q is not a turn id (a positive number)", v)
		}
	}
	if v := strings.TrimSpace(q.Get("limit")); v != "" {
		if f.Limit, err = strconv.Atoi(v); err != nil || f.Limit <= 0 || f.Limit > audit.MaxLimit {
			return f, fmt.Errorf("limit %q is not a number from 1 to %d", v, audit.MaxLimit)
		}
	}
	// approval=required keeps the calls a policy asked about; decision those that ended so.
	f.Decision = audit.Decision(strings.TrimSpace(q.Get("decision")))
	if f.Decision != "" && !f.Decision.Valid() {
		return f, fmt.Errorf("decision %q is not one of %s", f.Decision, joinValues(audit.Decisions))
	}
	switch v := strings.TrimSpace(q.Get("approval")); v {
	case "":
	case "required":
		f.ApprovalRequired = true
	default:
		return f, fmt.Errorf("approval %q must be \"required\" or empty", v)
	}
	f.Text = strings.TrimSpace(q.Get("q"))
	if n := utf8.RuneCountInString(f.Text); n > maxSearch {
		return f, fmt.Errorf("q is %d characters long, at most %d", n, maxSearch)
	}
	f.Cursor = strings.TrimSpace(q.Get("cursor"))
	f.After = strings.TrimSpace(q.Get("after"))
	return f, nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // a failed write means the client went away
}

func writeJSONError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

// storeError answers a store failure: a bad cursor is the client's fault, a missing row is 404,
// anything else is logged and answered 500 without details.
func (s *Server) storeError(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, audit.ErrBadCursor):
		writeJSONError(w, http.StatusBadRequest, "cursor: not a cursor this server gave out")
	case errors.Is(err, store.ErrNotFound):
		writeJSONError(w, http.StatusNotFound, "not found")
	default:
		s.log.Error("admin: store query failed", "path", r.URL.Path, "err", err)
		writeJSONError(w, http.StatusInternalServerError, "the audit log could not be read; see the bot's log")
	}
}

// toolCallPage is the answer of GET /api/v1/tool-calls: next continues with older calls
// (cursor=), prev with newer ones (after=).
type toolCallPage struct {
	Items []audit.Record `json:"items"`
	Next  string         `json:"next"`
	Prev  string         `json:"prev"`
}

func (s *Server) apiToolCalls(w http.ResponseWriter, r *http.Request) {
	f, err := parseFilter(r.URL.Query(), s.now())
	if err != nil {
		writeJSONError(w, http.StatusBadRequest, err.Error())
		return
	}
	p, err := s.opts.Store.ToolCalls.ToolCallPage(r.Context(), f)
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	if p.Items == nil {
		p.Items = []audit.Record{}
	}
	writeJSON(w, http.StatusOK, toolCallPage{Items: p.Items, Next: p.Next, Prev: p.Prev})
}

func parseID(v string) (int64, error) {
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil || id <= 0 {
		return 0, fmt.Errorf("%q is not a tool call id (a positive number)", v)
	}
	return id, nil
}

func (s *Server) apiToolCall(w http.ResponseWriter, r *http.Request) {
	id, err := parseID(r.PathValue("id"))
	if err != nil {
		writeJSONError(w, http.StatusBadRequest, err.Error())
		return
	}
	row, err := s.opts.Store.ToolCalls.ToolCall(r.Context(), id)
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, row)
}

func (s *Server) apiToolStats(w http.ResponseWriter, r *http.Request) {
	f, err := parseFilter(r.URL.Query(), s.now())
	if err != nil {
		writeJSONError(w, http.StatusBadRequest, err.Error())
		return
	}
	stats, err := s.opts.Store.ToolCalls.ToolStats(r.Context(), f)
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": stats})
}

// mcpHealth returns the servers' health, sorted by name.
func (s *Server) mcpHealth() []ServerHealth {
	if s.opts.MCPHealth == nil {
		return []ServerHealth{}
	}
	hs := s.opts.MCPHealth()
	out := make([]ServerHealth, len(hs))
	for i, h := range hs {
		out[i] = ServerHealth{ServerHealth: h}
	}
	slices.SortFunc(out, func(a, b ServerHealth) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func (s *Server) apiMCPServers(w http.ResponseWriter, r *http.Request) {
	h := s.mcpHealth()
	s.withLogins(r.Context(), h)
	writeJSON(w, http.StatusOK, map[string]any{"items": h})
}

// joinValues lists the values of a typed list for an error message.
func joinValues[T ~string](vs []T) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = string(v)
	}
	return strings.Join(parts, ", ")
}
