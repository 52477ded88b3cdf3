package config

import (
	"os"
	"strings"
	"testing"
	"time"
)

func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

const minimal = `
[[models]]
base_url = "http://127.0.0.1:1/v1"
model = "m"
`

func TestShippedConfigLoads(t *testing.T) {
	data, err := os.ReadFile("../config.toml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := Parse(data, env(nil))
	if err != nil {
		t.Fatalf("shipped config.toml: %v", err)
	}
	if got := cfg.Agent.MaxToolRounds; got != 128 {
		t.Errorf("max_tool_rounds = %d, want 128", got)
	}
	if cfg.Storage.DSN != "data/bot.db" || cfg.Models[0].Model != "gpt-4o-mini" {
		t.Errorf("env fallbacks not applied: dsn=%q model=%q", cfg.Storage.DSN, cfg.Models[0].Model)
	}
}

func TestParseErrorsNameTheKey(t *testing.T) {
	tests := []struct {
		name, toml, want string
	}{
		{"rounds zero", minimal + "[agent]\nmax_tool_rounds = 0\n", "agent.max_tool_rounds: must be between 1 and 1024, got 0"},
		{"no models", "", "models: at least one [[models]] entry is required"},
		{"unknown key", minimal + "[agent]\nmax_rounds = 3\n", "agent.max_rounds: unknown key; did you mean agent.max_tool_rounds?"},
		{"misspelt key", minimal + "[chat]\nqueue_sise = 3\n", "chat.queue_sise: unknown key; did you mean chat.queue_size?"},
		{"key with its unit left out", minimal + "[chat]\nturn_timeout = 60\n", "chat.turn_timeout: unknown key; did you mean chat.turn_timeout_sec?"},
		{"misspelt key of an entry", minimal[:len(minimal)-1] + "\napi_kye = \"k\"\n", "models.api_kye: unknown key; did you mean models.api_key?"},
		{"dash for underscore", minimal + "[admin]\nweb-chat = true\n", "admin.web-chat: unknown key; did you mean admin.web_chat?"},
		{"key in the wrong table", minimal + "[agent]\nqueue_size = 3\n", "agent.queue_size: unknown key; did you mean chat.queue_size?"},
		{"misspelt table", minimal + "[chats]\nqueue_size = 3\n", "[chats]: unknown table; did you mean [chat]?"},
		{"misspelt array table", minimal + "[[mcp.server]]\nname = \"a\"\n", "[mcp.server]: unknown table; did you mean [mcp.servers]?"},
		{"bad cache", minimal + "[[models]]\nbase_url=\"http://127.0.0.1:2/v1\"\nmodel=\"m2\"\ncache = \"always\"\n", `models[1].cache: must be one of "auto", "anthropic", "off", got "always"`},
		{"negative cache price", minimal + "[[models]]\nbase_url=\"http://127.0.0.1:2/v1\"\nmodel=\"m2\"\nprice_cached_in = -1.0\n", "models[1].price_cached_in: prices must be 0 or more"},
		{"bad enum", minimal + "[output]\nexception_handling = \"loud\"\n", `output.exception_handling: must be one of "show-hint", "show-error", "hide", got "loud"`},
		{"telegram token env", minimal + "[telegram]\nenabled = true\ntoken = \"${TG_TOKEN}\"\n", "telegram.token: empty: environment variable TG_TOKEN is not set"},
		{"endpoint format", minimal + "[telegram]\nenabled = true\ntoken = \"x\"\napi_endpoint = \"http://h/bot\"\n", "telegram.api_endpoint: must contain two %s"},
		{"admin exposed", minimal + "[admin]\nlisten = \"0.0.0.0:8080\"\n", "admin.token: must be set when admin.listen (0.0.0.0:8080) is not a loopback address"},
		{"admin public url", minimal + "[admin]\npublic_url = \"bot.example.com\"\n", `admin.public_url: must be an http(s) URL, got "bot.example.com"`},
		{"otel endpoint", minimal + "[otel]\nendpoint = \"tempo:4318\"\n", `otel.endpoint: must be an http(s) URL, got "tempo:4318"`},
		{"otel trace url without the id", minimal + "[otel]\ntrace_url = \"https://tempo.example/trace/\"\n", `otel.trace_url: must contain {trace_id}`},
		{"admin trusted proxy", minimal + "[admin]\ntrusted_proxies = [\"10.0.0.0/8\", \"proxy.local\"]\n", `admin.trusted_proxies[1]: must be an IP address or CIDR prefix ("10.0.0.0/8", "::1"), got "proxy.local"`},
		{"mcp stdio command", minimal + "[[mcp.servers]]\nname = \"a\"\ntransport = \"stdio\"\n", "mcp.servers[0].command: must be set"},
		{"access id", minimal + "[access]\nadmins = [\"12345\"]\n", `access.admins[0]: must look like "platform:id"`},
		{"syntax", "[agent\n", "to end table name"},
		{"wrong type", minimal + "[agent]\nmax_tool_rounds = \"many\"\n", "max_tool_rounds"},
		{"discord role not an id", minimal + "[discord]\nenabled = true\ntoken = \"x\"\nallowed_roles = [\"moderators\"]\n", `discord.allowed_roles: "moderators" is not a Discord id`},
		{"discord guild not an id", minimal + "[discord]\nenabled = true\ntoken = \"x\"\nallowed_guilds = [\" 123\"]\n", `discord.allowed_guilds: " 123" is not a Discord id`},
		{"compact_at above one", minimal + "[agent]\ncompact_at = 1.5\n", "agent.compact_at: must be above 0 and at most 1, got 1.5"},
		{"tool_result_share zero", minimal + "[agent]\ntool_result_share = 0.0\n", "agent.tool_result_share: must be above 0 and at most 1, got 0"},
		{"idle reset negative", minimal + "[chat]\nidle_reset_minutes = -1\n", "chat.idle_reset_minutes: must be between 0 and 525600, got -1"},
		{"duration not one", minimal + "[chat]\nturn_wait_sec = \"soon\"\n", `chat.turn_wait_sec: must be a number of seconds or a duration like "90s" or "2h", got "soon"`},
		{"duration of an entry not one", minimal[:len(minimal)-1] + "\ntimeout_sec = \"2 minutes\"\n", `models[0].timeout_sec: must be a number of seconds or a duration like "90s" or "2h", got "2 minutes"`},
		{"duration string out of range", minimal + "[tools]\nalways_allow_days = \"1h\"\n", "tools.always_allow_days: must be between 1 and 3650, got 1h0m0s"},
		{"duration number overflows", minimal + "[storage]\nretention_days = 9223372036854775807\n", "storage.retention_days: must be between 0 and 36500, got 2562047h47m16.854775807s"},
		{"selectable model unknown", minimal + "[chat]\nselectable_models = [\"n\"]\n", `chat.selectable_models: names no [[models]] entry: "n"`},
		{"context window tiny", minimal[:len(minimal)-1] + "\ncontext_window = 100\n", "models[0].context_window: must be between 1024 and 100000000, got 100"},
		{"output above half the window", minimal[:len(minimal)-1] + "\ncontext_window = 8000\nmax_output_tokens = 6000\n", "models[0].max_output_tokens: must be between 1 and half of context_window (4000), got 6000"},
		{"discord max lines", minimal + "[discord]\nenabled = true\ntoken = \"x\"\nmax_lines = 1\n", "discord.max_lines: must be between 3 and 1000, got 1"},
		{"reasoning mode", minimal + "[output]\nreasoning = \"shown\"\n", `output.reasoning: must be one of "collapsed", "hidden", "inline", got "shown"`},
		{"telegram drafts", minimal + "[telegram]\nenabled = true\ntoken = \"x\"\ndrafts = \"on\"\n", `telegram.drafts: must be one of "auto", "off", got "on"`},
		{"telegram budget above 30 unpaid", minimal + "[telegram]\nenabled = true\ntoken = \"x\"\nglobal_per_second = 1000\n", "telegram.global_per_second: above 30 needs telegram.paid_broadcast = true"},
		{"telegram paid budget above 1000", minimal + "[telegram]\nenabled = true\ntoken = \"x\"\npaid_broadcast = true\nglobal_per_second = 1001\n", "telegram.global_per_second: must be between 1 and 1000, got 1001"},
		{"telegram budget zero", minimal + "[telegram]\nenabled = true\ntoken = \"x\"\nglobal_per_second = 0\n", "telegram.global_per_second: must be between 1 and 30, got 0"},
		{"discord budget zero", minimal + "[discord]\nenabled = true\ntoken = \"x\"\nglobal_per_second = 0\n", "discord.global_per_second: must be between 1 and 100000, got 0"},
		{"discord shards zero", minimal + "[discord]\nenabled = true\ntoken = \"x\"\nshards = 0\n", `discord.shards: must be "auto" or between 1 and 10000, got 0`},
		{"discord shards a word", minimal + "[discord]\nenabled = true\ntoken = \"x\"\nshards = \"many\"\n", `discord.shards: must be "auto" or a positive whole number, got "many"`},
		{"discord shards a fraction", minimal + "[discord]\nenabled = true\ntoken = \"x\"\nshards = 1.5\n", `discord.shards: must be "auto" or a positive whole number, got 1.5`},
		{"discord allow_dms not a bool", minimal + "[discord]\nallow_dms = \"no\"\n", "allow_dms"},
		{"busy", minimal + "[chat]\nbusy = \"drop\"\n", `chat.busy: must be one of "queue", "interrupt", got "drop"`},
		{"busy from the environment", minimal + "[chat]\nbusy = \"${BUSY}\"\n", `chat.busy: must be one of "queue", "interrupt", got "wild"`},
		{"scope", minimal + "[chat]\nscope = \"group\"\n", `chat.scope: must be one of "chat", "user", got "group"`},
		{"mcp transport", minimal + "[[mcp.servers]]\nname = \"a\"\ntransport = \"http\"\nurl = \"http://x/mcp\"\n[[mcp.servers]]\nname = \"b\"\ntransport = \"ws\"\n", `mcp.servers[1].transport: must be one of "stdio", "sse", "http", got "ws"`},
		{"log level", minimal + "[log]\nlevel = \"loud\"\n", `log.level: must be one of "debug", "info", "warn", "error", got "loud"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.toml), env(map[string]string{"BUSY": "wild"}))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestEnvExpansion(t *testing.T) {
	cfg, err := Parse([]byte(minimal+"[telegram]\nenabled = true\ntoken = \"${TG}\"\n[[mcp.servers]]\nname=\"s\"\ntransport=\"http\"\nurl=\"http://127.0.0.1:9/mcp\"\nheaders = { Authorization = \"Bearer ${MCP_TOKEN}\" }\n"),
		env(map[string]string{"TG": "123:abc", "MCP_TOKEN": "sekrit"}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Telegram.Token != "123:abc" {
		t.Errorf("token = %q", cfg.Telegram.Token)
	}
	if got := cfg.MCP.Servers[0].Headers["Authorization"]; got != "Bearer sekrit" {
		t.Errorf("header = %q", got)
	}
}

func TestModelEntryDefaults(t *testing.T) {
	cfg, err := Parse([]byte(minimal+"[[models]]\nname=\"b\"\nbase_url=\"http://127.0.0.1:2/v1\"\nmodel=\"m2\"\nsupports_tools=false\n"), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Models[0].SupportsTools || cfg.Models[1].SupportsTools {
		t.Errorf("supports_tools = %v, %v; want true (default), false (set)", cfg.Models[0].SupportsTools, cfg.Models[1].SupportsTools)
	}
	if cfg.Models[0].Name != "m" || cfg.Models[0].Timeout != 2*time.Minute {
		t.Errorf("defaults not applied: %+v", cfg.Models[0])
	}
}

func TestCachePricesDefaultToThePromptPrice(t *testing.T) {
	cfg, err := Parse([]byte(minimal+`[[models]]
name = "priced"
base_url = "http://127.0.0.1:2/v1"
model = "m2"
price_in = 2.0
cache = "anthropic"
[[models]]
name = "cache free"
base_url = "http://127.0.0.1:2/v1"
model = "m3"
price_in = 2.0
price_cached_in = 0.0
price_cache_write = 2.5
`), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if m := cfg.Models[1]; m.Cache != CacheAnthropic || cfg.Models[2].Cache != CacheAuto {
		t.Errorf("cache = %q and %q, want anthropic as set and auto by default", m.Cache, cfg.Models[2].Cache)
	}
	if m := cfg.Models[1]; m.PriceCachedIn != 2 || m.PriceCacheWrite != 2 {
		t.Errorf("left out, the cache's prices = %v / %v, want price_in (2): a cached token would be billed at a price nobody set", m.PriceCachedIn, m.PriceCacheWrite)
	}
	if m := cfg.Models[2]; m.PriceCachedIn != 0 || m.PriceCacheWrite != 2.5 {
		t.Errorf("set, the cache's prices = %v / %v, want 0 and 2.5", m.PriceCachedIn, m.PriceCacheWrite)
	}
}

func TestModelBudgetsDefaultByModelName(t *testing.T) {
	tests := []struct {
		entry             string
		window, maxOutput int
	}{
		{`model = "gpt-4o-mini"`, 128_000, 16_384},
		{`model = "openai/gpt-4o"`, 128_000, 16_384},
		{`model = "claude-3-5-sonnet"`, 200_000, 8_192},
		{`model = "deepseek-chat"`, 128_000, 8_192},
		{`model = "my-local-model"`, DefaultContextWindow, DefaultMaxOutputTokens},
		{"model = \"my-local-model\"\ncontext_window = 4096", 4096, 1024},
		{"model = \"gpt-4o\"\ncontext_window = 32000\nmax_output_tokens = 500", 32000, 500},
	}
	for _, tt := range tests {
		t.Run(tt.entry, func(t *testing.T) {
			cfg, err := Parse([]byte("[[models]]\nbase_url = \"http://127.0.0.1:1/v1\"\n"+tt.entry+"\n"), env(nil))
			if err != nil {
				t.Fatal(err)
			}
			if m := cfg.Models[0]; m.ContextWindow != tt.window || m.MaxOutputTokens != tt.maxOutput {
				t.Errorf("budget %d/%d, want %d/%d", m.ContextWindow, m.MaxOutputTokens, tt.window, tt.maxOutput)
			}
		})
	}
}

func TestToolCallTimeout(t *testing.T) {
	tests := []struct {
		value string
		want  time.Duration
		warn  bool
	}{
		{"", 300 * time.Second, false},
		{"tool_call_timeout_sec = 900", 900 * time.Second, false},
		{"tool_call_timeout_sec = 0", 0, false},
		{"tool_call_timeout_sec = 1.5", 1500 * time.Millisecond, false},
		{"tool_call_timeout_sec = -1", 300 * time.Second, true},
		{"tool_call_timeout_sec = inf", 300 * time.Second, true},
		{"tool_call_timeout_sec = 1e300", 300 * time.Second, true},
		{"tool_call_timeout_sec = true", 300 * time.Second, true},
		{`tool_call_timeout_sec = "x"`, 300 * time.Second, true},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			cfg, err := Parse([]byte(minimal+"[[mcp.servers]]\nname=\"s\"\ntransport=\"stdio\"\ncommand=\"x\"\n"+tt.value+"\n"), env(nil))
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.MCP.Servers[0].ToolCallTimeout; got != tt.want {
				t.Errorf("timeout = %v, want %v", got, tt.want)
			}
			if (len(cfg.Warnings) == 1) != tt.warn {
				t.Errorf("warnings = %q, want one: %v", cfg.Warnings, tt.warn)
			}
		})
	}
}

func TestTelegramOffsetFile(t *testing.T) {
	tests := []struct {
		name, toml string
		env        map[string]string
		want       string
	}{
		{"next to the database", "[storage]\ndsn = \"file:/var/lib/bot/bot.db?cache=shared\"\n", nil, "/var/lib/bot/telegram.offset"},
		{"default database", "", nil, "data/telegram.offset"},
		{"postgres", "[storage]\ndriver = \"postgres\"\ndsn = \"postgres://u@h/db\"\n", nil, "data/telegram.offset"},
		{"set", "[telegram]\noffset_file = \"/srv/tg.offset\"\n", nil, "/srv/tg.offset"},
		{"from the environment", "[telegram]\noffset_file = \"${BOT_TELEGRAM_OFFSET:-}\"\n", map[string]string{"BOT_TELEGRAM_OFFSET": "/x/o"}, "/x/o"},
		{"off", "[telegram]\noffset_file = \"off\"\n", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse([]byte(minimal+tt.toml), env(tt.env))
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.OffsetPath(); got != tt.want {
				t.Fatalf("OffsetPath = %q, want %q", got, tt.want)
			}
		})
	}
	for _, bad := range []string{"data/", t.TempDir()} {
		_, err := Parse([]byte(minimal+"[telegram]\nenabled = true\ntoken = \"x\"\noffset_file = \""+bad+"\"\n"), env(nil))
		if err == nil || !strings.Contains(err.Error(), "telegram.offset_file: ") {
			t.Errorf("offset_file %q: error = %v, want one naming telegram.offset_file", bad, err)
		}
	}
}

func TestDiscordDirectMessagesDefaultOn(t *testing.T) {
	tests := []struct {
		toml string
		want bool
	}{
		{minimal, true},
		{minimal + "[discord]\nallow_dms = false\n", false},
		{minimal + "[discord]\nallow_dms = true\n", true},
	}
	for _, tt := range tests {
		cfg, err := Parse([]byte(tt.toml), env(nil))
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Discord.AllowDMs != tt.want {
			t.Errorf("%q: allow_dms = %v, want %v", tt.toml, cfg.Discord.AllowDMs, tt.want)
		}
	}
}

func TestAccessUsersOnAPlatform(t *testing.T) {
	a := Access{
		AllowUsers: []string{"discord:1", "telegram:2", "*:3", " Discord : 4 "},
		Admins:     []string{"discord:5", "discord:1", "web:6"},
	}
	tests := []struct {
		platform string
		want     string
	}{
		{"discord", "1 3 4 5"},
		{"telegram", "2 3"},
		{"web", "3 6"},
	}
	for _, tt := range tests {
		if got := strings.Join(a.UsersOn(tt.platform), " "); got != tt.want {
			t.Errorf("UsersOn(%q) = %q, want %q", tt.platform, got, tt.want)
		}
	}
}

func TestGovernanceKeysAreCheckedByName(t *testing.T) {
	tests := []struct {
		name, toml, want string
	}{
		{"policy action", "[[tools.policy]]\ntool = \"x\"\naction = \"maybe\"\n", `tools.policy[0].action: must be "allow", "ask" or "deny"`},
		{"policy glob", "[[tools.policy]]\ntool = \"[x\"\naction = \"deny\"\n", "tools.policy[0].tool"},
		{"policy role", "[[tools.policy]]\nroles = [\"mods\"]\naction = \"deny\"\n", "tools.policy[0].roles"},
		{"policy approvers on allow", "[[tools.policy]]\napprovers = [\"admins\"]\naction = \"allow\"\n", "tools.policy[0].approvers"},
		{"approval timeout", "[tools]\napproval_timeout_sec = 0\n", "tools.approval_timeout_sec: must be between 1 and 86400"},
		{"tool prefix", "[[mcp.servers]]\nname = \"w\"\ntransport = \"http\"\nurl = \"http://x/mcp\"\ntool_prefix = \"web.\"\n", "mcp.servers[0].tool_prefix"},
		{"negative quota", "[quotas.user]\ntokens_per_day = -1\n", "quotas.user: limits must be 0"},
		{"override without users", "[[quotas.overrides]]\ntokens_per_day = 5\n", "quotas.overrides[0]: must list users or roles"},
		{"negative price", "[[models]]\nname = \"p\"\nbase_url = \"http://x/v1\"\nmodel = \"p\"\nprice_in = -1\n", "models[1].price_in"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(minimal+tc.toml), env(nil))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want one naming %q", err, tc.want)
			}
		})
	}
	cfg, err := Parse([]byte(minimal+"[[mcp.servers]]\nname = \"web\"\ntransport = \"http\"\nurl = \"http://x/mcp\"\ntool_prefix = \"{server}__\"\n"), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.MCP.Servers[0].ToolName("search"); got != "web__search" || cfg.Tools.ApprovalTimeout != 5*time.Minute {
		t.Fatalf("tool name %q, approval timeout %v; want web__search and the default 5m", got, cfg.Tools.ApprovalTimeout)
	}
}

func TestGlobalBudgetsDefaultToThePlatformsLimits(t *testing.T) {
	tests := []struct {
		name, toml        string
		telegram, discord int
		paid              bool
	}{
		{"absent", minimal, 30, 50, false},
		{"paid broadcast at 1000", minimal + "[telegram]\nglobal_per_second = 1000\npaid_broadcast = true\n", 1000, 50, true},
		{"large discord bot", minimal + "[discord]\nglobal_per_second = 1200\n", 30, 1200, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tt.toml), env(nil))
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Telegram.GlobalPerSecond != tt.telegram || cfg.Telegram.PaidBroadcast != tt.paid || cfg.Discord.GlobalPerSecond != tt.discord {
				t.Errorf("budgets = telegram %d (paid %v), discord %d; want %d (paid %v), %d",
					cfg.Telegram.GlobalPerSecond, cfg.Telegram.PaidBroadcast, cfg.Discord.GlobalPerSecond, tt.telegram, tt.paid, tt.discord)
			}
		})
	}
}

func TestDiscordShards(t *testing.T) {
	for _, tt := range []struct {
		line string
		want int
	}{
		{"", 0},
		{`shards = "auto"`, 0},
		{"shards = 4", 4},
		{`shards = "${SHARDS}"`, 3},
	} {
		cfg, err := Parse([]byte(minimal+"[discord]\nenabled = true\ntoken = \"x\"\n"+tt.line+"\n"), env(map[string]string{"SHARDS": "3"}))
		if err != nil {
			t.Fatalf("%q: %v", tt.line, err)
		}
		if cfg.Discord.Shards != tt.want {
			t.Errorf("%q: %d shards, want %d", tt.line, cfg.Discord.Shards, tt.want)
		}
	}
}

func TestEnumValuesFromTheEnvironmentAreTakenOnceExpanded(t *testing.T) {
	cfg, err := Parse([]byte(minimal+"[chat]\nbusy = \"${BUSY:-queue}\"\nscope = \"${SCOPE:-user}\"\n"), env(map[string]string{"BUSY": "interrupt"}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Chat.Busy != BusyInterrupt || cfg.Chat.Scope != ScopeUser {
		t.Fatalf("busy %q, scope %q; want interrupt (from BUSY) and user (the fallback)", cfg.Chat.Busy, cfg.Chat.Scope)
	}
}

func TestOAuthServersNeedTheSecretKey(t *testing.T) {
	const oauthServer = "[[mcp.servers]]\nname = \"tracker\"\ntransport = \"http\"\nurl = \"https://mcp.example.com/mcp\"\nauth = \"oauth\"\n"
	hexKey := strings.Repeat("ab", 32)
	for _, tc := range []struct {
		name, toml string
		env        map[string]string
		want       string // in the error; "" for none
	}{
		{name: "no key", toml: oauthServer, want: `mcp.servers[0].auth = "oauth" needs the environment variable BOT_SECRET_KEY`},
		{name: "a key that is too short", toml: oauthServer, env: map[string]string{"BOT_SECRET_KEY": "short-and-secret"}, want: "environment variable BOT_SECRET_KEY: want 32 random bytes"},
		{name: "a hex key", toml: oauthServer, env: map[string]string{"BOT_SECRET_KEY": hexKey}},
		{name: "a base64 key", toml: oauthServer, env: map[string]string{"BOT_SECRET_KEY": "q6urq6urq6urq6urq6urq6urq6urq6urq6urq6urq6s="}},
		{name: "no OAuth server, no key", toml: "[[mcp.servers]]\nname = \"s\"\ntransport = \"http\"\nurl = \"https://x/mcp\"\n"},
		{name: "oauth on stdio", toml: "[[mcp.servers]]\nname = \"s\"\ntransport = \"stdio\"\ncommand = \"x\"\nauth = \"oauth\"\n", env: map[string]string{"BOT_SECRET_KEY": hexKey}, want: "mcp.servers[0].auth"},
		{name: "an unknown auth", toml: "[[mcp.servers]]\nname = \"s\"\ntransport = \"http\"\nurl = \"https://x/mcp\"\nauth = \"basic\"\n", want: "mcp.servers[0].auth"},
		{name: "a client secret without an id", toml: oauthServer + "client_secret = \"x\"\n", env: map[string]string{"BOT_SECRET_KEY": hexKey}, want: "mcp.servers[0].client_secret: needs client_id"},
		{name: "a client id without oauth", toml: "[[mcp.servers]]\nname = \"s\"\ntransport = \"http\"\nurl = \"https://x/mcp\"\nclient_id = \"bot\"\n", want: "mcp.servers[0].auth"},
		{name: "oauth and an Authorization header", toml: oauthServer + "headers = { Authorization = \"Bearer x\" }\n", env: map[string]string{"BOT_SECRET_KEY": hexKey}, want: "mcp.servers[0].headers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse([]byte(minimal+tc.toml), env(tc.env))
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				if strings.Contains(tc.toml, "oauth") && len(cfg.SecretKey) != 32 {
					t.Errorf("the key decoded to %d bytes, want 32", len(cfg.SecretKey))
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse error %v, want one containing %q", err, tc.want)
			}
			if v := tc.env["BOT_SECRET_KEY"]; v != "" && strings.Contains(err.Error(), v) {
				t.Errorf("the error repeats the key: %v", err)
			}
		})
	}
}

// TestUnknownKeysAreNamedOnceAndGuessedOnlyWhenNear: a key far from every known one gets no
// guess, and the keys inside an unknown table are not listed after it.
func TestUnknownKeysAreNamedOnceAndGuessedOnlyWhenNear(t *testing.T) {
	_, err := Parse([]byte(minimal+"[chat]\nxyzzy = 1\n[chats]\nqueue_size = 3\nbusy = \"queue\"\n"), env(nil))
	want := "chat.xyzzy: unknown key\n[chats]: unknown table; did you mean [chat]?"
	if err == nil || err.Error() != want {
		t.Fatalf("error = %v, want %q", err, want)
	}
}
