package discord

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"slices"
	"strings"
	"testing"
	"time"
)

func do(t *testing.T, s *Server, method, path, auth, body string) (*http.Response, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, s.APIBase()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	_ = json.Unmarshal(buf.Bytes(), &out)
	return resp, out
}

func TestChannelBudgetAndErrors(t *testing.T) {
	s := New(Config{})
	defer s.Close()
	s.AddChannel(Channel{ID: "1", Type: ChannelDM})
	auth := "Bot " + s.Token()
	if resp, _ := do(t, s, "POST", "/channels/1/messages", "Bot wrong", `{"content":"x"}`); resp.StatusCode != 401 {
		t.Errorf("wrong token: HTTP %d, want 401", resp.StatusCode)
	}
	_, first := do(t, s, "POST", "/channels/1/messages", auth, `{"content":"one"}`)
	id, _ := first["id"].(string)
	for i := 0; i < 4; i++ { // creates and edits share the bucket: 1 create + 4 edits = 5
		resp, _ := do(t, s, "PATCH", "/channels/1/messages/"+id, auth, `{"content":"edit"}`)
		if resp.StatusCode != 200 {
			t.Fatalf("edit %d: HTTP %d", i, resp.StatusCode)
		}
	}
	resp, body := do(t, s, "POST", "/channels/1/messages", auth, `{"content":"six"}`)
	if resp.StatusCode != 429 || resp.Header.Get("X-RateLimit-Remaining") != "0" || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("sixth request: HTTP %d headers %v, want 429 with rate-limit headers", resp.StatusCode, resp.Header)
	}
	if ra, _ := body["retry_after"].(float64); ra <= 0 || ra > 5 {
		t.Errorf("retry_after = %v", body["retry_after"])
	}
	if got := s.Messages("1"); len(got) != 1 || got[0].Content != "edit" || got[0].Edits != 4 {
		t.Errorf("channel state = %+v", got)
	}
	if err := s.DeleteMessage(id); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	s.buckets = map[string]*bucket{} // a new window
	s.mu.Unlock()
	if resp, body := do(t, s, "PATCH", "/channels/1/messages/"+id, auth, `{"content":"x"}`); resp.StatusCode != 404 || body["code"] != float64(codeUnknownMessage) {
		t.Errorf("edit of a deleted message: HTTP %d %v", resp.StatusCode, body)
	}
	s.FailNext(RouteCreateMessage, 503, 1)
	if resp, _ := do(t, s, "POST", "/channels/1/messages", auth, `{"content":"x"}`); resp.StatusCode != 503 {
		t.Errorf("injected fault: HTTP %d", resp.StatusCode)
	}
	if resp, _ := do(t, s, "POST", "/channels/1/messages", auth, `{"content":"`+strings.Repeat("é", 2001)+`"}`); resp.StatusCode != 400 {
		t.Errorf("2001 characters: HTTP %d, want 400", resp.StatusCode)
	}
	if n := len(s.CallsTo(RouteCreateMessage, RouteEditMessage)); n != 10 {
		t.Errorf("recorded %d message calls, want 10", n)
	}
}

func TestGlobalLimit(t *testing.T) {
	s := New(Config{GlobalN: 3, GlobalWindow: time.Minute})
	defer s.Close()
	for i := 0; i < 3; i++ {
		if resp, _ := do(t, s, "GET", "/gateway/bot", "Bot "+s.Token(), ""); resp.StatusCode != 200 {
			t.Fatalf("request %d: HTTP %d", i, resp.StatusCode)
		}
	}
	resp, body := do(t, s, "GET", "/gateway", "Bot "+s.Token(), "")
	if resp.StatusCode != 429 || body["global"] != true || resp.Header.Get("X-RateLimit-Global") != "true" {
		t.Errorf("fourth request: HTTP %d %v, want a global 429", resp.StatusCode, body)
	}
}

// doMultipart sends payload as payload_json with files as files[n] parts.
func doMultipart(t *testing.T, s *Server, method, path, payload string, files map[string][]byte) (*http.Response, map[string]any) {
	t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	if err := mw.WriteField("payload_json", payload); err != nil {
		t.Fatal(err)
	}
	names := slices.Sorted(maps.Keys(files))
	for i, name := range names {
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="files[%d]"; filename=%q`, i, name))
		h.Set("Content-Type", "image/png")
		w, err := mw.CreatePart(h)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = w.Write(files[name])
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(method, s.APIBase()+path, &body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bot "+s.Token())
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp, out
}

func TestEditAttachesFiles(t *testing.T) {
	s := New(Config{MaxUploadBytes: 100, BudgetN: 100})
	defer s.Close()
	s.AddChannel(Channel{ID: "1", Type: ChannelDM})
	_, first := do(t, s, "POST", "/channels/1/messages", "Bot "+s.Token(), `{"content":"text"}`)
	id, _ := first["id"].(string)
	names := func() []string {
		m, _ := s.Message(id)
		var out []string
		for _, a := range m.Attachments {
			out = append(out, a.Filename+"="+string(a.Data))
		}
		return out
	}
	path := "/channels/1/messages/" + id

	resp, body := doMultipart(t, s, "PATCH", path, `{"content":"final","attachments":[{"id":"0"}]}`, map[string][]byte{"a.png": []byte("A")})
	if resp.StatusCode != 200 {
		t.Fatalf("edit with a file: HTTP %d %v", resp.StatusCode, body)
	}
	if atts, _ := body["attachments"].([]any); len(atts) != 1 {
		t.Errorf("answer lists attachments %v, want one", body["attachments"])
	}
	if m, _ := s.Message(id); m.Content != "final" || !slices.Equal(names(), []string{"a.png=A"}) {
		t.Fatalf("after the edit: %q with %v", m.Content, names())
	}
	m, _ := s.Message(id)
	keep := m.Attachments[0].ID

	cases := []struct {
		name    string
		payload string
		files   map[string][]byte
		status  int
		want    []string
	}{
		{"keep one, add one", `{"attachments":[{"id":"` + keep + `"},{"id":0}]}`, map[string][]byte{"b.png": []byte("B")}, 200, []string{"a.png=A", "b.png=B"}},
		{"no list keeps all", `{"content":"again"}`, nil, 200, []string{"a.png=A", "b.png=B"}},
		{"an upload not listed is dropped", `{"attachments":[{"id":"` + keep + `"}]}`, map[string][]byte{"c.png": []byte("C")}, 200, []string{"a.png=A"}},
		{"unknown id", `{"attachments":[{"id":"999"}]}`, nil, 400, []string{"a.png=A"}},
		{"file too large", `{"attachments":[{"id":0}]}`, map[string][]byte{"big.png": bytes.Repeat([]byte("x"), 101)}, 413, []string{"a.png=A"}},
		{"empty list removes all", `{"attachments":[]}`, nil, 200, nil},
	}
	for _, tc := range cases {
		resp, body := doMultipart(t, s, "PATCH", path, tc.payload, tc.files)
		if resp.StatusCode != tc.status {
			t.Errorf("%s: HTTP %d %v, want %d", tc.name, resp.StatusCode, body, tc.status)
		}
		if got := names(); !slices.Equal(got, tc.want) {
			t.Errorf("%s: attachments %v, want %v", tc.name, got, tc.want)
		}
	}
	if c := s.CallsTo(RouteEditMessage); len(c[0].Files) != 1 || c[0].Files[0].Filename != "a.png" {
		t.Errorf("recorded call files = %+v", c[0].Files)
	}
}

// An interaction is answered once and within its deadline; UPDATE_MESSAGE edits the message the
// pressed component is on, in place, and is refused for an interaction without one.
func TestInteractionCallbacksAsDiscordTakesThem(t *testing.T) {
	s := New(Config{})
	defer s.Close()
	s.AddChannel(Channel{ID: "1", Type: ChannelDM})
	_, posted := do(t, s, "POST", "/channels/1/messages", "Bot "+s.Token(),
		`{"content":"Pick","components":[{"type":1,"components":[{"type":2,"style":2,"label":"Tuna","custom_id":"v0"}]}]}`)
	msgID, _ := posted["id"].(string)
	s.mu.Lock()
	press := s.newInteractionLocked("1", "")
	press.messageID = msgID
	command := s.newInteractionLocked("1", "")
	late := s.newInteractionLocked("1", "")
	late.messageID, late.created = msgID, time.Now().Add(-time.Hour)
	s.mu.Unlock()
	callback := func(it *interaction, body string) (int, map[string]any) {
		resp, out := do(t, s, "POST", "/interactions/"+it.id+"/"+it.token+"/callback", "", body)
		return resp.StatusCode, out
	}
	update := `{"type":7,"data":{"components":[{"type":1,"components":[{"type":2,"style":2,"label":"✓ Tuna","custom_id":"v0"}]}]}}`
	if code, body := callback(press, update); code != http.StatusNoContent {
		t.Fatalf("UPDATE_MESSAGE on a button press: HTTP %d %v", code, body)
	}
	if got := s.Messages("1"); len(got) != 1 || got[0].Content != "Pick" || len(got[0].Buttons) != 1 || got[0].Buttons[0].Label != "✓ Tuna" {
		t.Fatalf("after the update the channel holds %+v; want the one message, its text kept, its button redrawn", got)
	}
	if code, body := callback(press, update); code != http.StatusBadRequest || body["code"] != float64(codeAlreadyAcked) {
		t.Errorf("a second answer to the press: HTTP %d %v, want 400 already acknowledged", code, body)
	}
	if code, _ := callback(command, update); code != http.StatusBadRequest {
		t.Errorf("UPDATE_MESSAGE on an interaction without a component: HTTP %d, want 400", code)
	}
	if code, body := callback(late, `{"type":6}`); code != http.StatusNotFound || body["code"] != float64(codeUnknownInteraction) {
		t.Errorf("an answer past the 3 s deadline: HTTP %d %v, want 404 unknown interaction", code, body)
	}
}
