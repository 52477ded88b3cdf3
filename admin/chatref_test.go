package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"relaybot/audit"
	"relaybot/chat"
	"relaybot/store"
	"relaybot/store/storetest"
)

// chatTurn is one turn seedChats writes: its chat, status, tokens and the tool it called.
type chatTurn struct {
	key    chat.Key
	user   string
	status chat.Status
	tokens int
	tool   string // empty: the turn called no tool
}

// seededChats are the turns of seedChats, in the order written (oldest first), with their ids.
var seededChats = []chatTurn{
	{chat.Key{Platform: chat.Telegram, ChatID: "-100123", ThreadID: "7"}, "41", chat.StatusOK, 100, "topic_seven"},
	{chat.Key{Platform: chat.Telegram, ChatID: "-100123", ThreadID: "8"}, "42", chat.StatusError, 200, "topic_eight"},
	{chat.Key{Platform: chat.Web, ChatID: "5f2a9c"}, "w1", chat.StatusOK, 400, "web_tool"},
	{chat.Key{Platform: chat.Discord, ChatID: "777"}, "9", chat.StatusOK, 800, ""},
}

// seedChats writes one finished turn per seededChats entry, each with a model call and its tool
// call, and returns the turns' ids in the same order.
func seedChats(t *testing.T, st *store.Database) []int64 {
	t.Helper()
	ctx := context.Background()
	base := time.Now().UTC().Add(-time.Hour).Truncate(time.Second)
	var ids []int64
	for i, s := range seededChats {
		conv, err := st.Conversations.Conversation(ctx, s.key)
		if err != nil {
			t.Fatal(err)
		}
		started := base.Add(time.Duration(i) * time.Minute)
		id, err := st.Turns.StartTurn(ctx, store.TurnStart{ConversationID: conv.ID, UserID: s.user, UserName: "name" + s.user,
			StartedAt: started, UserMessage: chat.Message{Role: store.RoleUser, Content: "hello"}})
		if err != nil {
			t.Fatal(err)
		}
		if s.tool != "" {
			rec := audit.Record{TurnID: id, ConversationID: conv.ID, Platform: string(s.key.Platform), ChatID: s.key.ChatID,
				UserID: s.user, Round: 1, ToolCallID: "call_" + s.tool, ToolName: s.tool, Source: audit.SourceNative,
				Arguments: "{}", StartedAt: started.Add(time.Second)}
			if err := st.ToolCalls.StartToolCall(ctx, &rec); err != nil {
				t.Fatal(err)
			}
			rec.Status, rec.FinishedAt = audit.StatusOK, rec.StartedAt.Add(time.Second)
			if err := st.ToolCalls.FinishToolCall(ctx, &rec); err != nil {
				t.Fatal(err)
			}
		}
		err = st.Turns.FinishTurn(ctx, store.TurnEnd{TurnID: id, Status: s.status, Model: "mini", Rounds: 1,
			LLMCalls: []chat.ModelCall{{Model: "mini", Status: chat.StatusOK, TokensIn: s.tokens, StartedAt: started}}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

// TestEveryFilterTakesTheChatAsThePagesPrintIt: the API's chat filters (tool calls, tool stats,
// usage, consents, turns) and the pages' take "PLATFORM:ID" and "PLATFORM:ID#THREAD" as the pages
// print them; the bare id beside platform keeps working; a chat that is not one is a 400 that
// says why, not an empty list.
func TestEveryFilterTakesTheChatAsThePagesPrintIt(t *testing.T) {
	st := storetest.Open(t, storetest.SQLite)
	seedChats(t, st)
	ctx := context.Background()
	now := time.Now()
	if _, err := st.Consents.SaveConsent(ctx, audit.Consent{Platform: "telegram", ChatID: "-100123", Tool: "deploy",
		Rule: "tools.policy[0]", GivenBy: "Chief", GivenByID: "9", CreatedAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Consents.SaveConsent(ctx, audit.Consent{Platform: "web", ChatID: "-100123", Tool: "other",
		Rule: "tools.policy[0]", GivenBy: "Chief", GivenByID: "9", CreatedAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	_, ts := newTestServer(t, st, testToken)

	tools := func(q string) []string {
		t.Helper()
		var p page
		if code := getJSON(t, ts, "/api/v1/tool-calls?"+q, testToken, &p); code != http.StatusOK {
			t.Fatalf("tool-calls?%s: %d", q, code)
		}
		var out []string
		for _, it := range p.Items {
			out = append(out, it.ToolName)
		}
		return out
	}
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"chat=" + url.QueryEscape("telegram:-100123"), []string{"topic_eight", "topic_seven"}},
		{"chat=" + url.QueryEscape("telegram:-100123#7"), []string{"topic_seven"}},
		{"chat=web:5f2a9c", []string{"web_tool"}},
		{"chat=-100123&platform=telegram", []string{"topic_eight", "topic_seven"}},
		{"chat=5f2a9c", []string{"web_tool"}},
	} {
		if got := tools(tc.query); !slices.Equal(got, tc.want) {
			t.Errorf("tool-calls?%s = %v, want %v", tc.query, got, tc.want)
		}
	}

	var stats struct{ Items []audit.Stat }
	if code := getJSON(t, ts, "/api/v1/tool-stats?chat=web:5f2a9c", testToken, &stats); code != http.StatusOK ||
		len(stats.Items) != 1 || stats.Items[0].Tool != "web_tool" {
		t.Errorf("tool-stats?chat=web:5f2a9c = %d %+v, want web_tool only", code, stats.Items)
	}
	for _, tc := range []struct {
		query    string
		tokensIn int64
	}{
		{"chat=" + url.QueryEscape("telegram:-100123"), 300},
		{"chat=" + url.QueryEscape("telegram:-100123#8"), 200},
		{"chat=discord:777", 800},
		{"chat=777&platform=discord", 800},
	} {
		var rep usageReport
		if code := getJSON(t, ts, "/api/v1/usage?since=24h&"+tc.query, testToken, &rep); code != http.StatusOK || rep.Total.TokensIn != tc.tokensIn {
			t.Errorf("usage?%s = %d, %d tokens in; want %d", tc.query, code, rep.Total.TokensIn, tc.tokensIn)
		}
	}
	var consents struct{ Items []consentJSON }
	if code := getJSON(t, ts, "/api/v1/consents?chat_id="+url.QueryEscape("telegram:-100123"), testToken, &consents); code != http.StatusOK ||
		len(consents.Items) != 1 || consents.Items[0].Tool != "deploy" {
		t.Errorf("consents?chat_id=telegram:-100123 = %d %+v, want the deploy consent only", code, consents.Items)
	}
	var turns struct {
		Items []turnJSON
		Next  string
	}
	if code := getJSON(t, ts, "/api/v1/turns?chat="+url.QueryEscape("telegram:-100123#8"), testToken, &turns); code != http.StatusOK ||
		len(turns.Items) != 1 || turns.Items[0].Chat != "telegram:-100123#8" || turns.Items[0].Status != chat.StatusError {
		t.Errorf("turns?chat=telegram:-100123#8 = %d %+v, want the one failed turn of topic 8", code, turns.Items)
	}

	for _, tc := range []struct{ path, want string }{
		{"/api/v1/tool-calls?chat=slack:C1", `names no platform the bot has`},
		{"/api/v1/tool-calls?chat=web:5f2a9c&platform=telegram", "is on web, but the platform filter says"},
		{"/api/v1/tool-stats?chat=web:", "empty chat id"},
		{"/api/v1/usage?chat=" + url.QueryEscape("web:a b"), `has ' '`},
		{"/api/v1/consents?chat_id=" + url.QueryEscape("telegram:-100123#7"), "use telegram:-100123"},
		{"/api/v1/turns?chat=" + url.QueryEscape("telegram:-100123/u:41"), "filter the user apart"},
		{"/api/v1/turns?status=weird", `status "weird" is not one of`},
	} {
		var e struct{ Error string }
		if code := getJSONAny(t, ts, tc.path, &e); code != http.StatusBadRequest || !strings.Contains(e.Error, tc.want) {
			t.Errorf("GET %s = %d %q, want 400 saying %q", tc.path, code, e.Error, tc.want)
		}
	}

	c, _ := loggedIn(t, ts)
	for _, tc := range []struct{ path, has, hasNot string }{
		{"/admin/?chat=web:5f2a9c", "web_tool", "topic_seven"},
		{"/admin/?chat=" + url.QueryEscape("telegram:-100123#7"), "topic_seven", "topic_eight"},
		{"/admin/stats?chat=" + url.QueryEscape("telegram:-100123#8"), "topic_eight", "topic_seven"},
		{"/admin/usage?since=24h&chat=" + url.QueryEscape("telegram:-100123#7"), "telegram:41", "telegram:42"},
		{"/admin/turns?chat=web:5f2a9c", "namew1", "name41"},
	} {
		code, body := get(t, c, ts.URL+tc.path)
		if code != http.StatusOK || !strings.Contains(body, tc.has) || strings.Contains(body, tc.hasNot) {
			t.Errorf("GET %s = %d; want %s and not %s:\n%s", tc.path, code, tc.has, tc.hasNot, body)
		}
	}
	if code, body := get(t, c, ts.URL+"/admin/?chat=slack:C1"); code != http.StatusBadRequest || !strings.Contains(body, "names no platform the bot has") {
		t.Errorf("calls page with chat=slack:C1 = %d, want 400 saying why:\n%s", code, body)
	}
}

// getJSONAny is getJSON that decodes the body whatever the status, errors included.
func getJSONAny(t *testing.T, ts *httptest.Server, path string, into any) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, ts.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(into); err != nil {
		t.Fatalf("GET %s: the answer is not JSON: %v", path, err)
	}
	return resp.StatusCode
}

// TestTheTurnsPageListsTheLatestAcrossChats: /admin/turns without a chat lists the newest turns
// of every chat (not a 400), each linking to its timeline and to its chat's turns; the filters
// narrow it; the navigation of every page has Turns.
func TestTheTurnsPageListsTheLatestAcrossChats(t *testing.T) {
	st := storetest.Open(t, storetest.SQLite)
	ids := seedChats(t, st)
	_, ts := newTestServer(t, st, testToken)
	c, _ := loggedIn(t, ts)

	code, body := get(t, c, ts.URL+"/admin/turns")
	if code != http.StatusOK {
		t.Fatalf("/admin/turns = %d, want the latest turns:\n%s", code, body)
	}
	listed := listedTurns(body)
	want := []int64{ids[3], ids[2], ids[1], ids[0]}
	if !slices.Equal(listed, want) {
		t.Fatalf("/admin/turns links the timelines of turns %v, want every chat's, newest first: %v\n%s", listed, want, body)
	}
	for _, chatLink := range []string{`href="/admin/turns?chat=telegram%3A-100123%237">telegram:-100123#7<`,
		`href="/admin/turns?chat=web%3A5f2a9c">web:5f2a9c<`, `href="/admin/turns?chat=discord%3A777">discord:777<`} {
		if !strings.Contains(body, chatLink) {
			t.Errorf("/admin/turns lacks the chat link %s:\n%s", chatLink, body)
		}
	}
	if !strings.Contains(body, `<a href="/admin/turns" aria-current="page">Turns</a>`) {
		t.Errorf("the turns page does not mark Turns in the navigation:\n%s", body)
	}
	// Every timeline it links to opens, and links back to its chat's (or thread's) turns, a turn
	// without tool calls too.
	for i, id := range ids {
		code, page := get(t, c, fmt.Sprintf("%s/admin/turns/%d", ts.URL, id))
		if code != http.StatusOK || !strings.Contains(page, fmt.Sprintf("Turn %d", id)) {
			t.Errorf("the timeline of turn %d = %d", id, code)
		}
		back := fmt.Sprintf(`href="%s">turns of %s</a>`, strings.ReplaceAll(turnsOf(seededChats[i].key.Ref()), "&", "&amp;"), seededChats[i].key.Ref())
		if !strings.Contains(page, back) {
			t.Errorf("the timeline of turn %d does not link back with %s:\n%s", id, back, page)
		}
	}

	for _, tc := range []struct {
		query string
		want  []int64
	}{
		{"platform=telegram", []int64{ids[1], ids[0]}},
		{"status=error", []int64{ids[1]}},
		{"chat=" + url.QueryEscape("telegram:-100123#7"), []int64{ids[0]}},
		{"chat=777&platform=discord", []int64{ids[3]}},
		{"since=" + url.QueryEscape(time.Now().UTC().Add(-time.Hour+90*time.Second).Format(time.RFC3339)), []int64{ids[3], ids[2]}},
		{"platform=&chat=&status=&since=&until=&limit=", []int64{ids[3], ids[2], ids[1], ids[0]}},
	} {
		_, body := get(t, c, ts.URL+"/admin/turns?"+tc.query)
		if got := listedTurns(body); !slices.Equal(got, tc.want) {
			t.Errorf("/admin/turns?%s lists %v, want %v", tc.query, got, tc.want)
		}
	}

	// Two to a page: Older goes on, Newest comes back.
	_, body = get(t, c, ts.URL+"/admin/turns?limit=2")
	next := regexp.MustCompile(`rel="next" href="([^"]+)"`).FindStringSubmatch(body)
	if got := listedTurns(body); len(got) != 2 || next == nil {
		t.Fatalf("a page of two lists %v with next %v", got, next)
	}
	_, body = get(t, c, ts.URL+strings.ReplaceAll(next[1], "&amp;", "&"))
	if got := listedTurns(body); !slices.Equal(got, []int64{ids[1], ids[0]}) || !strings.Contains(body, "← Newest") {
		t.Errorf("the second page lists %v, want %v with a link to the newest", got, []int64{ids[1], ids[0]})
	}

	for _, path := range []string{"/admin/", "/admin/stats", "/admin/usage", "/admin/consents", fmt.Sprintf("/admin/turns/%d", ids[0])} {
		if _, page := get(t, c, ts.URL+path); !strings.Contains(page, `<a href="/admin/turns"`) {
			t.Errorf("the navigation of %s has no Turns", path)
		}
	}
	if code, body := get(t, c, ts.URL+"/admin/turns?chat=telegram:"); code != http.StatusBadRequest || !strings.Contains(body, "empty chat id") {
		t.Errorf("/admin/turns?chat=telegram: = %d, want 400 saying the chat id is empty", code)
	}
}

// listedTurns is the turn ids a turns page lists, in order.
func listedTurns(body string) []int64 {
	var out []int64
	for _, m := range regexp.MustCompile(`<a class="timeline" href="/admin/turns/(\d+)">`).FindAllStringSubmatch(body, -1) {
		var id int64
		fmt.Sscan(m[1], &id)
		out = append(out, id)
	}
	return out
}

// TestTheCallsListCountsAndPagesBothWays: the calls list says how many calls match, and its
// pager goes to older pages and back to newer ones, page by page, to the newest (which has no
// Newer); the API gives the same cursors.
func TestTheCallsListCountsAndPagesBothWays(t *testing.T) {
	st := storetest.Open(t, storetest.SQLite)
	seed := seedStore(t, st)
	_, ts := newTestServer(t, st, testToken)
	c, _ := loggedIn(t, ts)
	tools := func(body string) []string {
		var out []string
		for _, m := range regexp.MustCompile(`<a href="/admin/calls/\d+" class="tool">([^<]+)</a>`).FindAllStringSubmatch(body, -1) {
			out = append(out, m[1])
		}
		return out
	}
	link := func(body, rel string) string {
		m := regexp.MustCompile(`rel="` + rel + `" href="([^"]+)"`).FindStringSubmatch(body)
		if m == nil {
			return ""
		}
		return strings.ReplaceAll(m[1], "&amp;", "&")
	}
	pages := [][]string{{"no_such_tool", "search", "current_time"}, {"fetch_url", "fetch_url", "weather"}, {"weather"}}

	_, body := get(t, c, ts.URL+"/admin/?limit=3")
	if !strings.Contains(body, fmt.Sprintf(`id="total">%d calls, <a href="/admin/calls?limit=3&amp;status=failed">4 failed</a><`, len(seed.calls))) {
		t.Errorf("the calls list does not say it holds %d calls, 4 of them failed:\n%s", len(seed.calls), body)
	}
	for i, want := range pages { // older, page by page
		if got := tools(body); !slices.Equal(got, want) {
			t.Fatalf("older page %d lists %v, want %v", i+1, got, want)
		}
		if (link(body, "prev") == "") != (i == 0) {
			t.Errorf("page %d: Newer link %q; want one on every page but the newest", i+1, link(body, "prev"))
		}
		if next := link(body, "next"); next != "" {
			_, body = get(t, c, ts.URL+next)
		} else if i != len(pages)-1 {
			t.Fatalf("page %d has no Older link", i+1)
		}
	}
	for i := len(pages) - 2; i >= 0; i-- { // and back, newer page by page
		prev := link(body, "prev")
		if prev == "" {
			t.Fatalf("page %d has no Newer link", i+2)
		}
		_, body = get(t, c, ts.URL+prev)
		if got := tools(body); !slices.Equal(got, pages[i]) {
			t.Fatalf("newer page %d lists %v, want %v", i+1, got, pages[i])
		}
	}
	if link(body, "prev") != "" || link(body, "next") == "" {
		t.Errorf("back on the newest page: Newer %q, Older %q; want no Newer and an Older", link(body, "prev"), link(body, "next"))
	}

	_, body = get(t, c, ts.URL+"/admin/?status=error&limit=1")
	if !strings.Contains(body, `id="total">2 calls<`) {
		t.Errorf("the filtered list does not say 2 calls match it:\n%s", body)
	}

	var first, second page2
	getJSON(t, ts, "/api/v1/tool-calls?limit=3", testToken, &first)
	getJSON(t, ts, "/api/v1/tool-calls?limit=3&cursor="+url.QueryEscape(first.Next), testToken, &second)
	var back page2
	getJSON(t, ts, "/api/v1/tool-calls?limit=3&after="+url.QueryEscape(second.Prev), testToken, &back)
	if first.Prev != "" || second.Prev == "" || !slices.Equal(names(back.Items), names(first.Items)) {
		t.Errorf("API: first prev %q, second prev %q, after= gives %v; want %v", first.Prev, second.Prev, names(back.Items), names(first.Items))
	}
	var e struct{ Error string }
	if code := getJSONAny(t, ts, "/api/v1/tool-calls?cursor="+url.QueryEscape(first.Next)+"&after="+url.QueryEscape(second.Prev), &e); code != http.StatusBadRequest {
		t.Errorf("cursor and after together = %d %q, want 400", code, e.Error)
	}
}

// page2 is a page of the tool-calls API with both cursors.
type page2 struct {
	Items      []audit.Record `json:"items"`
	Next, Prev string
}

// TestTheCallsListLinksEachChatToItsCalls: the chat a row prints, a forum topic with its thread
// as the turns page prints it, links to the calls of that chat or topic, through the same
// reference a filter takes.
func TestTheCallsListLinksEachChatToItsCalls(t *testing.T) {
	st := storetest.Open(t, storetest.SQLite)
	seedChats(t, st)
	_, ts := newTestServer(t, st, testToken)
	c, _ := loggedIn(t, ts)
	_, body := get(t, c, ts.URL+"/admin/calls")
	for _, tc := range []struct{ chat, has, hasNot string }{
		{"web:5f2a9c", "web_tool", "topic_seven"},
		{"telegram:-100123#7", "topic_seven", "topic_eight"},
	} {
		m := regexp.MustCompile(`<a class="mono chat" href="([^"]+)"[^>]*>` + regexp.QuoteMeta(tc.chat) + `</a>`).FindStringSubmatch(body)
		if m == nil {
			t.Errorf("the calls list prints no link for %s:\n%s", tc.chat, body)
			continue
		}
		code, page := get(t, c, ts.URL+strings.ReplaceAll(m[1], "&amp;", "&"))
		if code != http.StatusOK || !strings.Contains(page, tc.has) || strings.Contains(page, tc.hasNot) {
			t.Errorf("the link of %s (%s) = %d; want %s and not %s:\n%s", tc.chat, m[1], code, tc.has, tc.hasNot, page)
		}
	}
}
