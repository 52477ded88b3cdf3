package admin

import (
	"regexp"
	"strings"
	"testing"

	"relaybot/store/storetest"
)

// The calls list finds calls by words of their tool name, arguments or result, within the
// filter the search box keeps; grouped by turn, each turn heads its calls with their count.
func TestTheCallsListSearchesAndGroupsByTurn(t *testing.T) {
	st := storetest.Open(t, storetest.SQLite)
	seed := seedStore(t, st)
	story := seedStory(t, st)
	_, ts := newTestServer(t, st, testToken)
	c, _ := loggedIn(t, ts)
	rows := func(body string) int { return strings.Count(body, `class="rowlink"`) }
	for _, tc := range []struct {
		query string
		want  int
	}{
		{"q=FETCH", 3},                // fetch_url, whatever the case: two calls of one turn, one of the other
		{"q=%22ok%22%3Atrue", 3},      // "ok":true in the results of the three calls that answered
		{"q=paris", 9},                // the arguments of every call
		{"q=fetch&status=timeout", 1}, // within a filter
		{"q=100%25", 0},               // a percent sign is a percent sign
	} {
		code, body := get(t, c, ts.URL+"/admin/calls?"+tc.query)
		if code != 200 || rows(body) != tc.want {
			t.Errorf("/admin/calls?%s = %d with %d calls, want %d", tc.query, code, rows(body), tc.want)
		}
	}
	_, body := get(t, c, ts.URL+"/admin/calls?status=timeout&q=fetch")
	if !strings.Contains(body, `<input type="hidden" name="status" value="timeout">`) || !strings.Contains(body, `name="q" value="fetch"`) {
		t.Error("the search box does not keep the filter it searches within")
	}
	_, body = get(t, c, ts.URL+"/admin/calls?group=turn")
	heads := regexp.MustCompile(`<tr class="grouphead"><th colspan="8"><a href="/admin/turns/(\d+)">Turn \d+</a> <span class="muted">· (\d+) calls?(?:, (\d+) failed)?</span>`).FindAllStringSubmatch(body, -1)
	if len(heads) != 2 || heads[0][1] != itoa(story) || heads[0][2] != "2" || heads[0][3] != "1" ||
		heads[1][1] != itoa(seed.turnID) || heads[1][2] != "7" || heads[1][3] != "4" {
		t.Errorf("grouped by turn the page heads %v, want turn %d (2 calls, 1 failed) then turn %d (7 calls, 4 failed)", heads, story, seed.turnID)
	}
	if !strings.Contains(body, `id="total">9 calls`) || rows(body) != 9 {
		t.Errorf("grouped, the page lists %d calls, want all 9 under their turns", rows(body))
	}
	if code, _ := get(t, c, ts.URL+"/admin/calls?group=chat"); code != 400 {
		t.Errorf("group=chat = %d, want 400", code)
	}
	var api page
	if code := getJSON(t, ts, "/api/v1/tool-calls?q=fetch", testToken, &api); code != 200 || len(api.Items) != 3 {
		t.Errorf("the API's q=fetch = %d with %d calls, want 3", code, len(api.Items))
	}
}
