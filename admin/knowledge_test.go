package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"relaybot/chat"
	"relaybot/knowledge/extract"
	"relaybot/pipeline/knowledge"
	"relaybot/store/storetest"
)

// multipartBody is a form of fields (in order) and then the file.
func multipartBody(t *testing.T, name, content string, fields ...string) (string, *bytes.Buffer) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for i := 0; i+1 < len(fields); i += 2 {
		mw.WriteField(fields[i], fields[i+1])
	}
	fw, err := mw.CreateFormFile("file", name)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(fw, content)
	mw.Close()
	return mw.FormDataContentType(), &buf
}

// The knowledge API adds a document (multipart field "file"), refuses one over a limit naming
// it, lists, searches and deletes; the page uploads with the session's CSRF token, lists, tries
// a search, says when searches are by keywords only, and deletes.
func TestKnowledgeDocumentsAreUploadedListedSearchedAndDeleted(t *testing.T) {
	st := storetest.Open(t, storetest.SQLite)
	w, r := st.Pools()
	k, err := knowledge.New(context.Background(), knowledge.Options{Dialect: st.Driver(), W: w, R: r,
		Limits: knowledge.Limits{MaxFileBytes: 2000, MaxPages: 10, MaxTextBytes: 1 << 20, MaxDocuments: 10},
		Chunks: extract.ChunkOptions{TargetChars: 300},
		Bases:  []knowledge.Base{{Name: "handbook", Description: "the handbook", Chats: []chat.Ref{{Platform: chat.Telegram, ChatID: "-100"}}, Mode: knowledge.ModeTool, MaxTokens: 500}}})
	if err != nil {
		t.Fatal(err)
	}
	_, ts := newTestServer(t, st, testToken, func(o *Options) { o.Knowledge = k; o.KnowledgeUploadBytes = 1 << 20 })
	upload := func(name, content string) (int, map[string]any) {
		t.Helper()
		ct, body := multipartBody(t, name, content)
		req, _ := http.NewRequest(http.MethodPost, ts.URL+"/api/v1/knowledge/handbook/documents", body)
		req.Header.Set("Content-Type", ct)
		req.Header.Set("Authorization", "Bearer "+testToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	code, doc := upload("leave.md", "# Leave\n\n## Parental leave\n\nParents get sixteen weeks of parental leave.")
	if code != http.StatusCreated || doc["name"] != "leave.md" || doc["state"] != "ready" {
		t.Fatalf("POST a document: %d %v", code, doc)
	}
	if code, out := upload("big.md", strings.Repeat("word ", 500)); code != http.StatusUnprocessableEntity || out["limit"] != "knowledge.max_file_bytes" {
		t.Fatalf("POST an oversized document: %d %v, want 422 naming knowledge.max_file_bytes", code, out)
	}
	var list struct {
		Items        []knowledge.Document `json:"items"`
		KeywordsOnly bool                 `json:"keywords_only"`
	}
	if code := getJSON(t, ts, "/api/v1/knowledge/handbook/documents", testToken, &list); code != http.StatusOK || len(list.Items) != 1 || !list.KeywordsOnly {
		t.Fatalf("GET documents: %d %+v, want leave.md alone, keywords only", code, list)
	}
	var found struct {
		Items []knowledge.Hit `json:"items"`
	}
	if code := getJSON(t, ts, "/api/v1/knowledge/handbook/search?q=parental+leave", testToken, &found); code != http.StatusOK ||
		len(found.Items) == 0 || found.Items[0].Where() != "leave.md › Leave › Parental leave" {
		t.Fatalf("GET search: %d %+v", code, found)
	}
	if code := getJSON(t, ts, "/api/v1/knowledge/nope/documents", testToken, &list); code != http.StatusNotFound {
		t.Errorf("an unknown base: %d, want 404", code)
	}

	c, csrf := loggedIn(t, ts)
	postForm := func(token string) *http.Response {
		t.Helper()
		ct, body := multipartBody(t, "wifi.md", "# Wifi\n\nThe wifi password is on the fridge.", "csrf", token)
		resp, err := c.Post(ts.URL+"/admin/knowledge/handbook/documents", ct, body)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if resp := postForm("forged"); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("an upload with a forged CSRF token: %d", resp.StatusCode)
	}
	if docs, _ := k.Documents(context.Background(), "handbook"); len(docs) != 1 {
		t.Fatalf("a forged upload stored a document: %+v", docs)
	}
	postForm(csrf)
	code, page := get(t, c, ts.URL+"/admin/knowledge?base=handbook&q=wifi+password")
	if code != http.StatusOK || !strings.Contains(page, "wifi.md") || !strings.Contains(page, "leave.md") ||
		!strings.Contains(page, "full-text (keywords) only") || !strings.Contains(page, "on the fridge") || !strings.Contains(page, "telegram:-100") {
		t.Fatalf("knowledge page: %d\n%s", code, page)
	}
	resp, err := c.PostForm(ts.URL+"/admin/knowledge/handbook/documents/"+itoa(int64(doc["id"].(float64)))+"/delete", url.Values{"csrf": {csrf}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	req, _ := http.NewRequest(http.MethodDelete, ts.URL+"/api/v1/knowledge/handbook/documents/"+itoa(int64(doc["id"].(float64))), nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("DELETE a document the page deleted: %v %v, want 404", resp, err)
	}
	if code := getJSON(t, ts, "/api/v1/knowledge/handbook/search?q=parental+leave", testToken, &found); code != http.StatusOK || len(found.Items) != 0 {
		t.Fatalf("a deleted document is still found: %+v", found)
	}
}
