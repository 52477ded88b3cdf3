package admin

import (
	"encoding/csv"
	"encoding/json"
	"net/http"
	"relaybot/audit"
	"strconv"
	"strings"
	"time"
)

// exportPage is how many rows an export reads from the store at a time.
const exportPage = 500

// csvHeader names the CSV columns: the audit row fields of the DESIGN contract.
var csvHeader = []string{"id", "started_at", "finished_at", "duration_ms", "platform", "chat_id", "user_id",
	"turn_id", "conversation_id", "round", "tool_call_id", "tool_name", "source", "server", "status",
	"arguments", "result", "error"}

// exportFilter reads the filter of an export: the page's filter without its paging, so the
// export holds every matching row.
func (s *Server) exportFilter(w http.ResponseWriter, r *http.Request) (audit.Filter, bool) {
	f, err := parseFilter(r.URL.Query(), s.now())
	if err != nil {
		http.Error(w, "bad filter: "+err.Error(), http.StatusBadRequest)
		return f, false
	}
	f.Cursor, f.Limit = "", exportPage
	return f, true
}

// eachPage pages through every row matching f, newest first, and calls fn for each page. It
// stops at the first error; the response is already under way then, so the error is logged and
// the file ends early.
func (s *Server) eachPage(w http.ResponseWriter, r *http.Request, f audit.Filter, fn func([]audit.Record) error) {
	rc := http.NewResponseController(w)
	for {
		items, next, err := s.opts.Store.ToolCalls.ToolCalls(r.Context(), f)
		if err != nil {
			s.log.Error("admin: export stopped early: store query failed", "err", err)
			return
		}
		if err := fn(items); err != nil {
			return // the client went away
		}
		if err := rc.Flush(); err != nil {
			return
		}
		if next == "" {
			return
		}
		f.Cursor = next
	}
}

func (s *Server) exportHeaders(w http.ResponseWriter, mime, ext string) {
	h := w.Header()
	h.Set("Content-Type", mime)
	h.Set("Cache-Control", "no-store")
	name := "tool-calls-" + s.now().UTC().Format("20060102-150405") + "." + ext
	h.Set("Content-Disposition", `attachment; filename="`+name+`"`)
}

// exportCSV streams the filter's rows as CSV. Cells that a spreadsheet would run as a formula
// (starting with = + - @ or a tab) get a leading apostrophe; the JSON lines export keeps the
// exact text.
func (s *Server) exportCSV(w http.ResponseWriter, r *http.Request) {
	f, ok := s.exportFilter(w, r)
	if !ok {
		return
	}
	s.exportHeaders(w, "text/csv; charset=utf-8", "csv")
	cw := csv.NewWriter(w)
	if err := cw.Write(csvHeader); err != nil {
		return
	}
	s.eachPage(w, r, f, func(items []audit.Record) error {
		for _, it := range items {
			finished := ""
			if !it.FinishedAt.IsZero() {
				finished = it.FinishedAt.UTC().Format(time.RFC3339Nano)
			}
			rec := []string{strconv.FormatInt(it.ID, 10), it.StartedAt.UTC().Format(time.RFC3339Nano), finished,
				strconv.FormatInt(it.Duration.Milliseconds(), 10), cell(it.Platform), cell(it.ChatID), cell(it.UserID),
				strconv.FormatInt(it.TurnID, 10), strconv.FormatInt(it.ConversationID, 10), strconv.Itoa(it.Round),
				cell(it.ToolCallID), cell(it.ToolName), cell(string(it.Source)), cell(it.Server), cell(string(it.Status)),
				cell(it.Arguments), cell(it.Result), cell(it.Error)}
			if err := cw.Write(rec); err != nil {
				return err
			}
		}
		cw.Flush()
		return cw.Error()
	})
}

// cell defuses text a spreadsheet would evaluate as a formula.
func cell(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}

// exportJSONL streams the filter's rows as JSON lines, one audit row per line (as `bot audit
// --json` prints them).
func (s *Server) exportJSONL(w http.ResponseWriter, r *http.Request) {
	f, ok := s.exportFilter(w, r)
	if !ok {
		return
	}
	s.exportHeaders(w, "application/jsonl; charset=utf-8", "jsonl")
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	s.eachPage(w, r, f, func(items []audit.Record) error {
		for _, it := range items {
			if err := enc.Encode(it); err != nil {
				return err
			}
		}
		return nil
	})
}
