package admin

import (
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"relaybot/audit"
	"relaybot/store"
)

// Kinds of timeline bars.
const (
	barModel    = "model"
	barTool     = "tool"
	barApproval = "approval"
	barDelivery = "delivery"
	barWait     = "wait"
)

// bar is one row of a turn's timeline: a model call, a tool call (with its approval wait), a
// platform request or a 429 wait, placed by its start and end.
type bar struct {
	Kind   string // barModel, barTool, barDelivery, barWait
	Label  string
	Status string
	Start  time.Time
	End    time.Time
	// Wait, on a model call, ends the wait for the first token; on a tool call, the approval.
	Wait time.Time
	// Detail is the row's extra (tokens, decision, 429 wait) for the table and the tooltip.
	Detail string
	// URL is the row's own page (a tool call's).
	URL string
}

// Duration is how long the bar lasted.
func (b bar) Duration() time.Duration { return b.End.Sub(b.Start) }

// bars lays out a turn's timeline in the order things began.
func bars(tl store.Timeline, calls []audit.Record) []bar {
	var out []bar
	for _, c := range tl.LLMCalls {
		b := bar{Kind: barModel, Label: fmt.Sprintf("model %s · round %d", c.Model, c.Round), Status: string(c.Status),
			Start: c.StartedAt, End: c.StartedAt.Add(c.Duration),
			Detail: fmt.Sprintf("first token %s · %d tokens in, %d out", fmtMS(c.TimeToFirstToken.Milliseconds()), c.TokensIn, c.TokensOut)}
		if c.TimeToFirstToken > 0 {
			b.Wait = c.StartedAt.Add(c.TimeToFirstToken)
		}
		if c.CachedIn > 0 || c.CacheWriteIn > 0 {
			b.Detail += fmt.Sprintf(" · %d in from the cache", c.CachedIn)
			if c.CacheWriteIn > 0 {
				b.Detail += fmt.Sprintf(", %d written to it", c.CacheWriteIn)
			}
		}
		if c.FallbackReason != "" {
			b.Detail += " · fallback"
		}
		out = append(out, b)
	}
	for _, c := range calls {
		end := c.FinishedAt
		if end.IsZero() {
			end = c.StartedAt
		}
		b := bar{Kind: barTool, Label: fmt.Sprintf("tool %s · round %d", c.ToolName, c.Round), Status: string(c.Status),
			Start: c.StartedAt, End: end, URL: "/admin/calls/" + strconv.FormatInt(c.ID, 10)}
		if c.ApprovalRequired && !c.DecidedAt.IsZero() {
			b.Wait = c.DecidedAt
			b.Detail = fmt.Sprintf("approval %s in %s", c.Decision, fmtMS(c.DecidedAt.Sub(c.StartedAt).Milliseconds()))
			if c.Approver != "" {
				b.Detail += " by " + c.Approver
			}
		}
		if c.Error != "" {
			b.Detail = strings.TrimPrefix(b.Detail+" · ", " · ") + "failed: " + cutLabel(c.Error, 200)
		}
		out = append(out, b)
	}
	for _, d := range tl.Deliveries {
		took := time.Duration(d.TookMS) * time.Millisecond
		b := bar{Kind: barDelivery, Label: d.Kind, Status: "ok", Start: d.At.Add(-took), End: d.At}
		if d.Final {
			b.Label += " (final)"
		}
		switch d.Kind {
		case "rate_limited":
			b.Kind, b.Label, b.Status = barWait, "429 wait", "rate_limited"
			b.Start, b.End = d.At, d.At.Add(time.Duration(d.WaitMS)*time.Millisecond)
			b.Detail = "retry after " + fmtMS(d.WaitMS)
		case "failed", "retry", "fallback":
			b.Status = "error"
		}
		out = append(out, b)
	}
	slices.SortStableFunc(out, func(a, b bar) int { return a.Start.Compare(b.Start) })
	return out
}

// timelineSVG draws bars against the turn's span of time, one row each: the wait part of a
// model call (until its first token) and of a tool call (its approval) in a lighter shade.
// Colours come from the stylesheet (classes), so the page's CSP needs no inline styles.
func timelineSVG(rows []bar, start, end time.Time) template.HTML {
	if len(rows) == 0 {
		return ""
	}
	for _, b := range rows {
		if b.Start.Before(start) {
			start = b.Start
		}
		if b.End.After(end) {
			end = b.End
		}
	}
	const (
		width, labelW, rowH = 760, 230, 24
	)
	span := max(end.Sub(start), time.Millisecond)
	plot := float64(width - labelW - 70)
	x := func(t time.Time) float64 { return float64(labelW) + float64(t.Sub(start))/float64(span)*plot }
	height := len(rows)*rowH + 30
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="timeline" viewBox="0 0 %d %d" role="img" aria-label="turn timeline" preserveAspectRatio="xMinYMin meet">`, width, height)
	for i, r := range rows {
		y := i*rowH + 4
		x0, x1 := x(r.Start), x(r.End)
		w := max(x1-x0, 2)
		title := template.HTMLEscapeString(fmt.Sprintf("%s: %s, %s from the start", r.Label, fmtMS(r.Duration().Milliseconds()), fmtMS(r.Start.Sub(start).Milliseconds())))
		if r.Detail != "" {
			title += template.HTMLEscapeString(" · " + r.Detail)
		}
		fmt.Fprintf(&b, `<g class="bar %s status-%s" data-kind="%s"><title>%s</title>`, r.Kind, template.HTMLEscapeString(r.Status), r.Kind, title)
		fmt.Fprintf(&b, `<text class="label" x="%d" y="%d" text-anchor="end">%s</text>`, labelW-8, y+14, template.HTMLEscapeString(cutLabel(r.Label, 34)))
		fmt.Fprintf(&b, `<rect class="span" x="%.1f" y="%d" width="%.1f" height="16" rx="3"/>`, x0, y+2, w)
		if !r.Wait.IsZero() && r.Wait.After(r.Start) {
			fmt.Fprintf(&b, `<rect class="waiting" x="%.1f" y="%d" width="%.1f" height="16" rx="3"/>`, x0, y+2, max(x(r.Wait)-x0, 1))
		}
		fmt.Fprintf(&b, `<text class="value" x="%.1f" y="%d">%s</text></g>`, x0+w+5, y+14, fmtMS(r.Duration().Milliseconds()))
	}
	ay := len(rows)*rowH + 20
	fmt.Fprintf(&b, `<text class="axis" x="%d" y="%d">0</text><text class="axis" x="%d" y="%d" text-anchor="end">%s</text>`,
		labelW, ay, width-70, ay, fmtMS(span.Milliseconds()))
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // every text inside is escaped above
}

// cutLabel shortens a label to n runes.
func cutLabel(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

type timelineData struct {
	pageData
	Story    turnStory
	Turn     store.Turn
	Chat     string
	ChatURL  string
	Bars     []bar
	Chart    template.HTML
	TraceURL string
}

// Offset is how long after the turn's start b began.
func (d timelineData) Offset(b bar) string {
	return fmtMS(b.Start.Sub(d.Turn.StartedAt).Milliseconds())
}

// turnPage draws one turn's timeline from the store.
func (s *Server) turnPage(w http.ResponseWriter, r *http.Request) {
	id, err := parseID(r.PathValue("id"))
	if err != nil {
		s.errorPage(w, r, http.StatusBadRequest, err.Error())
		return
	}
	ctx := r.Context()
	tl, err := s.opts.Store.Timelines.TurnTimeline(ctx, id)
	if err != nil {
		s.pageStoreError(w, r, err)
		return
	}
	calls, _, err := s.opts.Store.ToolCalls.ToolCalls(ctx, audit.Filter{TurnID: id, Limit: audit.MaxLimit})
	if err != nil {
		s.pageStoreError(w, r, err)
		return
	}
	data := timelineData{pageData: s.page(r, "Turn "+strconv.FormatInt(id, 10)), Turn: tl.Turn,
		Bars: bars(tl, calls), TraceURL: s.traceURL(tl.Turn.TraceID), Story: s.turnStoryOf(ctx, tl, calls)}
	data.Nav = "turns"
	if tl.Chat.ChatID != "" {
		data.Chat, data.ChatURL = tl.Chat.String(), turnsOf(tl.Chat)
	}
	end := tl.Turn.FinishedAt
	if end.IsZero() {
		end = s.now()
	}
	data.Chart = timelineSVG(data.Bars, tl.Turn.StartedAt, end)
	s.render(w, r, http.StatusOK, "turn", data)
}

// traceURL links a trace id to the configured tracing UI; empty without either.
func (s *Server) traceURL(id string) string {
	return traceLink(s.opts.TraceURL, id)
}

func traceLink(tmpl, id string) string {
	if id == "" || tmpl == "" {
		return ""
	}
	return strings.ReplaceAll(tmpl, "{trace_id}", url.PathEscape(id))
}

// TraceLink links a trace id to the configured tracing UI (Options.TraceURL); empty without
// either. Templates call it on any page's data.
func (p pageData) TraceLink(id string) string { return traceLink(p.traceURL, id) }
