package admin

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"relaybot/chat"
	"relaybot/pipeline/memory"
	"relaybot/store/storetest"
)

// The Memory page shows one person's facts with where each was learned, its source message and
// who wrote it, and the audit of writes and deletes; its Delete button (with the session's CSRF
// token) deletes one; the API lists a person's facts and deletes one by id, and nobody else's
// facts are listed with them.
func TestMemoriesAreListedPerPersonAndDeleted(t *testing.T) {
	st := storetest.Open(t, storetest.SQLite)
	ctx := context.Background()
	w, r := st.Pools()
	mem, err := memory.New(ctx, memory.Options{Dialect: st.Driver(), W: w, R: r})
	if err != nil {
		t.Fatal(err)
	}
	ann := chat.User{Platform: chat.Telegram, ID: "42"}
	bob := chat.User{Platform: chat.Telegram, ID: "43"}
	dm := memory.Place{Chat: chat.Ref{Platform: chat.Telegram, ChatID: "42"}, Private: true}
	cat, err := mem.Remember(ctx, ann, dm, "Has a cat called Tom", memory.Source{Turn: 7, Message: "m-41", Actor: "gpt-test"}, memory.PathExtraction, nil)
	if err != nil {
		t.Fatal(err)
	}
	oslo, err := mem.Remember(ctx, ann, dm, "Lives in Oslo", memory.Source{Actor: "telegram:42"}, memory.PathTool, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mem.Remember(ctx, bob, dm, "Plays the cello", memory.Source{}, memory.PathTool, nil); err != nil {
		t.Fatal(err)
	}
	_, ts := newTestServer(t, st, testToken, func(o *Options) { o.Memory = mem })
	c, csrf := loggedIn(t, ts)

	code, body := get(t, c, ts.URL+"/admin/memories?user=telegram:42")
	if code != http.StatusOK || !strings.Contains(body, "Has a cat called Tom") || !strings.Contains(body, "turn 7") ||
		!strings.Contains(body, "m-41") || !strings.Contains(body, "gpt-test") || strings.Contains(body, "cello") {
		t.Fatalf("memories page: %d\n%s", code, body)
	}
	if code, _ := get(t, c, ts.URL+"/admin/memories?user=nobody"); code != http.StatusBadRequest {
		t.Errorf("a bad user: %d, want 400", code)
	}
	post := func(id int64, token string) {
		t.Helper()
		resp, err := c.PostForm(ts.URL+"/admin/memories/"+itoa(id)+"/forget", url.Values{"csrf": {token}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	post(cat.ID, "forged")
	if list, _ := mem.List(ctx, ann); len(list) != 2 {
		t.Fatalf("a forged CSRF token deleted a fact: %d left", len(list))
	}
	post(cat.ID, csrf)
	if list, _ := mem.List(ctx, ann); len(list) != 1 || list[0].ID != oslo.ID {
		t.Fatalf("after the delete button: %+v", list)
	}
	if _, body := get(t, c, ts.URL+"/admin/memories?user=telegram:42"); !strings.Contains(body, "delete") || !strings.Contains(body, "admin page") {
		t.Errorf("the page does not show the delete in the audit:\n%s", body)
	}

	var got struct {
		Items []memoryJSON `json:"items"`
	}
	if code := getJSON(t, ts, "/api/v1/memories?user=telegram:42", testToken, &got); code != http.StatusOK || len(got.Items) != 1 ||
		got.Items[0].Fact != "Lives in Oslo" || got.Items[0].Path != "tool" || got.Items[0].User != "telegram:42" {
		t.Fatalf("GET /api/v1/memories: %d %+v", code, got)
	}
	del := func() int {
		req, _ := http.NewRequest(http.MethodDelete, ts.URL+"/api/v1/memories/"+itoa(oslo.ID), nil)
		req.Header.Set("Authorization", "Bearer "+testToken)
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := del(); code != http.StatusNoContent {
		t.Fatalf("DELETE: %d", code)
	}
	if code := del(); code != http.StatusNotFound {
		t.Fatalf("DELETE again: %d, want 404", code)
	}
	if list, _ := mem.List(ctx, bob); len(list) != 1 {
		t.Errorf("bob's fact went with ann's: %+v", list)
	}
}
