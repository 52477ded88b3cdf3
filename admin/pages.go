package admin

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"relaybot/audit"
	"relaybot/chat"
	"relaybot/internal/ellipsis"
	"relaybot/store"
	"relaybot/tools"
)

//go:embed templates static
var embedded embed.FS

// pageSet holds one template set per page, each with the shared layout, parsed on the page's
// first render: a bot whose admin pages nobody opens does not parse them (at start they cost
// 0.8 MB of allocations and half a megabyte kept).
type pageSet map[string]func() (*template.Template, error)

// newPages is the page set of a server.
func newPages() pageSet {
	out := pageSet{}
	for _, name := range [...]string{"login", "overview", "calls", "call", "stats", "servers", "replicas", "usage", "error", "oauth", "turn", "turns", "consents", "memories", "knowledge", "tasks", "conversations", "conversation", "settings"} {
		out[name] = sync.OnceValues(func() (*template.Template, error) { return parsePage(name) })
	}
	return out
}

// parsePage parses page name with the layout and the filters.
func parsePage(name string) (*template.Template, error) {
	funcs := template.FuncMap{
		"time":      fmtTime,
		"ms":        fmtMS,
		"dur":       func(d time.Duration) string { return fmtMS(d.Milliseconds()) },
		"pretty":    prettyJSON,
		"percent":   func(f float64) string { return strconv.FormatFloat(f*100, 'f', 1, 64) + "%" },
		"statusOK":  func(s audit.Status) bool { return s == audit.StatusOK },
		"isRunning": func(s audit.Status) bool { return s == audit.StatusRunning },
		"bytes":     fmtBytes,
		"size":      func(n int64) string { return fmtBytes(int(n)) },
		"list":      func(v ...string) []string { return v },
		"money":     func(f float64) string { return strconv.FormatFloat(f, 'f', 4, 64) },
		"callRow":   func(p callsData, c audit.Record) callRow { return callRow{Page: p, Call: c} },
	}
	t, err := template.New("layout.html").Funcs(funcs).ParseFS(embedded, "templates/layout.html", "templates/filters.html", "templates/"+name+".html")
	if err != nil {
		return nil, fmt.Errorf("admin: parsing page %s: %w", name, err)
	}
	return t, nil
}

func staticHandler() http.Handler {
	sub, err := fs.Sub(embedded, "static")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	files := http.FileServerFS(sub)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "" || strings.HasSuffix(r.URL.Path, "/") {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}

// favicon serves the pages' icon (an SVG; the admin pages and the web chat link it) at the address
// browsers ask for when a page names none. It needs no login: browsers fetch it without cookies.
func favicon(w http.ResponseWriter, r *http.Request) {
	b, err := embedded.ReadFile("static/favicon.svg")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	h := w.Header()
	h.Set("Content-Type", "image/svg+xml")
	h.Set("Cache-Control", "public, max-age=86400")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	_, _ = w.Write(b)
}

// pageData is what every page's layout needs.
type pageData struct {
	Title   string
	Nav     string // the active navigation entry
	Login   bool   // a token is configured, so there is a session to log out of
	CSRF    string
	WebChat bool
	// traceURL is Options.TraceURL, for TraceLink.
	traceURL string
}

func (s *Server) page(r *http.Request, title string) pageData {
	return pageData{
		Title:   title,
		Login:   s.opts.Token != "",
		CSRF:    sessionOf(r).csrf,
		WebChat: s.opts.WebChat != nil,

		traceURL: s.opts.TraceURL,
	}
}

// render executes a page into a buffer first, so a template failure becomes a clean 500.
func (s *Server) render(w http.ResponseWriter, r *http.Request, status int, name string, data any) {
	var buf bytes.Buffer
	parse, ok := s.pages[name]
	if !ok {
		s.log.Error("admin: render page", "page", name, "err", "no such page")
		http.Error(w, "the page could not be rendered; see the bot's log", http.StatusInternalServerError)
		return
	}
	t, err := parse()
	if err == nil {
		err = t.Execute(&buf, data)
	}
	if err != nil {
		s.log.Error("admin: render page", "page", name, "err", err)
		http.Error(w, "the page could not be rendered; see the bot's log", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
	w.WriteHeader(status)
	_, _ = buf.WriteTo(w)
}

type errorData struct {
	pageData
	Status  int
	Message string
}

func (s *Server) errorPage(w http.ResponseWriter, r *http.Request, status int, msg string) {
	s.render(w, r, status, "error", errorData{pageData: s.page(r, http.StatusText(status)), Status: status, Message: msg})
}

// pageStoreError shows a store failure on a page.
func (s *Server) pageStoreError(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, audit.ErrBadCursor):
		s.errorPage(w, r, http.StatusBadRequest, "That page link is not valid any more. Start again from the newest calls.")
	case errors.Is(err, store.ErrNotFound):
		s.errorPage(w, r, http.StatusNotFound, "There is no such tool call.")
	default:
		s.log.Error("admin: store query failed", "path", r.URL.Path, "err", err)
		s.errorPage(w, r, http.StatusInternalServerError, "The audit log could not be read; see the bot's log.")
	}
}

// filterForm is the filter as the form shows it: the raw values the user typed.
type filterForm struct {
	Since, Until, Tool, Status, Source, Server, Platform, Chat, User, Turn, Limit string
	// Decision and Approval filter on the approval of calls a tool policy asked about.
	Decision, Approval string
	// Q searches the tool names, arguments and results; Group is "turn" to group the list by turn.
	Q, Group string
}

func formOf(q url.Values) filterForm {
	return filterForm{Since: q.Get("since"), Until: q.Get("until"), Tool: q.Get("tool"),
		Status: q.Get("status"), Source: q.Get("source"), Server: q.Get("server"),
		Platform: q.Get("platform"), Chat: q.Get("chat"), User: q.Get("user"), Turn: q.Get("turn"),
		Limit: q.Get("limit"), Decision: q.Get("decision"), Approval: q.Get("approval"), Q: q.Get("q"),
		Group: q.Get("group")}
}

// query renders the filter as query parameters, leaving out empty ones.
func (f filterForm) query() url.Values {
	q := url.Values{}
	for k, v := range map[string]string{"since": f.Since, "until": f.Until, "tool": f.Tool,
		"status": f.Status, "source": f.Source, "server": f.Server, "platform": f.Platform,
		"chat": f.Chat, "user": f.User, "turn": f.Turn, "limit": f.Limit, "decision": f.Decision,
		"approval": f.Approval, "q": f.Q, "group": f.Group} {
		if strings.TrimSpace(v) != "" {
			q.Set(k, strings.TrimSpace(v))
		}
	}
	return q
}

type callsData struct {
	pageData
	Form      filterForm
	Statuses  []string
	Sources   []string
	Items     []audit.Record
	Error     string
	NextURL   string // the next (older) page, empty on the last
	PrevURL   string // the previous (newer) page, empty on the newest
	FirstURL  string // the newest page of the same filter, when not on it
	Total     int    // the calls matching the filter, on every page
	CSVURL    string
	JSONLURL  string
	StatsURL  string
	Filtering bool // any filter is set
	// Failed is how many of Total failed, counted when the filter keeps every status (else -1).
	Failed int
	// Groups are the page's calls by turn, in the order the page lists them, when grouped.
	Groups []callGroup
	// Keep are the filter's values beside the search box, so a search stays within the filter.
	Keep url.Values
	// FailedURL lists the failed calls among these; GroupURL and UngroupURL the same page
	// grouped by turn and not.
	FailedURL, GroupURL, UngroupURL string
	// chats are the chats and threads of the listed calls' conversations.
	chats map[int64]chat.Ref
}

// ChatOf is the chat a call was made in, with its thread: the audit row names the chat only,
// its conversation the thread.
func (d callsData) ChatOf(c audit.Record) chat.Ref {
	if ref, ok := d.chats[c.ConversationID]; ok && ref.Platform == chat.Platform(c.Platform) && ref.ChatID == c.ChatID {
		return ref
	}
	return chat.Ref{Platform: chat.Platform(c.Platform), ChatID: c.ChatID}
}

// chatsOf reads the chats of the calls' conversations; without them (logged) the page prints
// each call's chat without its thread.
func (s *Server) chatsOf(r *http.Request, calls []audit.Record) map[int64]chat.Ref {
	ids := make([]int64, 0, len(calls))
	for _, c := range calls {
		if c.ConversationID != 0 {
			ids = append(ids, c.ConversationID)
		}
	}
	chats, err := s.opts.Store.Turns.ConversationChats(r.Context(), ids)
	if err != nil {
		s.log.Warn("admin: read the chats of calls", "err", err)
	}
	return chats
}

func withQuery(path string, q url.Values) string {
	if len(q) == 0 {
		return path
	}
	return path + "?" + q.Encode()
}

// callsPage lists tool calls, newest first, with the filter form.
func (s *Server) callsPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	form := formOf(q)
	base := form.query()
	rows := form.query() // the same calls, for the exports and the stats
	rows.Del("group")
	data := callsData{pageData: s.page(r, "Tool calls"), Form: form, Statuses: statuses, Sources: sources,
		CSVURL: withQuery("/admin/export.csv", rows), JSONLURL: withQuery("/admin/export.jsonl", rows),
		StatsURL: withQuery("/admin/stats", rows), Filtering: len(rows) > 0}
	data.Nav = "calls"
	data.Keep = form.query()
	data.Keep.Del("q")
	q.Del("group")
	f, err := parseFilter(q, s.now())
	if err == nil {
		err = checkGroup(form.Group)
	}
	if err != nil {
		data.Error = err.Error()
		s.render(w, r, http.StatusBadRequest, "calls", data)
		return
	}
	p, err := s.opts.Store.ToolCalls.ToolCallPage(r.Context(), f)
	if err == nil {
		data.Total, data.Failed, err = s.countCalls(r.Context(), f)
	}
	if err != nil {
		s.pageStoreError(w, r, err)
		return
	}
	data.Items = p.Items
	data.chats = s.chatsOf(r, p.Items)
	if form.Group == groupByTurn {
		data.Groups = groupByTurns(p.Items)
	}
	data.FailedURL, data.GroupURL, data.UngroupURL = s.callsLinks(form, q)
	if p.Next != "" {
		nq := form.query()
		nq.Set("cursor", p.Next)
		data.NextURL = withQuery("/admin/calls", nq)
	}
	if p.Prev != "" {
		pq := form.query()
		pq.Set("after", p.Prev)
		data.PrevURL = withQuery("/admin/calls", pq)
		data.FirstURL = withQuery("/admin/calls", base)
	}
	s.render(w, r, http.StatusOK, "calls", data)
}

type callData struct {
	pageData
	Call        audit.Record
	Turn        *store.Turn
	TurnCalls   []audit.Record
	Messages    []shownMessage
	HasMessages bool // the store can list a turn's messages
	TurnURL     string
}

// shownMessage is one message of the call's turn on the detail page.
type shownMessage struct {
	chat.Message
	Seq  int
	Hit  bool // the message asks for or answers this call
	Long bool
}

// redactMessage is m as the admin pages show a saved message: its text, reasoning and the
// arguments of the calls it asked for redacted as the audit log's rows are.
func redactMessage(m chat.Message) chat.Message {
	m.Content, m.Reasoning = tools.RedactText(m.Content), tools.RedactText(m.Reasoning)
	if len(m.ToolCalls) > 0 {
		calls := slices.Clone(m.ToolCalls)
		for i := range calls {
			calls[i].Arguments = tools.RedactJSONText(calls[i].Arguments)
		}
		m.ToolCalls = calls
	}
	return m
}

// callPage shows one call with its turn.
func (s *Server) callPage(w http.ResponseWriter, r *http.Request) {
	id, err := parseID(r.PathValue("id"))
	if err != nil {
		s.errorPage(w, r, http.StatusBadRequest, err.Error())
		return
	}
	ctx := r.Context()
	row, err := s.opts.Store.ToolCalls.ToolCall(ctx, id)
	if err != nil {
		s.pageStoreError(w, r, err)
		return
	}
	data := callData{pageData: s.page(r, "Tool call "+strconv.FormatInt(id, 10)), Call: row}
	data.Nav = "calls"
	if row.TurnID != 0 {
		data.TurnURL = "/admin/calls?turn=" + strconv.FormatInt(row.TurnID, 10)
		if t, err := s.opts.Store.Turns.Turn(ctx, row.TurnID); err == nil {
			data.Turn = &t
		} else if !errors.Is(err, store.ErrNotFound) {
			s.log.Warn("admin: read turn", "turn", row.TurnID, "err", err)
		}
		calls, _, err := s.opts.Store.ToolCalls.ToolCalls(ctx, audit.Filter{TurnID: row.TurnID, Limit: 200})
		if err != nil {
			s.log.Warn("admin: read calls of turn", "turn", row.TurnID, "err", err)
		}
		data.TurnCalls = calls
		data.HasMessages = true
		msgs, err := s.opts.Store.Messages.TurnMessages(ctx, row.TurnID)
		if err != nil {
			s.log.Warn("admin: read messages of turn", "turn", row.TurnID, "err", err)
		}
		for i, m := range msgs {
			m = redactMessage(m)
			hit := m.Role == store.RoleTool && m.ToolCallID == row.ToolCallID && row.ToolCallID != ""
			for _, c := range m.ToolCalls {
				hit = hit || (c.ID == row.ToolCallID && row.ToolCallID != "")
			}
			data.Messages = append(data.Messages, shownMessage{Message: m, Seq: i + 1, Hit: hit,
				Long: len(m.Content) > 600})
		}
	}
	s.render(w, r, http.StatusOK, "call", data)
}

type statsData struct {
	pageData
	Form      filterForm
	Statuses  []string
	Sources   []string
	Stats     []audit.Stat
	Chart     template.HTML
	Error     string
	CallsURL  string
	Filtering bool
}

// statsPage shows per-tool counts, error rates and duration percentiles with a bar chart.
func (s *Server) statsPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	q.Del("cursor")
	q.Del("limit")
	form := formOf(q)
	data := statsData{pageData: s.page(r, "Tool stats"), Form: form, Statuses: statuses, Sources: sources,
		CallsURL: withQuery("/admin/calls", form.query()), Filtering: len(form.query()) > 0}
	data.Nav = "stats"
	f, err := parseFilter(q, s.now())
	if err != nil {
		data.Error = err.Error()
		s.render(w, r, http.StatusBadRequest, "stats", data)
		return
	}
	stats, err := s.opts.Store.ToolCalls.ToolStats(r.Context(), f)
	if err != nil {
		s.pageStoreError(w, r, err)
		return
	}
	data.Stats = stats
	data.Chart = durationChart(data.Stats)
	s.render(w, r, http.StatusOK, "stats", data)
}

type serversData struct {
	pageData
	Servers []ServerHealth
	Up      int
}

func (s *Server) serversPage(w http.ResponseWriter, r *http.Request) {
	data := serversData{pageData: s.page(r, "MCP servers"), Servers: s.mcpHealth()}
	data.Nav = "servers"
	s.withLogins(r.Context(), data.Servers)
	for _, h := range data.Servers {
		if h.Up() {
			data.Up++
		}
	}
	s.render(w, r, http.StatusOK, "servers", data)
}

// durationChart draws p50 and p95 durations per tool as horizontal bars in an inline SVG, once
// wide for desktops and once narrow for phones (the stylesheet shows one). Colours come from the
// stylesheet (classes), so the page's CSP needs no inline styles.
func durationChart(stats []audit.Stat) template.HTML {
	if len(stats) == 0 {
		return ""
	}
	return drawChart(stats, "chart wide", 640, 150, 20) + drawChart(stats, "chart narrow", 360, 104, 13)
}

func drawChart(stats []audit.Stat, class string, width, labelW, labelRunes int) template.HTML {
	const rowH = 26
	barMax := width - labelW - 64
	var maxMS int64 = 1
	for _, st := range stats {
		maxMS = max(maxMS, st.P95.Milliseconds(), st.P50.Milliseconds())
	}
	height := len(stats)*rowH + 24
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="%s" viewBox="0 0 %d %d" role="img" aria-label="p50 and p95 duration per tool" preserveAspectRatio="xMinYMin meet">`, class, width, height)
	for i, st := range stats {
		y := i*rowH + 4
		w95 := max(int(math.Round(float64(st.P95.Milliseconds())/float64(maxMS)*float64(barMax))), 1)
		w50 := max(int(math.Round(float64(st.P50.Milliseconds())/float64(maxMS)*float64(barMax))), 1)
		fmt.Fprintf(&b, `<text class="label" x="%d" y="%d" text-anchor="end">%s</text>`, labelW-8, y+15, template.HTMLEscapeString(ellipsis.Cut(st.Tool, labelRunes)))
		fmt.Fprintf(&b, `<rect class="p95" x="%d" y="%d" width="%d" height="18" rx="3"><title>p95 %s</title></rect>`, labelW, y+2, w95, fmtMS(st.P95.Milliseconds()))
		fmt.Fprintf(&b, `<rect class="p50" x="%d" y="%d" width="%d" height="18" rx="3"><title>p50 %s</title></rect>`, labelW, y+2, w50, fmtMS(st.P50.Milliseconds()))
		fmt.Fprintf(&b, `<text class="value" x="%d" y="%d">%s</text>`, labelW+w95+6, y+15, fmtMS(st.P95.Milliseconds()))
	}
	ly := len(stats)*rowH + 16
	fmt.Fprintf(&b, `<rect class="p50" x="%d" y="%d" width="12" height="10" rx="2"/><text class="legend" x="%d" y="%d">p50</text>`, labelW, ly-9, labelW+16, ly)
	fmt.Fprintf(&b, `<rect class="p95" x="%d" y="%d" width="12" height="10" rx="2"/><text class="legend" x="%d" y="%d">p95</text>`, labelW+60, ly-9, labelW+76, ly)
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // every text inside is escaped above
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05")
}

// fmtMS renders a duration in milliseconds for people: "850 ms", "1.2 s", "3 min 20 s".
func fmtMS(ms int64) string {
	switch {
	case ms < 1000:
		return strconv.FormatInt(ms, 10) + " ms"
	case ms < 60_000:
		return strconv.FormatFloat(float64(ms)/1000, 'f', 1, 64) + " s"
	default:
		return fmt.Sprintf("%d min %d s", ms/60_000, ms%60_000/1000)
	}
}

func fmtBytes(n int) string {
	switch {
	case n < 1024:
		return strconv.Itoa(n) + " B"
	case n < 1<<20:
		return strconv.FormatFloat(float64(n)/1024, 'f', 1, 64) + " KiB"
	default:
		return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + " MiB"
	}
}

// prettyJSON indents JSON text; anything else comes back as it was.
func prettyJSON(s string) string {
	var buf bytes.Buffer
	if err := json.Indent(&buf, []byte(s), "", "  "); err != nil {
		return s
	}
	return buf.String()
}
