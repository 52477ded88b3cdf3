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
	"sync/atomic"
	"testing"
	"time"

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
	if code, out := upload("big.md", strings.Repeat("word ", 500)); code != http.StatusRequestEntityTooLarge || out["limit"] != "knowledge.max_file_bytes" || out["limit_value"] != 2000.0 {
		t.Fatalf("POST an oversized document: %d %v, want 413 naming knowledge.max_file_bytes and its value", code, out)
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

// countingBody is an upload's body made as it is sent (none of it held in memory), counting what
// the client was asked for.
type countingBody struct {
	r    io.Reader
	sent atomic.Int64
}

func (c *countingBody) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.sent.Add(int64(n))
	return n, err
}

// zeros is an endless run of a byte.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'a'
	}
	return len(p), nil
}

// hugeUpload is a multipart form whose file "huge.md" has size bytes, made as it is read.
func hugeUpload(size int64) (string, *countingBody) {
	const boundary = "b0undary"
	head := "--" + boundary + "\r\nContent-Disposition: form-data; name=\"file\"; filename=\"huge.md\"\r\nContent-Type: text/markdown\r\n\r\n"
	tail := "\r\n--" + boundary + "--\r\n"
	return "multipart/form-data; boundary=" + boundary,
		&countingBody{r: io.MultiReader(strings.NewReader(head), io.LimitReader(zeros{}, size), strings.NewReader(tail))}
}

// An upload far over knowledge.max_file_bytes is refused naming the limit and its value, in the
// API's JSON, before its body is read when its length is declared and after the limit's worth
// when it is not; the page says the same; nothing is stored.
func TestAnUploadFarOverTheLimitIsRefusedNamingItWithoutReadingItsBody(t *testing.T) {
	st := storetest.Open(t, storetest.SQLite)
	w, r := st.Pools()
	const maxFile = 2000
	k, err := knowledge.New(context.Background(), knowledge.Options{Dialect: st.Driver(), W: w, R: r,
		Limits: knowledge.Limits{MaxFileBytes: maxFile, MaxPages: 10, MaxTextBytes: 1 << 20, MaxDocuments: 10},
		Bases:  []knowledge.Base{{Name: "handbook", Mode: knowledge.ModeTool}}})
	if err != nil {
		t.Fatal(err)
	}
	_, ts := newTestServer(t, st, testToken, func(o *Options) { o.Knowledge = k; o.KnowledgeUploadBytes = maxFile + 64<<10 })
	// A client that waits for "100 Continue" before it sends a body, as curl does for a large
	// one: a server that refuses from the headers never receives it.
	client := &http.Client{Transport: &http.Transport{ExpectContinueTimeout: time.Minute}}
	for _, tc := range []struct {
		name     string
		declared bool
		size     int64
	}{
		{"declared length of 1 GB", true, 1 << 30},
		{"chunked, 8 MB", false, 8 << 20},
	} {
		ct, body := hugeUpload(tc.size)
		req, _ := http.NewRequest(http.MethodPost, ts.URL+"/api/v1/knowledge/handbook/documents", body)
		req.Header.Set("Content-Type", ct)
		req.Header.Set("Authorization", "Bearer "+testToken)
		if tc.declared {
			req.ContentLength = tc.size + 200
			req.Header.Set("Expect", "100-continue")
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var out struct {
			Error      string `json:"error"`
			Limit      string `json:"limit"`
			LimitValue int64  `json:"limit_value"`
		}
		decodeErr := json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge || decodeErr != nil || out.Limit != "knowledge.max_file_bytes" ||
			out.LimitValue != maxFile || !strings.Contains(out.Error, "knowledge.max_file_bytes (2000 bytes)") {
			t.Fatalf("%s: %d %+v (%v), want 413 in JSON naming knowledge.max_file_bytes and its value", tc.name, resp.StatusCode, out, decodeErr)
		}
		if tc.declared && body.sent.Load() > 0 {
			t.Errorf("%s: the client was asked for %d bytes of a body the headers already refused", tc.name, body.sent.Load())
		}
	}
	c, _ := loggedIn(t, ts)
	c.Transport = &http.Transport{ExpectContinueTimeout: time.Minute}
	ct, body := hugeUpload(1 << 30)
	req, _ := http.NewRequest(http.MethodPost, ts.URL+"/admin/knowledge/handbook/documents", body)
	req.Header.Set("Content-Type", ct)
	req.Header.Set("Expect", "100-continue")
	req.ContentLength = 1<<30 + 200
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), "knowledge.max_file_bytes (2000 bytes)") {
		t.Fatalf("the page's upload of 1 GB: %d\n%s", resp.StatusCode, page)
	}
	if docs, _ := k.Documents(context.Background(), "handbook"); len(docs) != 0 {
		t.Fatalf("refused uploads stored %+v", docs)
	}
}

// A base config.toml no longer names (renamed there) keeps its documents: the page lists them
// under the old name with the command that moves them, the API lists them as orphaned and
// deletes them, and a base's upload and search are not offered under the old name.
func TestTheDocumentsOfABaseNoLongerConfiguredAreShownWithTheFix(t *testing.T) {
	st := storetest.Open(t, storetest.SQLite)
	w, r := st.Pools()
	open := func(name string) *knowledge.Knowledge {
		k, err := knowledge.New(context.Background(), knowledge.Options{Dialect: st.Driver(), W: w, R: r,
			Limits: knowledge.Limits{MaxFileBytes: 2000, MaxPages: 10, MaxTextBytes: 1 << 20, MaxDocuments: 10},
			Bases:  []knowledge.Base{{Name: name, Mode: knowledge.ModeTool}}})
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	d, err := open("handbook").Add(context.Background(), "handbook", "leave.md", strings.NewReader("# Leave\n\nSixteen weeks."), "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	k := open("staff")
	_, ts := newTestServer(t, st, testToken, func(o *Options) { o.Knowledge = k; o.KnowledgeUploadBytes = 1 << 20 })
	c, _ := loggedIn(t, ts)
	code, page := get(t, c, ts.URL+"/admin/knowledge")
	if code != http.StatusOK || !strings.Contains(page, "handbook <span class=\"muted\">(not in config.toml)</span>") ||
		!strings.Contains(page, "leave.md") || !strings.Contains(page, "bot knowledge rename -from handbook -to NEW_NAME") ||
		!strings.Contains(page, "/admin/knowledge/handbook/documents/"+itoa(d.ID)+"/delete") {
		t.Fatalf("knowledge page with handbook renamed staff: %d\n%s", code, page)
	}
	var list struct {
		Items  []knowledge.Document `json:"items"`
		Orphan bool                 `json:"orphan"`
		Fix    string               `json:"fix"`
	}
	if code := getJSON(t, ts, "/api/v1/knowledge/handbook/documents", testToken, &list); code != http.StatusOK || !list.Orphan ||
		len(list.Items) != 1 || !strings.Contains(list.Fix, "bot knowledge rename -from handbook") {
		t.Fatalf("GET the old base's documents: %d %+v", code, list)
	}
	if code := getJSON(t, ts, "/api/v1/knowledge/handbook/search?q=weeks", testToken, &list); code != http.StatusNotFound {
		t.Errorf("a search of the old base: %d, want 404 (it is never searched)", code)
	}
	req, _ := http.NewRequest(http.MethodDelete, ts.URL+"/api/v1/knowledge/handbook/documents/"+itoa(d.ID), nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE the old base's document: %v %v, want 204", resp, err)
	}
	resp.Body.Close()
	if _, page := get(t, c, ts.URL+"/admin/knowledge"); strings.Contains(page, "not in config.toml") {
		t.Fatalf("the page still lists an orphaned base after its last document was deleted:\n%s", page)
	}
}
