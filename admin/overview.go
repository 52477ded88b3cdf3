package admin

import (
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"relaybot/audit"
	"relaybot/chat"
	"relaybot/store"
)

// overviewRange is one of the overview's windows: the last day by hour, or the last month by day.
type overviewRange struct {
	Name  string // "day" or "month", the range= parameter
	Label string
	Step  time.Duration
	N     int
}

var overviewRanges = []overviewRange{
	{Name: "day", Label: "Last 24 hours, by hour", Step: time.Hour, N: 24},
	{Name: "month", Label: "Last 30 days, by day", Step: 24 * time.Hour, N: 30},
}

// window is the range's span ending with the bucket now is in: whole UTC hours or days.
func (o overviewRange) window(now time.Time) (since, until time.Time) {
	until = now.UTC().Truncate(o.Step).Add(o.Step)
	return until.Add(-time.Duration(o.N) * o.Step), until
}

// parseOverview reads range= (day, the default, or month); no other parameter is taken.
func parseOverview(q url.Values) (overviewRange, error) {
	for key := range q {
		if key != "range" {
			return overviewRange{}, fmt.Errorf("unknown parameter %q (want range)", key)
		}
	}
	name := q.Get("range")
	if name == "" {
		name = "day"
	}
	i := slices.IndexFunc(overviewRanges, func(o overviewRange) bool { return o.Name == name })
	if i < 0 {
		return overviewRange{}, fmt.Errorf("range %q must be day or month", name)
	}
	return overviewRanges[i], nil
}

// overview is the overview of one range: its buckets and their total (whose percentiles are
// the whole range's, ranked by the database, not an average of the buckets').
type overview struct {
	Range   string                 `json:"range"`
	Step    string                 `json:"step"`
	Since   time.Time              `json:"since"`
	Until   time.Time              `json:"until"`
	Total   store.OverviewBucket   `json:"total"`
	Buckets []store.OverviewBucket `json:"buckets"`
}

// readOverview asks the store for the range's buckets and their total.
func (s *Server) readOverview(r *http.Request, o overviewRange) (overview, error) {
	since, until := o.window(s.now())
	f := store.OverviewFilter{Since: since, Until: until, Step: o.Step, Prices: s.prices()}
	ov, err := s.opts.Store.Usage.Overview(r.Context(), f)
	if err != nil {
		return overview{}, err
	}
	return overview{Range: o.Name, Step: o.Step.String(), Since: since, Until: until, Total: ov.Total, Buckets: ov.Buckets}, nil
}

// apiOverview answers GET /api/v1/overview: the overview's series as the page draws them.
func (s *Server) apiOverview(w http.ResponseWriter, r *http.Request) {
	o, err := parseOverview(r.URL.Query())
	if err != nil {
		writeJSONError(w, http.StatusBadRequest, err.Error())
		return
	}
	ov, err := s.readOverview(r, o)
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, ov)
}

// overviewChart is one chart of the overview page: its title, the range's total, and the drawing.
type overviewChart struct {
	ID, Title, Total, Note string
	SVG                    template.HTML
}

type overviewData struct {
	pageData
	Ranges []overviewRange
	Range  overviewRange
	Error  string
	Charts []overviewChart
	Empty  bool // nothing happened in the range
	// TurnsURL and CallsURL list the range's turns and tool calls.
	TurnsURL, CallsURL string
}

// overviewPage is the admin's landing page: what the bot did over the last day or month.
func (s *Server) overviewPage(w http.ResponseWriter, r *http.Request) {
	data := overviewData{pageData: s.page(r, "Overview"), Ranges: overviewRanges}
	data.Nav = "overview"
	o, err := parseOverview(r.URL.Query())
	if err != nil {
		data.Error = err.Error()
		s.render(w, r, http.StatusBadRequest, "overview", data)
		return
	}
	data.Range = o
	ov, err := s.readOverview(r, o)
	if err != nil {
		s.pageStoreError(w, r, err)
		return
	}
	data.TurnsURL = rowsURL("/admin/turns", ov.Since, ov.Until, nil)
	data.CallsURL = rowsURL("/admin/calls", ov.Since, ov.Until, nil)
	t := ov.Total
	data.Empty = t.Turns == 0 && t.ModelCalls == 0 && len(t.ToolCalls) == 0
	data.Charts = overviewCharts(ov, o)
	s.render(w, r, http.StatusOK, "overview", data)
}

// rowsURL is a list page (turns or calls) filtered to [since, until) and by extra.
func rowsURL(path string, since, until time.Time, extra url.Values) string {
	q := url.Values{"since": {since.UTC().Format(time.RFC3339)}, "until": {until.UTC().Format(time.RFC3339)}}
	for k, v := range extra {
		q[k] = v
	}
	return withQuery(path, q)
}

// overviewCharts draws each series of the overview, every bar linking to the rows behind it.
func overviewCharts(ov overview, o overviewRange) []overviewChart {
	t := ov.Total
	turns := func(b store.OverviewBucket, extra url.Values) string {
		return rowsURL("/admin/turns", b.Start, b.End, extra)
	}
	calls := func(b store.OverviewBucket, extra url.Values) string {
		return rowsURL("/admin/calls", b.Start, b.End, extra)
	}
	errs := url.Values{"status": {string(chat.StatusError)}}
	var out []overviewChart
	add := func(id, title, total, note string, series []series, format func(float64) string) {
		out = append(out, overviewChart{ID: id, Title: title, Total: total, Note: note,
			SVG: columnChart(id, ov.Buckets, o, series, format)})
	}
	add("turns", "Turns", count(t.Turns), "", []series{
		{Class: "ok", Name: "answered or stopped", Value: func(b store.OverviewBucket) float64 { return float64(b.Turns - b.TurnErrors) },
			URL: func(b store.OverviewBucket) string { return turns(b, nil) }},
		{Class: "err", Name: "failed", Value: func(b store.OverviewBucket) float64 { return float64(b.TurnErrors) },
			URL: func(b store.OverviewBucket) string { return turns(b, errs) }},
	}, fmtCount)
	add("model-calls", "Model calls", count(t.ModelCalls), fmt.Sprintf("%d failed", t.ModelErrors), []series{
		{Class: "ok", Name: "answered", Value: func(b store.OverviewBucket) float64 { return float64(b.ModelCalls - b.ModelErrors) },
			URL: func(b store.OverviewBucket) string { return turns(b, nil) }},
		{Class: "err", Name: "failed", Value: func(b store.OverviewBucket) float64 { return float64(b.ModelErrors) },
			URL: func(b store.OverviewBucket) string { return turns(b, errs) }},
	}, fmtCount)
	add("tokens", "Tokens", count(t.TokensIn+t.TokensOut),
		fmt.Sprintf("%s in (%s from the cache), %s out", count(t.TokensIn), count(t.CachedIn), count(t.TokensOut)), []series{
			{Class: "in", Name: "prompt, not cached", Value: func(b store.OverviewBucket) float64 { return float64(b.TokensIn - b.CachedIn) },
				URL: func(b store.OverviewBucket) string { return turns(b, nil) }},
			{Class: "cached", Name: "prompt, from the cache", Value: func(b store.OverviewBucket) float64 { return float64(b.CachedIn) },
				URL: func(b store.OverviewBucket) string { return turns(b, nil) }},
			{Class: "out", Name: "output", Value: func(b store.OverviewBucket) float64 { return float64(b.TokensOut) },
				URL: func(b store.OverviewBucket) string { return turns(b, nil) }},
		}, fmtCount)
	add("cost", "Cost", fmtMoney(t.Cost), "at the configured prices", []series{
		{Class: "cost", Name: "cost", Value: func(b store.OverviewBucket) float64 { return b.Cost },
			URL: func(b store.OverviewBucket) string {
				return rowsURL("/admin/usage", b.Start, b.End, nil)
			}},
	}, fmtMoney)
	add("errors", "Errors", count(t.TurnErrors+t.ToolErrors), failuresNote(t), []series{
		{Class: "err", Name: "turns failed", Value: func(b store.OverviewBucket) float64 { return float64(b.TurnErrors) },
			URL: func(b store.OverviewBucket) string { return turns(b, errs) }},
		{Class: "warn", Name: "tool calls failed", Value: func(b store.OverviewBucket) float64 { return float64(b.ToolErrors) },
			URL: func(b store.OverviewBucket) string { return calls(b, url.Values{"status": {statusFailed}}) }},
	}, fmtCount)
	for _, l := range []struct {
		id, title string
		get       func(store.OverviewBucket) store.Percentiles
	}{
		{"first-text", "Time to first visible text", func(b store.OverviewBucket) store.Percentiles { return b.FirstText }},
		{"final", "Time to the final message", func(b store.OverviewBucket) store.Percentiles { return b.Final }},
	} {
		p := l.get(t)
		add(l.id, l.title, "p50 "+fmtMS(p.P50)+" · p95 "+fmtMS(p.P95), fmt.Sprintf("over %d turns", p.N), []series{
			{Class: "p95", Name: "p95", Overlay: true, Value: func(b store.OverviewBucket) float64 { return float64(l.get(b).P95) },
				URL: func(b store.OverviewBucket) string { return turns(b, nil) }},
			{Class: "p50", Name: "p50", Overlay: true, Value: func(b store.OverviewBucket) float64 { return float64(l.get(b).P50) },
				URL: func(b store.OverviewBucket) string { return turns(b, nil) }},
		}, func(f float64) string { return fmtMS(int64(f)) })
	}
	var byStatus []series
	for _, st := range audit.Statuses {
		byStatus = append(byStatus, series{Class: "st-" + string(st), Name: string(st),
			Value: func(b store.OverviewBucket) float64 { return float64(b.ToolCalls[st]) },
			URL:   func(b store.OverviewBucket) string { return calls(b, url.Values{"status": {string(st)}}) }})
	}
	var tools int64
	for _, n := range t.ToolCalls {
		tools += n
	}
	add("tool-calls", "Tool calls by status", count(tools), fmt.Sprintf("%d failed", t.ToolErrors), byStatus, fmtCount)
	add("waits", "429s waited", count(t.Waits429), fmtMS(t.Waited429MS)+" waited in all", []series{
		{Class: "warn", Name: "429s", Value: func(b store.OverviewBucket) float64 { return float64(b.Waits429) },
			URL: func(b store.OverviewBucket) string { return turns(b, nil) }},
	}, fmtCount)
	return out
}

// failuresNote says how many failed turns failed each way, and the failed tool calls.
func failuresNote(t store.OverviewBucket) string {
	note := fmt.Sprintf("%d turns, %d tool calls", t.TurnErrors, t.ToolErrors)
	kinds := make([]chat.Failure, 0, len(t.Failures))
	for k := range t.Failures {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	for _, k := range kinds {
		name := string(k)
		if name == "" {
			name = "other"
		}
		note += fmt.Sprintf(" · %s %d", name, t.Failures[k])
	}
	return note
}

func count(n int64) string      { return fmtCount(float64(n)) }
func fmtMoney(f float64) string { return strconv.FormatFloat(f, 'f', 4, 64) }

// fmtCount prints a count for people: 950, 12.3k, 4.5M.
func fmtCount(f float64) string {
	switch {
	case f < 10_000:
		return strconv.FormatFloat(f, 'f', 0, 64)
	case f < 1e6:
		return strconv.FormatFloat(f/1e3, 'f', 1, 64) + "k"
	default:
		return strconv.FormatFloat(f/1e6, 'f', 1, 64) + "M"
	}
}

// landingPage answers /admin/: the overview; with a filter of the calls list in its query (the
// address the calls list had before the overview took it, kept by old links), the calls list.
func (s *Server) landingPage(w http.ResponseWriter, r *http.Request) {
	for key := range r.URL.Query() {
		if key != "range" {
			s.callsPage(w, r)
			return
		}
	}
	s.overviewPage(w, r)
}
