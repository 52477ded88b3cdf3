package admin

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"relaybot/audit"
	"relaybot/store/storetest"
	"relaybot/tools"
)

// loggedIn returns a client that logged in through the form, and the page's logout CSRF token.
func loggedIn(t *testing.T, ts *httptest.Server) (*http.Client, string) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	resp, err := c.PostForm(ts.URL+"/admin/login", url.Values{"token": {testToken}, "next": {"/admin/"}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "Tool calls") {
		t.Fatalf("login: %d %s", resp.StatusCode, body)
	}
	u, _ := url.Parse(ts.URL)
	var ck *http.Cookie
	for _, c := range jar.Cookies(u) {
		if c.Name == sessionCookie {
			ck = c
		}
	}
	if ck == nil {
		t.Fatal("no session cookie after login")
	}
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindSubmatch(body)
	if m == nil {
		t.Fatal("page has no logout CSRF token")
	}
	return c, string(m[1])
}

func get(t *testing.T, c *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func TestLoginSessionCookie(t *testing.T) {
	st := storetest.Open(t, storetest.SQLite)
	seedStore(t, st)
	_, ts := newTestServer(t, st, testToken)

	// A wrong token is refused and sets no cookie.
	resp, err := http.PostForm(ts.URL+"/admin/login", url.Values{"token": {"wrong-wrong-wrong-wrong"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 {
		t.Errorf("wrong token: %d, cookies %v", resp.StatusCode, resp.Cookies())
	}

	// The right token sets an HttpOnly, SameSite=Strict session cookie that is not the token.
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err = noRedirect.PostForm(ts.URL+"/admin/login", url.Values{"token": {testToken}, "next": {"//evil.example/"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/admin/" {
		t.Errorf("login redirect: %d to %q, want 303 to /admin/ (never off-site)", resp.StatusCode, resp.Header.Get("Location"))
	}
	cookies := resp.Cookies()
	if len(cookies) != 1 || !cookies[0].HttpOnly || cookies[0].SameSite != http.SameSiteStrictMode || cookies[0].Value == testToken || len(cookies[0].Value) < 32 {
		t.Fatalf("session cookie = %+v", cookies)
	}

	// A cross-site login post is refused.
	req, _ := http.NewRequest(http.MethodPost, ts.URL+"/admin/login", strings.NewReader("token="+testToken))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("cross-site login: %d, want 403", resp.StatusCode)
	}

	c, csrf := loggedIn(t, ts)
	// The session also opens the API for the browser.
	if code, _ := get(t, c, ts.URL+"/api/v1/tool-calls"); code != http.StatusOK {
		t.Errorf("API with session: %d", code)
	}
	// Logout needs the CSRF token.
	resp, err = c.PostForm(ts.URL+"/admin/logout", url.Values{"csrf": {"forged"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("logout with a forged token: %d, want 403", resp.StatusCode)
	}
	resp, err = c.PostForm(ts.URL+"/admin/logout", url.Values{"csrf": {csrf}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	if code, _ := get(t, c, ts.URL+"/admin/"); code != http.StatusSeeOther {
		t.Errorf("after logout the page answers %d, want 303 to login", code)
	}
}

func TestPages(t *testing.T) {
	st := storetest.Open(t, storetest.SQLite)
	seed := seedStore(t, st)
	_, ts := newTestServer(t, st, testToken, func(o *Options) {
		o.MCPHealth = func() []tools.ServerHealth {
			return []tools.ServerHealth{{Name: "wx", Transport: "stdio", State: "down", LastError: "exec: wx-server: not found"},
				{Name: "docs", Transport: "http", ProtocolVersion: "2025-11-25", State: "up", Tools: 2,
					Resources: []tools.ServerResource{{URI: "docs://guide", Name: "Guide", MIMEType: "text/markdown"}},
					ResourceTemplates: []tools.ServerResourceTemplate{{URITemplate: "docs://page/{n}", Name: "Page"},
						{URITemplate: "docs://q{?x,y}", Name: "Query", Unmatched: "not an expression the bot matches"}},
					Prompts: []tools.ServerPrompt{{Name: "brief", Arguments: []tools.PromptArgument{{Name: "topic", Required: true}, {Name: "days"}}}}}}
		}
		o.WebChat = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "chat here") })
	})
	c, _ := loggedIn(t, ts)

	code, body := get(t, c, ts.URL+"/admin/?status=error")
	if code != http.StatusOK || !strings.Contains(body, "upstream 502") && !strings.Contains(body, "search") {
		t.Errorf("filtered list: %d", code)
	}
	if strings.Contains(body, "current_time") {
		t.Error("status=error list shows an ok call")
	}
	code, body = get(t, c, ts.URL+"/admin/?limit=2")
	if code != http.StatusOK || !strings.Contains(body, "Older →") || strings.Count(body, `class="rowlink"`) != 2 {
		t.Errorf("paged list: %d, rows %d", code, strings.Count(body, `class="rowlink"`))
	}
	next := regexp.MustCompile(`href="(/admin/calls\?[^"]*cursor=[^"]+)"`).FindStringSubmatch(body)
	if next == nil {
		t.Fatal("no link to the older page")
	}
	code, body = get(t, c, ts.URL+strings.ReplaceAll(next[1], "&amp;", "&"))
	if code != http.StatusOK || !strings.Contains(body, "← Newest") {
		t.Errorf("second page: %d", code)
	}

	call := seed.calls[1] // weather, error
	code, body = get(t, c, fmt.Sprintf("%s/admin/calls/%d", ts.URL, call.ID))
	for _, want := range []string{"weather", "upstream 502", "&#34;city&#34;: &#34;Paris&#34;", "test-model", "all calls of turn",
		"reading station 3", "Which station?", "&#34;by&#34;: &#34;alice&#34;"} {
		if !strings.Contains(body, want) {
			t.Errorf("detail page lacks %q", want)
		}
	}
	if code != http.StatusOK {
		t.Errorf("detail: %d", code)
	}
	if code, _ := get(t, c, ts.URL+"/admin/calls/424242"); code != http.StatusNotFound {
		t.Errorf("missing call: %d, want 404", code)
	}

	code, body = get(t, c, ts.URL+"/admin/stats")
	if code != http.StatusOK || !strings.Contains(body, "<svg") || !strings.Contains(body, "50.0%") {
		t.Errorf("stats: %d, chart %v, weather error rate %v", code, strings.Contains(body, "<svg"), strings.Contains(body, "50.0%"))
	}
	code, body = get(t, c, ts.URL+"/admin/servers")
	if code != http.StatusOK || !strings.Contains(body, "wx-server: not found") || !strings.Contains(body, "down") {
		t.Errorf("servers: %d", code)
	}
	if !strings.Contains(body, `<td data-label="Protocol">2025-11-25</td>`) {
		t.Errorf("the servers page does not show the protocol negotiated with docs")
	}
	if !strings.Contains(body, `<code>docs://guide</code> Guide`) || !strings.Contains(body, "1 resource</summary>") {
		t.Errorf("the servers page does not list docs' resource")
	}
	if !strings.Contains(body, `<code>docs://page/{n}</code> Page</li>`) || !strings.Contains(body, "2 resource templates</summary>") ||
		!strings.Contains(body, `title="not an expression the bot matches">not read</span>`) {
		t.Errorf("servers page lacks the resource templates (one the bot does not read marked so)")
	}
	if !strings.Contains(body, `<code>/prompt brief topic=… [days=…]</code>`) {
		t.Errorf("the servers page does not show docs' prompt as the command")
	}
	if code, body := get(t, c, ts.URL+"/chat"); code != http.StatusOK || body != "chat here" {
		t.Errorf("web chat behind login: %d %q", code, body)
	}
	if code, _ := get(t, &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}, ts.URL+"/chat"); code != http.StatusSeeOther {
		t.Errorf("web chat without login: %d, want 303", code)
	}
	// A bad filter is shown, not a crash.
	if code, body := get(t, c, ts.URL+"/admin/?since=whenever"); code != http.StatusBadRequest || !strings.Contains(body, "since") {
		t.Errorf("bad filter: %d", code)
	}
}

func TestExport(t *testing.T) {
	st := storetest.Open(t, storetest.SQLite)
	seedStore(t, st)
	_, ts := newTestServer(t, st, testToken)
	c, _ := loggedIn(t, ts)

	resp, err := c.Get(ts.URL + "/admin/export.csv?source=native&limit=1")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Disposition"), "attachment;") {
		t.Errorf("CSV is not a download: %q", resp.Header.Get("Content-Disposition"))
	}
	recs, err := csv.NewReader(resp.Body).ReadAll()
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	// limit is the page size of the page, not of the export: every matching row comes out.
	if len(recs) != 4 || recs[0][0] != "id" || recs[1][11] != "current_time" || recs[3][11] != "fetch_url" {
		t.Errorf("CSV rows = %v", recs)
	}

	resp, err = c.Get(ts.URL + "/admin/export.jsonl?status=error")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	lines := strings.Split(strings.TrimSpace(string(body)), "\n")
	if len(lines) != 2 {
		t.Fatalf("JSONL lines = %d: %s", len(lines), body)
	}
	var row audit.Record
	if err := json.Unmarshal([]byte(lines[0]), &row); err != nil || row.ToolName != "search" || row.Status != "error" {
		t.Errorf("first JSONL row = %+v, %v", row, err)
	}
	// Bearer works for scripts too.
	req, _ := http.NewRequest(http.MethodGet, ts.URL+"/admin/export.jsonl", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if n := strings.Count(string(body), "\n"); resp.StatusCode != http.StatusOK || n != 7 {
		t.Errorf("export with bearer: %d, %d lines", resp.StatusCode, n)
	}
}

func TestExportPagesThroughTheStore(t *testing.T) {
	st := storetest.Open(t, storetest.SQLite)
	seed := seedStore(t, st)
	ctx := t.Context()
	// More rows than one export page.
	for i := range exportPage + 20 {
		rec := audit.Record{TurnID: seed.turnID, Platform: "web", ChatID: "bulk", ToolName: "bulk", ToolCallID: fmt.Sprint(i),
			Arguments: `{"formula":"=1+1"}`, StartedAt: seed.base.Add(-time1(i))}
		if err := st.ToolCalls.StartToolCall(ctx, &rec); err != nil {
			t.Fatal(err)
		}
	}
	_, ts := newTestServer(t, st, testToken)
	c, _ := loggedIn(t, ts)
	resp, err := c.Get(ts.URL + "/admin/export.csv?chat=bulk")
	if err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(resp.Body).ReadAll()
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != exportPage+21 {
		t.Errorf("export has %d rows, want %d", len(recs)-1, exportPage+20)
	}
	if got := recs[1][15]; got != `{"formula":"=1+1"}` {
		t.Errorf("arguments cell = %q", got)
	}
}

func time1(i int) time.Duration { return time.Duration(i) * time.Second }

func TestDetailShowsTheTurnsMessages(t *testing.T) {
	st := storetest.Open(t, storetest.SQLite)
	seed := seedStore(t, st)
	_, ts := newTestServer(t, st, testToken)
	c, _ := loggedIn(t, ts)
	code, body := get(t, c, fmt.Sprintf("%s/admin/calls/%d", ts.URL, seed.calls[0].ID))
	if code != http.StatusOK {
		t.Fatalf("detail: %d", code)
	}
	// The turn's messages in order: the user's question, the call, its result, the answer.
	at := 0
	for _, want := range []string{"Messages of the turn", "what is the weather in Paris?", "call_0",
		html.EscapeString(`{"ok":true,"i":0}`), "It is sunny in Paris."} {
		i := strings.Index(body[at:], want)
		if i < 0 {
			t.Errorf("detail page lacks %q after byte %d", want, at)
			continue
		}
		at += i + len(want)
	}
	// The assistant message asking for call_0 and the tool result answering it are marked as this
	// call; the user message and the final answer are not.
	if n := strings.Count(body, `badge here`); n != 2 {
		t.Errorf("%d messages marked as this call, want 2 (the request and the result)", n)
	}
	// Another call of the same turn that no message mentions: same messages, none marked.
	if _, body := get(t, c, fmt.Sprintf("%s/admin/calls/%d", ts.URL, seed.calls[2].ID)); !strings.Contains(body, "It is sunny in Paris.") || strings.Contains(body, `badge here`) {
		t.Errorf("detail of call_2: want the turn's messages with none marked")
	}
}

// Every page parses with the layout (pages are parsed on their first render, not at start, so a
// broken template shows here rather than when an operator first opens the page), and each is
// parsed once.
func TestEveryPageParses(t *testing.T) {
	pages := newPages()
	if len(pages) != 19 {
		t.Errorf("%d pages, want the 19 the handlers render", len(pages))
	}
	for name, parse := range pages {
		first, err := parse()
		if err != nil {
			t.Errorf("page %s: %v", name, err)
			continue
		}
		if again, _ := parse(); again != first || first.Lookup(name+".html") == nil {
			t.Errorf("page %s: parsed anew on its second render, or without its own template", name)
		}
	}
}
