package admin

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"relaybot/chat"
	"relaybot/config"
	"relaybot/store"
	"relaybot/store/storetest"
)

// fakeSettings is a running config and a reload whose outcome the test sets.
type fakeSettings struct {
	mu      sync.Mutex
	cfg     *config.Config
	changes config.Changes
	err     error
	reloads int
	prices  map[string]chat.Price
}

func (f *fakeSettings) Prices() map[string]chat.Price {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.prices
}

func (f *fakeSettings) Running() *config.Config { f.mu.Lock(); defer f.mu.Unlock(); return f.cfg }

func (f *fakeSettings) Reload(context.Context) (config.Changes, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reloads++
	return f.changes, f.err
}

// The Settings page and API show the running config without its secrets, each key with its
// source; Reload (the page's button with the session's CSRF token, or the API) shows what was
// applied, what needs a restart, or why the file was refused; a forged token reloads nothing.
func TestSettingsShowTheConfigAndReload(t *testing.T) {
	cfg, err := config.Parse([]byte(`
[[models]]
base_url = "http://127.0.0.1:1/v1"
model = "m"
api_key = "sk-secret-value"
[agent]
system_prompt = "Be brief."
`), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	fs := &fakeSettings{cfg: cfg, changes: config.Changes{Applied: []string{"agent.system_prompt"}, Restart: []string{"admin.listen"}}}
	_, ts := newTestServer(t, storetest.Open(t, storetest.SQLite), testToken, func(o *Options) { o.Settings = fs })

	var api settingsJSON
	if code := getJSON(t, ts, "/api/v1/settings", testToken, &api); code != http.StatusOK || api.Digest != cfg.Digest() {
		t.Fatalf("GET /api/v1/settings: %d, digest %q", code, api.Digest)
	}
	found := map[string]config.Setting{}
	for _, s := range api.Settings {
		found[s.Key] = s
	}
	if s := found["agent.system_prompt"]; s.Value != "Be brief." || s.Source != config.SourceFile || !s.Live {
		t.Errorf("agent.system_prompt = %+v", s)
	}
	if s := found["models[0].api_key"]; s.Value != "(set)" || !s.Secret {
		t.Errorf("models[0].api_key = %+v", s)
	}

	cl, csrf := loggedIn(t, ts)
	code, body := get(t, cl, ts.URL+"/admin/settings")
	if code != http.StatusOK || !strings.Contains(body, "Be brief.") || strings.Contains(body, "sk-secret-value") {
		t.Fatalf("settings page (%d) lacks the prompt or shows the key:\n%s", code, body)
	}
	resp, err := cl.PostForm(ts.URL+"/admin/settings/reload", url.Values{"csrf": {"forged"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || fs.reloads != 0 {
		t.Fatalf("a forged CSRF token: status %d, %d reloads", resp.StatusCode, fs.reloads)
	}
	resp, err = cl.PostForm(ts.URL+"/admin/settings/reload", url.Values{"csrf": {csrf}})
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"Applied", "agent.system_prompt", "Needs a restart", "admin.listen"} {
		if !strings.Contains(string(page), want) {
			t.Fatalf("after Reload the page lacks %q:\n%s", want, page)
		}
	}

	fs.mu.Lock()
	fs.err = errors.New("config config.toml: agent.max_tool_rounds: must be between 1 and 1024, got 0")
	fs.mu.Unlock()
	req, _ := http.NewRequest(http.MethodPost, ts.URL+"/api/v1/settings/reload", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err = ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var out Reloaded
	err = json.NewDecoder(resp.Body).Decode(&out)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusUnprocessableEntity || out.Outcome != "refused" || !strings.Contains(out.Error, "agent.max_tool_rounds") {
		t.Fatalf("a refused reload: %d %+v (%v)", resp.StatusCode, out, err)
	}
	if _, body := get(t, cl, ts.URL+"/admin/settings"); !strings.Contains(body, "Refused") || !strings.Contains(body, "agent.max_tool_rounds: must be between 1 and 1024") {
		t.Fatalf("the page does not show the refusal:\n%s", body)
	}
}

// The usage page bills with the running config's prices: a model priced (or repriced) by a
// reload is billed at its new price without a restart.
func TestUsageBillsWithTheRunningConfigsPrices(t *testing.T) {
	st := storetest.Open(t, storetest.SQLite)
	ctx := context.Background()
	conv, err := st.Conversations.Conversation(ctx, chat.Key{Platform: "discord", ChatID: "1"})
	if err != nil {
		t.Fatal(err)
	}
	id, err := st.Turns.StartTurn(ctx, store.TurnStart{ConversationID: conv.ID, UserID: "ann", UserMessage: chat.Message{Role: store.RoleUser, Content: "q"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Turns.FinishTurn(ctx, store.TurnEnd{TurnID: id, Status: store.TurnOK, LLMCalls: []chat.ModelCall{
		{Model: "added-live", Status: "ok", TokensIn: 1_000_000, StartedAt: time.Now().UTC()}}}); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse([]byte("[[models]]\nbase_url = \"http://127.0.0.1:1/v1\"\nmodel = \"m\"\n"), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	fs := &fakeSettings{cfg: cfg, prices: map[string]chat.Price{"added-live": {In: 2}}}
	_, ts := newTestServer(t, st, testToken, func(o *Options) { o.Settings, o.Prices = fs, map[string]chat.Price{} })
	cost := func() float64 {
		var rep usageReport
		if code := getJSON(t, ts, "/api/v1/usage?since=24h", testToken, &rep); code != http.StatusOK {
			t.Fatalf("usage: %d", code)
		}
		return rep.Total.Cost
	}
	if got := cost(); got != 2 {
		t.Fatalf("cost %v, want 2 at the running config's price", got)
	}
	fs.mu.Lock()
	fs.prices = map[string]chat.Price{"added-live": {In: 3}}
	fs.mu.Unlock()
	if got := cost(); got != 3 {
		t.Fatalf("cost %v after a reload repriced the model, want 3", got)
	}
}
