package admin

import (
	"context"
	"encoding/csv"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"relaybot/audit"
	"relaybot/chat"
	"relaybot/store"
)

// UsageStore sums the tokens of model calls, and turns, model and tool calls per hour or day
// for the overview (*store.UsageQuery).
type UsageStore interface {
	Usage(ctx context.Context, f store.UsageFilter) ([]store.UsageRow, error)
	Overview(ctx context.Context, f store.OverviewFilter) (store.Overview, error)
}

// usageParams are the query parameters of the usage page and API.
var usageParams = []string{"since", "until", "platform", "chat", "user", "by", "format"}

// usageQuery is a parsed usage request.
type usageQuery struct {
	filter store.UsageFilter
	by     string // "" (all three tables), or store.ByUser, ByChat, ByModel
	csv    bool
}

// parseUsage reads since/until (as the audit filter: times, dates or durations back from now;
// default the start of this UTC month), platform, chat (a chat as the pages print it, or a bare
// id), user, by and format (json or csv).
func parseUsage(q url.Values, now time.Time) (usageQuery, error) {
	var u usageQuery
	for key := range q {
		if !slicesContains(usageParams, key) {
			return u, fmt.Errorf("unknown parameter %q (want one of %s)", key, strings.Join(usageParams, ", "))
		}
	}
	var err error
	if u.filter.Since, err = audit.ParseSince(q.Get("since"), now); err != nil {
		return u, fmt.Errorf("since: %w", err)
	}
	if u.filter.Since.IsZero() {
		n := now.UTC()
		u.filter.Since = time.Date(n.Year(), n.Month(), 1, 0, 0, 0, 0, time.UTC)
	}
	if u.filter.Until, err = audit.ParseSince(q.Get("until"), now); err != nil {
		return u, fmt.Errorf("until: %w", err)
	}
	ref, err := chat.FilterRef(q.Get("platform"), q.Get("chat"))
	if err != nil {
		return u, fmt.Errorf("chat: %w", err)
	}
	u.filter.Platform, u.filter.ChatID, u.filter.ThreadID = string(ref.Platform), ref.ChatID, ref.ThreadID
	u.filter.UserID = strings.TrimSpace(q.Get("user"))
	switch u.by = q.Get("by"); u.by {
	case "", store.ByUser, store.ByChat, store.ByModel:
	default:
		return u, fmt.Errorf("by %q must be user, chat or model", u.by)
	}
	switch f := q.Get("format"); f {
	case "", "json":
	case "csv":
		u.csv = true
	default:
		return u, fmt.Errorf("format %q must be json or csv", f)
	}
	return u, nil
}

func slicesContains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// usageReport is the JSON answer of GET /api/v1/usage: the window, the total and one table per
// roll-up (or the one asked for with by).
type usageReport struct {
	Since  time.Time                     `json:"since"`
	Until  *time.Time                    `json:"until"`
	Total  store.UsageTotal              `json:"total"`
	Tables map[string][]store.UsageTotal `json:"tables"`
}

func (s *Server) usageReport(r *http.Request) (usageReport, usageQuery, int, error) {
	us := s.opts.Store.Usage
	q, err := parseUsage(r.URL.Query(), s.now())
	if err != nil {
		return usageReport{}, q, http.StatusBadRequest, err
	}
	rows, err := us.Usage(r.Context(), q.filter)
	if err != nil {
		return usageReport{}, q, http.StatusInternalServerError, err
	}
	rep := usageReport{Since: q.filter.Since, Tables: map[string][]store.UsageTotal{}}
	if !q.filter.Until.IsZero() {
		rep.Until = &q.filter.Until
	}
	if t := store.RollUp(rows, store.ByAll, s.prices()); len(t) > 0 {
		rep.Total = t[0]
	}
	for _, by := range []string{store.ByUser, store.ByChat, store.ByModel} {
		if q.by == "" || q.by == by {
			rep.Tables[by] = store.RollUp(rows, by, s.prices())
		}
	}
	return rep, q, http.StatusOK, nil
}

// apiUsage answers GET /api/v1/usage: tokens and cost per user, chat and model; format=csv with
// by=user|chat|model gives one table as CSV (by defaults to user).
func (s *Server) apiUsage(w http.ResponseWriter, r *http.Request) {
	rep, q, status, err := s.usageReport(r)
	if err != nil {
		if status == http.StatusInternalServerError {
			s.log.Error("admin: usage query failed", "err", err)
		}
		writeJSONError(w, status, err.Error())
		return
	}
	if !q.csv {
		writeJSON(w, http.StatusOK, rep)
		return
	}
	by := q.by
	if by == "" {
		by = store.ByUser
	}
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="usage-by-%s.csv"`, by))
	w.Header().Set("Cache-Control", "no-store")
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{by, "calls", "tokens_in", "tokens_out", "cost", "estimated_calls", "cached_tokens", "cache_write_tokens", "cache_saved"})
	for _, t := range rep.Tables[by] {
		_ = cw.Write([]string{cell(t.Key), strconv.FormatInt(t.Calls, 10), strconv.FormatInt(t.TokensIn, 10),
			strconv.FormatInt(t.TokensOut, 10), strconv.FormatFloat(t.Cost, 'f', 6, 64), strconv.FormatInt(t.Estimated, 10),
			strconv.FormatInt(t.CachedTokens, 10), strconv.FormatInt(t.CacheWriteTokens, 10), strconv.FormatFloat(t.CacheSaved, 'f', 6, 64)})
	}
	cw.Flush()
}

type usageData struct {
	pageData
	Report usageReport
	Form   url.Values
	Error  string
	CSV    string
}

// usagePage shows the usage tables: per user, per chat and per model, this month by default.
func (s *Server) usagePage(w http.ResponseWriter, r *http.Request) {
	data := usageData{pageData: s.page(r, "Usage"), Form: r.URL.Query()}
	data.Nav = "usage"
	rep, _, status, err := s.usageReport(r)
	if err != nil {
		if status == http.StatusInternalServerError {
			s.pageStoreError(w, r, err)
			return
		}
		data.Error = err.Error()
		s.render(w, r, status, "usage", data)
		return
	}
	data.Report = rep
	q := r.URL.Query()
	q.Set("format", "csv")
	data.CSV = "/admin/usage.csv?" + q.Encode()
	s.render(w, r, http.StatusOK, "usage", data)
}
