package config

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestReloadTakesLiveKeysAndKeepsTheRest reloads a running config with one change at a time and
// checks which keys the bot runs with at once, which wait for a restart (keeping the running
// value), and that a file the first load would refuse is refused with its key.
func TestReloadTakesLiveKeysAndKeepsTheRest(t *testing.T) {
	const base = minimal + "[agent]\nsystem_prompt = \"old\"\n[admin]\nlisten = \"127.0.0.1:8080\"\n"
	running, err := Parse([]byte(base), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, file           string
		applied, restart     []string
		refused              string
		prompt, listen, busy string
	}{
		{name: "nothing changed", file: base, prompt: "old", listen: "127.0.0.1:8080"},
		{name: "a prompt is live", file: strings.Replace(base, `"old"`, `"new"`, 1),
			applied: []string{"agent.system_prompt"}, prompt: "new", listen: "127.0.0.1:8080"},
		{name: "a listen address needs a restart", file: strings.Replace(base, "8080", "8081", 1),
			restart: []string{"admin.listen"}, prompt: "old", listen: "127.0.0.1:8080"},
		{name: "both at once", file: strings.Replace(strings.Replace(base, "8080", "8081", 1), `"old"`, `"new"`, 1),
			applied: []string{"agent.system_prompt"}, restart: []string{"admin.listen"}, prompt: "new", listen: "127.0.0.1:8080"},
		{name: "a queue's size needs a restart, its texts do not", file: base + "[chat]\nqueue_size = 2\nbusy_text = \"wait\"\n",
			applied: []string{"chat.busy_text"}, restart: []string{"chat.queue_size"}, prompt: "old", listen: "127.0.0.1:8080", busy: "wait"},
		{name: "a model added is live", file: base + "[[models]]\nbase_url = \"http://127.0.0.1:2/v1\"\nmodel = \"m2\"\n",
			applied: []string{"models"}, prompt: "old", listen: "127.0.0.1:8080"},
		{name: "an MCP server added is live", file: base + "[[mcp.servers]]\nname = \"kit\"\ntransport = \"http\"\nurl = \"http://127.0.0.1:3/mcp\"\nlocal = true\n",
			applied: []string{"mcp.servers"}, prompt: "old", listen: "127.0.0.1:8080"},
		{name: "an MCP server with an OAuth login needs a restart", file: base + "[[mcp.servers]]\nname = \"kit\"\ntransport = \"http\"\nurl = \"http://127.0.0.1:3/mcp\"\nlocal = true\nauth = \"oauth\"\n",
			restart: []string{"mcp.servers"}, prompt: "old", listen: "127.0.0.1:8080"},
		{name: "memory, embeddings, knowledge bases and web tools are live", file: base + "[memory]\nenabled = true\n[embeddings]\nbase_url = \"http://127.0.0.1:4/v1\"\nmodel = \"e\"\n[[knowledge.bases]]\nname = \"kb\"\nchats = [\"telegram:1\"]\n[knowledge]\nmax_documents = 3\n[tools]\nnative = [\"web_search\"]\n[tools.web_search]\nprovider = \"searxng\"\nbase_url = \"http://127.0.0.1:5\"\n",
			applied: []string{"tools.native", "tools.web_search.provider", "tools.web_search.base_url", "embeddings.name", "embeddings.base_url",
				"embeddings.model", "memory.enabled", "knowledge.max_documents", "knowledge.bases"}, prompt: "old", listen: "127.0.0.1:8080"},
		{name: "storage, a platform token and the queue's bounds need a restart", file: base + "[storage]\ndsn = \"other.db\"\n[telegram]\nenabled = true\ntoken = \"1:x\"\n[chat]\nmax_turns_in_flight = 3\n",
			restart: []string{"storage.dsn", "chat.max_turns_in_flight", "telegram.enabled", "telegram.token"}, prompt: "old", listen: "127.0.0.1:8080"},
		{name: "a broken value is refused by its key", file: strings.Replace(base, "[agent]\n", "[agent]\nmax_tool_rounds = 0\n", 1),
			refused: "agent.max_tool_rounds: must be between 1 and 1024, got 0"},
		{name: "broken TOML is refused by its line", file: base + "[agent\n", refused: "line "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			next, err := Parse([]byte(tt.file), env(map[string]string{"BOT_SECRET_KEY": strings.Repeat("ab", 32)}))
			if tt.refused != "" {
				if err == nil || !strings.Contains(err.Error(), tt.refused) {
					t.Fatalf("the file was not refused with %q: %v", tt.refused, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, ch := Reconcile(running, next)
			if !slices.Equal(ch.Applied, tt.applied) || !slices.Equal(ch.Restart, tt.restart) {
				t.Errorf("applied %q, restart %q; want %q, %q", ch.Applied, ch.Restart, tt.applied, tt.restart)
			}
			if got.Agent.SystemPrompt != tt.prompt || got.Admin.Listen != tt.listen {
				t.Errorf("the bot runs with prompt %q, listen %q; want %q, %q", got.Agent.SystemPrompt, got.Admin.Listen, tt.prompt, tt.listen)
			}
			if tt.busy != "" && got.Chat.BusyText != tt.busy {
				t.Errorf("busy text %q, want %q", got.Chat.BusyText, tt.busy)
			}
			if got.Chat.QueueSize != running.Chat.QueueSize {
				t.Errorf("queue size changed to %d without a restart", got.Chat.QueueSize)
			}
			if (len(ch.Applied) == 0) != (got.Digest() == running.Digest()) {
				t.Errorf("digest %s vs %s does not tell what the bot runs with (%v)", got.Digest(), running.Digest(), ch)
			}
		})
	}
}

// TestSettingsMaskSecretsAndNameSources checks what the Settings page shows of a file: secrets
// never, each key's source (the file, a variable, the default) and whether a reload takes it.
func TestSettingsMaskSecretsAndNameSources(t *testing.T) {
	file := `
[storage]
driver = "postgres"
dsn = "postgres://bot:hunter2@db/bot"

[[models]]
base_url = "http://127.0.0.1:1/v1"
model = "m"
api_key = "${MODEL_KEY}"

[[mcp.servers]]
name = "kit"
transport = "http"
url = "http://127.0.0.1:3/mcp"
local = true
headers = { Authorization = "Bearer sesame" }

[agent]
system_prompt = "Be brief."
`
	cfg, err := Parse([]byte(file), env(map[string]string{"MODEL_KEY": "sk-live-123"}))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Setting{}
	for _, s := range cfg.Settings() {
		got[s.Key] = s
	}
	for _, s := range cfg.Settings() {
		for _, secret := range []string{"hunter2", "sk-live-123", "sesame"} {
			if strings.Contains(s.Value, secret) {
				t.Errorf("%s shows a secret: %q", s.Key, s.Value)
			}
		}
	}
	tests := []struct {
		key, value string
		source     Source
		live       bool
	}{
		{"agent.system_prompt", "Be brief.", SourceFile, true},
		{"models[0].api_key", "(set)", SourceEnv, true},
		{"models[0].model", "m", SourceFile, true},
		{"storage.dsn", "postgres://bot:xxxxx@db/bot", SourceFile, false},
		{"mcp.servers[0].headers", "Authorization=(set)", SourceFile, true},
		{"chat.queue_size", "8", SourceDefault, false},
		{"chat.turn_wait_sec", "60", SourceDefault, false},
	}
	for _, tt := range tests {
		s, ok := got[tt.key]
		if !ok {
			t.Errorf("%s is not listed", tt.key)
			continue
		}
		if s.Value != tt.value || s.Source != tt.source || s.Live != tt.live {
			t.Errorf("%s = %q from %s (live %v), want %q from %s (live %v)", tt.key, s.Value, s.Source, s.Live, tt.value, tt.source, tt.live)
		}
	}
	if s := got["models[0].api_key"]; !slices.Equal(s.Env, []string{"MODEL_KEY"}) {
		t.Errorf("models[0].api_key names variables %q, want MODEL_KEY", s.Env)
	}
}

// TestEveryLiveKeyIsAKey: a key renamed in the file and left in liveKeys would quietly need a
// restart again; each entry names a key (or a section) the config has.
func TestEveryLiveKeyIsAKey(t *testing.T) {
	cfg := Default()
	var keys []string
	eachLeaf(reflect.ValueOf(&cfg).Elem(), "", func(key string, _ reflect.Value) { keys = append(keys, key) })
	for _, k := range liveKeys {
		if !slices.ContainsFunc(keys, func(key string) bool { return key == k || strings.HasSuffix(k, ".") && strings.HasPrefix(key, k) }) {
			t.Errorf("liveKeys lists %q, which is no key of config.toml", k)
		}
	}
}
