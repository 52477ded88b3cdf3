package admin

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"relaybot/chat"
	"relaybot/store"
	"relaybot/store/storetest"
)

// seedConversations adds to seedStore's Telegram conversation a web one whose turn failed and
// whose message carries a secret, and a stopped turn with reasoning in a Discord thread; it
// returns the three conversations' ids (Telegram, web, Discord).
func seedConversations(t *testing.T, st *store.Database) (seeded, [3]int64) {
	t.Helper()
	ctx := context.Background()
	seed := seedStore(t, st)
	tg, err := st.Turns.Turn(ctx, seed.turnID)
	if err != nil {
		t.Fatal(err)
	}
	ids := [3]int64{tg.ConversationID}
	for i, tc := range []struct {
		key    chat.Key
		ask    string
		end    store.TurnEnd
		person string
	}{
		{chat.Key{Platform: chat.Web, ChatID: "w1"}, "my token=abc123secret, why does the deploy fail?",
			store.TurnEnd{Status: store.TurnError, Failure: chat.FailureUnavailable, Error: "model timed out"}, "wes"},
		{chat.Key{Platform: chat.Discord, ChatID: "9", ThreadID: "9"}, "write a long poem",
			store.TurnEnd{Status: store.TurnCancelled, Messages: []chat.Message{{Role: store.RoleAssistant,
				Content: "Roses are", Reasoning: "a poem about roses"}}}, "dora"},
	} {
		conv, err := st.Conversations.Conversation(ctx, tc.key)
		if err != nil {
			t.Fatal(err)
		}
		id, err := st.Turns.StartTurn(ctx, store.TurnStart{ConversationID: conv.ID, UserID: "id-" + tc.person, UserName: tc.person,
			UserMessage: chat.Message{Role: store.RoleUser, Content: tc.ask}})
		if err != nil {
			t.Fatal(err)
		}
		tc.end.TurnID = id
		if err := st.Turns.FinishTurn(ctx, tc.end); err != nil {
			t.Fatal(err)
		}
		ids[i+1] = conv.ID
	}
	return seed, ids
}

type conversationsAnswer struct {
	Items []struct {
		ID      int64    `json:"id"`
		Chat    string   `json:"chat"`
		Opening string   `json:"opening"`
		People  []string `json:"people"`
		Failed  int      `json:"failed"`
		URL     string   `json:"url"`
	} `json:"items"`
	Older string `json:"older"`
	Newer string `json:"newer"`
}

// TestTheConversationsAPIListsFiltersAndSearches: the list is newest first across platforms and
// filters as the page does; the search finds a member's words and the bot's, links to the
// conversation at the hit and never shows a secret; bad filters are 400s naming the problem.
func TestTheConversationsAPIListsFiltersAndSearches(t *testing.T) {
	st := storetest.Open(t, storetest.SQLite)
	_, ids := seedConversations(t, st)
	_, ts := newTestServer(t, st, testToken)
	var all conversationsAnswer
	if code := getJSON(t, ts, "/api/v1/conversations", testToken, &all); code != http.StatusOK {
		t.Fatalf("GET /api/v1/conversations = %d", code)
	}
	if len(all.Items) != 3 || all.Items[0].ID != ids[2] || all.Items[1].ID != ids[1] || all.Items[2].ID != ids[0] {
		t.Fatalf("conversations = %+v, want Discord, web, Telegram", all.Items)
	}
	web := all.Items[1]
	if web.Chat != "web:w1" || web.Failed != 1 || strings.Contains(web.Opening, "abc123secret") || !strings.Contains(web.Opening, "deploy") ||
		web.URL != "/admin/conversations/"+strconv.FormatInt(ids[1], 10) {
		t.Errorf("the web conversation is listed as %+v (its secret must not show)", web)
	}
	for _, tc := range []struct {
		query string
		want  []int64
	}{
		{"status=failed", []int64{ids[1]}},
		{"status=stopped", []int64{ids[2]}},
		{"chat=telegram:100", []int64{ids[0]}},
		{"chat=discord:9%239", []int64{ids[2]}},
		{"platform=web", []int64{ids[1]}},
		{"person=alice", []int64{ids[0]}},
		{"since=1h", []int64{ids[2], ids[1], ids[0]}},
		{"limit=1&before=" + strconv.FormatInt(1<<40, 10), []int64{ids[2]}},
	} {
		var got conversationsAnswer
		if code := getJSON(t, ts, "/api/v1/conversations?"+tc.query, testToken, &got); code != http.StatusOK {
			t.Errorf("?%s = %d", tc.query, code)
			continue
		}
		var gotIDs []int64
		for _, it := range got.Items {
			gotIDs = append(gotIDs, it.ID)
		}
		if !slices.Equal(gotIDs, tc.want) {
			t.Errorf("?%s lists %v, want %v", tc.query, gotIDs, tc.want)
		}
	}
	for _, bad := range []string{"status=lost", "chat=nowhere:1", "q=deploy", "before=x", "before=3&after=2", "colour=red"} {
		if code := getJSON(t, ts, "/api/v1/conversations?"+bad, testToken, nil); code != http.StatusBadRequest {
			t.Errorf("?%s = %d, want 400", bad, code)
		}
	}

	var hits struct {
		Items []struct {
			ConversationID int64     `json:"conversation_id"`
			Role           chat.Role `json:"role"`
			Text           string    `json:"text"`
			URL            string    `json:"url"`
		} `json:"items"`
	}
	if code := getJSON(t, ts, "/api/v1/conversations/search?q=SUNNY+paris", testToken, &hits); code != http.StatusOK {
		t.Fatalf("search = %d", code)
	}
	if len(hits.Items) != 1 || hits.Items[0].Role != chat.RoleAssistant || hits.Items[0].Text != "It is sunny in Paris." ||
		!strings.HasPrefix(hits.Items[0].URL, "/admin/conversations/"+strconv.FormatInt(ids[0], 10)+"?from=") {
		t.Errorf("search for the bot's words = %+v", hits.Items)
	}
	if code := getJSON(t, ts, "/api/v1/conversations/search?q=abc123secret", testToken, &hits); code != http.StatusOK {
		t.Fatalf("search = %d", code)
	}
	if len(hits.Items) != 1 || strings.Contains(hits.Items[0].Text, "abc123secret") || !strings.Contains(hits.Items[0].Text, "[redacted]") {
		t.Errorf("a message with a secret is shown as %+v, want it found with the secret redacted", hits.Items)
	}
	for _, bad := range []string{"", "q=%3F%21", "q=paris&status=lost"} {
		if code := getJSON(t, ts, "/api/v1/conversations/search?"+bad, testToken, nil); code != http.StatusBadRequest {
			t.Errorf("search ?%s = %d, want 400", bad, code)
		}
	}
	if code := getJSON(t, ts, "/api/v1/conversations/search?q=paris", "", nil); code != http.StatusUnauthorized {
		t.Errorf("search without the token = %d, want 401", code)
	}
}

// TestTheConversationPageShowsItAsTheMemberSawIt: the member's question, the tool lines from
// the audit log with a failed call's reason, a tool's question and its answer, the answer, the
// reasoning folded, a failed turn's "not answered" line and a stopped turn's marker, each turn
// linking to its timeline; the list page has a search box and the search marks the words.
func TestTheConversationPageShowsItAsTheMemberSawIt(t *testing.T) {
	st := storetest.Open(t, storetest.SQLite)
	seed, ids := seedConversations(t, st)
	_, ts := newTestServer(t, st, testToken)
	c, _ := loggedIn(t, ts)
	code, body := get(t, c, ts.URL+"/admin/conversations/"+strconv.FormatInt(ids[0], 10))
	if code != http.StatusOK {
		t.Fatalf("conversation page = %d: %s", code, body)
	}
	for _, want := range []string{
		"what is the weather in Paris?",
		`<span class="mono tool">weather</span>`,
		"upstream 502",
		"Which station?",
		"It is sunny in Paris.",
		`href="/admin/turns/` + strconv.FormatInt(seed.turnID, 10) + `"`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the Telegram conversation's page lacks %q", want)
		}
	}
	_, body = get(t, c, ts.URL+"/admin/conversations/"+strconv.FormatInt(ids[1], 10))
	if !strings.Contains(body, "not answered: unavailable") || strings.Contains(body, "abc123secret") {
		t.Errorf("the failed web turn's page lacks its failure line or shows its secret")
	}
	_, body = get(t, c, ts.URL+"/admin/conversations/"+strconv.FormatInt(ids[2], 10))
	if !strings.Contains(body, `<details class="reasoning"><summary>Reasoning</summary>`) || !strings.Contains(body, "a poem about roses") ||
		!strings.Contains(body, `class="marker stopped"`) {
		t.Errorf("the stopped Discord turn's page lacks its folded reasoning or its stopped marker")
	}
	if code, _ := get(t, c, ts.URL+"/admin/conversations/999999"); code != http.StatusNotFound {
		t.Errorf("an unknown conversation = %d, want 404", code)
	}
	code, body = get(t, c, ts.URL+"/admin/conversations")
	if code != http.StatusOK || !strings.Contains(body, `type="search"`) || !strings.Contains(body, "write a long poem") {
		t.Errorf("the list page = %d, want a search box and the conversations", code)
	}
	_, body = get(t, c, ts.URL+"/admin/conversations?"+url.Values{"q": {"sunny"}}.Encode())
	if !strings.Contains(body, "<mark>sunny</mark>") || !strings.Contains(body, "#m") {
		t.Errorf("the search page does not mark the word found or link to the message")
	}
	hit := regexp.MustCompile(`class="hitlink" href="([^"]+)#m(\d+)"`).FindStringSubmatch(body)
	if hit == nil {
		t.Fatalf("no link to the hit on the search page")
	}
	code, body = get(t, c, ts.URL+strings.ReplaceAll(hit[1], "&amp;", "&"))
	if code != http.StatusOK || !strings.Contains(body, `id="m`+hit[2]+`"`) {
		t.Errorf("the hit's link %s = %d, without the message it points at", hit[1], code)
	}
	if code, _ := get(t, c, ts.URL+"/admin/conversations?status=lost"); code != http.StatusBadRequest {
		t.Errorf("a bad status on the page = %d, want 400", code)
	}
}
