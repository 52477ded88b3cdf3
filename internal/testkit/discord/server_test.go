package discord

import (
	"bytes"
	"encoding/json"
	"net/http"
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
