package config

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
)

// validate checks every key and returns all problems at once, each naming its key.
func (c *Config) validate(missing map[string][]string) error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
	}
	required := func(key, val string) {
		if val != "" {
			return
		}
		if vars := missing[key]; len(vars) > 0 {
			bad(key, "empty: environment variable %s is not set", strings.Join(vars, ", "))
			return
		}
		bad(key, "must be set")
	}
	between := func(key string, v, lo, hi int) {
		if v < lo || v > hi {
			bad(key, "must be between %d and %d, got %d", lo, hi, v)
		}
	}
	httpURL := func(key, v string) {
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad(key, "must be an http(s) URL, got %q", v)
		}
	}

	if c.OTel.Endpoint != "" {
		httpURL("otel.endpoint", c.OTel.Endpoint)
	}
	if c.OTel.TraceURL != "" {
		httpURL("otel.trace_url", c.OTel.TraceURL)
		if !strings.Contains(c.OTel.TraceURL, "{trace_id}") {
			bad("otel.trace_url", "must contain {trace_id}, got %q", c.OTel.TraceURL)
		}
	}

	required("storage.dsn", c.Storage.DSN)
	between("storage.retention_days", c.Storage.RetentionDays, 0, 36500)

	if len(c.Models) == 0 {
		bad("models", "at least one [[models]] entry is required")
	}
	names := map[string]bool{}
	for i, m := range c.Models {
		key := fmt.Sprintf("models[%d]", i)
		required(key+".model", m.Model)
		required(key+".base_url", m.BaseURL)
		if m.BaseURL != "" {
			httpURL(key+".base_url", m.BaseURL)
		}
		between(key+".timeout_sec", m.TimeoutSec, 1, 3600)
		between(key+".context_window", m.ContextWindow, 1024, 100_000_000)
		if m.MaxOutputTokens < 1 || m.MaxOutputTokens > m.ContextWindow/2 {
			bad(key+".max_output_tokens", "must be between 1 and half of context_window (%d), got %d", m.ContextWindow/2, m.MaxOutputTokens)
		}
		if names[m.Name] {
			bad(key+".name", "duplicate model name %q", m.Name)
		}
		names[m.Name] = true
		if m.PriceIn < 0 || m.PriceOut < 0 || math.IsNaN(m.PriceIn) || math.IsNaN(m.PriceOut) {
			bad(key+".price_in", "prices must be 0 or more, got price_in %v, price_out %v", m.PriceIn, m.PriceOut)
		}
		if vars := missing[key+".api_key"]; len(vars) > 0 {
			bad(key+".api_key", "empty: environment variable %s is not set", strings.Join(vars, ", "))
		}
	}

	between("agent.max_tool_rounds", c.Agent.MaxToolRounds, 1, 1024)
	between("agent.stream_flush_chunks", c.Agent.StreamFlushChunks, 1, 1000)
	between("agent.history_rounds", c.Agent.HistoryRounds, 0, 1000)
	between("agent.tool_result_max_chars", c.Agent.ToolResultMaxChars, 100, 10_000_000)
	if c.Agent.CompactAt <= 0 || c.Agent.CompactAt > 1 {
		bad("agent.compact_at", "must be above 0 and at most 1, got %v", c.Agent.CompactAt)
	}
	if c.Agent.ToolResultShare <= 0 || c.Agent.ToolResultShare > 1 {
		bad("agent.tool_result_share", "must be above 0 and at most 1, got %v", c.Agent.ToolResultShare)
	}
	between("chat.idle_reset_minutes", c.Chat.IdleResetMinutes, 0, 525_600)
	for _, n := range c.Chat.SelectableModels {
		if !names[n] {
			bad("chat.selectable_models", "names no [[models]] entry: %q", n)
		}
	}

	between("chat.queue_size", c.Chat.QueueSize, 0, 1000)
	between("chat.max_turns_in_flight", c.Chat.MaxTurnsInFlight, 1, 100000)
	between("chat.turn_wait_sec", c.Chat.TurnWaitSec, 0, 3600)
	between("chat.rate_limit_per_minute", c.Chat.RateLimitPerMin, 0, 100000)
	between("chat.shutdown_grace_sec", c.Chat.ShutdownGraceSec, 0, 3600)
	between("chat.max_image_bytes", c.Chat.MaxImageBytes, 0, 50<<20)
	between("chat.turn_timeout_sec", c.Chat.TurnTimeoutSec, 1, 86400)

	for _, list := range []struct {
		key string
		ids []string
	}{
		{"access.allow_users", c.Access.AllowUsers}, {"access.deny_users", c.Access.DenyUsers},
		{"access.allow_chats", c.Access.AllowChats}, {"access.deny_chats", c.Access.DenyChats},
		{"access.admins", c.Access.Admins},
	} {
		for i, id := range list.ids {
			if p, rest, ok := strings.Cut(id, ":"); !ok || p == "" || rest == "" {
				bad(fmt.Sprintf("%s[%d]", list.key, i), `must look like "platform:id" or "*:id", got %q`, id)
			}
		}
	}
	for chat := range c.Tools.PerChat {
		if p, rest, ok := strings.Cut(chat, ":"); !ok || p == "" || rest == "" {
			bad("tools.per_chat", `keys must look like "platform:chat_id", got %q`, chat)
		}
	}

	c.validatePolicy(bad)
	c.validateQuotas(bad)
	between("tools.approval_timeout_sec", c.Tools.ApprovalTimeoutSec, 1, 86400)
	between("tools.elicitation_timeout_sec", c.Tools.ElicitationTimeoutSec, 1, 86400)
	between("tools.max_parallel", c.Tools.MaxParallel, 1, 64)
	for i, g := range c.Tools.ParallelTools {
		if _, err := path.Match(g, ""); err != nil || strings.TrimSpace(g) == "" {
			bad(fmt.Sprintf("tools.parallel_tools[%d]", i), "must be a tool name or glob, got %q", g)
		}
	}
	between("tools.max_file_bytes", c.Tools.MaxFileBytes, 1, 2<<30)
	between("tools.max_files_per_turn", c.Tools.MaxFilesPerTurn, 1, 1000)
	between("tools.always_allow_days", c.Tools.AlwaysAllowDays, 1, 3650)
	between("tools.max_open_questions", c.Tools.MaxOpenQuestions, 1, 100)

	if c.Telegram.Enabled {
		required("telegram.token", c.Telegram.Token)
		if n := strings.Count(c.Telegram.APIEndpoint, "%s"); n != 2 {
			bad("telegram.api_endpoint", `must contain two %%s (token, method), like "https://api.telegram.org/bot%%s/%%s", got %q`, c.Telegram.APIEndpoint)
		}
		if c.Telegram.PaidBroadcast {
			between("telegram.global_per_second", c.Telegram.GlobalPerSecond, 1, 1000)
		} else if c.Telegram.GlobalPerSecond > 30 {
			bad("telegram.global_per_second", "above 30 needs telegram.paid_broadcast = true (Telegram allows 30 messages a second otherwise), got %d", c.Telegram.GlobalPerSecond)
		} else {
			between("telegram.global_per_second", c.Telegram.GlobalPerSecond, 1, 30)
		}
		if f := c.Telegram.OffsetFile; f != "" && f != OffsetFileOff {
			if strings.HasSuffix(f, "/") || strings.HasSuffix(f, string(filepath.Separator)) || filepath.Base(f) == "." || filepath.Base(f) == ".." {
				bad("telegram.offset_file", `must be a file path, "" (next to the SQLite database) or %q, got %q`, OffsetFileOff, f)
			} else if st, err := os.Stat(f); err == nil && !st.Mode().IsRegular() {
				bad("telegram.offset_file", "%s exists and is not a regular file", f)
			}
		}
		if c.Telegram.Mode == "webhook" {
			required("telegram.webhook_listen", c.Telegram.WebhookListen)
			required("telegram.webhook_url", c.Telegram.WebhookURL)
			required("telegram.webhook_secret", c.Telegram.WebhookSecret)
		}
	}
	if c.Discord.Enabled {
		required("discord.token", c.Discord.Token)
		httpURL("discord.api_base", c.Discord.APIBase)
		between("discord.max_lines", c.Discord.MaxLines, 3, 1000)
		between("discord.global_per_second", c.Discord.GlobalPerSecond, 1, 100000)
		if n, err := ParseDiscordShards(c.Discord.ShardsRaw); err != nil {
			bad("discord.shards", "%v", err)
		} else {
			c.Discord.Shards = n
		}
		// Direct messages are checked against these lists by asking Discord for the guild
		// member: an id that is no snowflake would silently refuse everyone.
		for _, l := range []struct {
			key string
			ids []string
		}{
			{"discord.allowed_guilds", c.Discord.AllowedGuilds},
			{"discord.allowed_channels", c.Discord.AllowedChannels},
			{"discord.allowed_roles", c.Discord.AllowedRoles},
		} {
			for _, id := range l.ids {
				if !snowflake(id) {
					bad(l.key, "%q is not a Discord id (digits only)", id)
				}
			}
		}
	}

	seen := map[string]bool{}
	for i, s := range c.MCP.Servers {
		key := fmt.Sprintf("mcp.servers[%d]", i)
		required(key+".name", s.Name)
		if seen[s.Name] {
			bad(key+".name", "duplicate server name %q", s.Name)
		}
		seen[s.Name] = true
		switch s.Transport {
		case "stdio":
			required(key+".command", s.Command)
		case "sse", "http":
			required(key+".url", s.URL)
			if s.URL != "" {
				httpURL(key+".url", s.URL)
			}
		}
		between(key+".connect_timeout_sec", s.ConnectSec, 1, 600)
		if s.Auth == "oauth" {
			if s.Transport == "stdio" {
				bad(key+".auth", `"oauth" is for remote servers (transport "sse" or "http"); a stdio server takes its credentials from env`)
			}
			if _, ok := s.Headers["Authorization"]; ok {
				bad(key+".headers", `an Authorization header and auth = "oauth" exclude each other`)
			}
		} else if s.ClientID != "" || s.ClientSecret != "" || len(s.Scopes) > 0 {
			bad(key+".auth", `client_id, client_secret and scopes are for auth = "oauth"`)
		}
		if s.ClientSecret != "" && s.ClientID == "" {
			bad(key+".client_secret", "needs client_id")
		}
		if p := s.ToolPrefix; p != "" && !validToolPrefix.MatchString(strings.ReplaceAll(p, "{server}", "x")) {
			bad(key+".tool_prefix", "may hold only letters, digits, _ and - (and {server}), got %q", p)
		}
	}

	if c.Admin.Enabled {
		if _, _, err := net.SplitHostPort(c.Admin.Listen); err != nil {
			bad("admin.listen", "must be host:port, got %q", c.Admin.Listen)
		} else if !IsLoopback(c.Admin.Listen) && c.Admin.Token == "" {
			bad("admin.token", "must be set when admin.listen (%s) is not a loopback address", c.Admin.Listen)
		}
		if c.Admin.PublicURL != "" {
			httpURL("admin.public_url", c.Admin.PublicURL)
		}
		for i, p := range c.Admin.TrustedProxies {
			if !validAddrOrPrefix(p) {
				bad(fmt.Sprintf("admin.trusted_proxies[%d]", i), "must be an IP address or CIDR prefix (\"10.0.0.0/8\", \"::1\"), got %q", p)
			}
		}
	}

	c.validateMedia(bad, httpURL)
	return errors.Join(errs...)
}

// IsLoopback reports whether a host:port listen address only accepts local connections.
func IsLoopback(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// validAddrOrPrefix reports whether s is an IP address ("10.0.0.5") or a CIDR prefix ("10.0.0.0/8").
func validAddrOrPrefix(s string) bool {
	if _, err := netip.ParsePrefix(s); err == nil {
		return true
	}
	_, err := netip.ParseAddr(s)
	return err == nil
}

// snowflake reports whether id looks like a Discord id: 1 to 20 decimal digits.
func snowflake(id string) bool {
	if id == "" || len(id) > 20 {
		return false
	}
	for _, c := range id {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// validToolPrefix is what an MCP server's tool_prefix may hold (after {server} is replaced): the
// characters tool names may use.
var validToolPrefix = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// validatePolicy checks the [[tools.policy]] rules (tools.NewPolicy checks them again when the
// manager is built; this names the key before anything starts).
func (c *Config) validatePolicy(bad func(key, format string, args ...any)) {
	for i, r := range c.Tools.Policy {
		key := fmt.Sprintf("tools.policy[%d]", i)
		switch r.Action {
		case "allow", "ask", "deny":
		default:
			bad(key+".action", `must be "allow", "ask" or "deny", got %q`, r.Action)
		}
		if _, err := path.Match(r.Tool, ""); err != nil {
			bad(key+".tool", "%q is not a valid glob: %v", r.Tool, err)
		}
		switch r.Source {
		case "", "native", "plugin", "mcp", "skill":
		default:
			bad(key+".source", `must be "native", "plugin", "mcp" or "skill", got %q`, r.Source)
		}
		for _, role := range r.Roles {
			if id, ok := strings.CutPrefix(role, "discord_role:"); ok && snowflake(id) {
				continue
			}
			switch role {
			case "admins", "users", "chat_admins":
			default:
				bad(key+".roles", `%q must be "admins", "users", "chat_admins" or "discord_role:ID"`, role)
			}
		}
		for _, chat := range r.Chats {
			if p, rest, ok := strings.Cut(chat, ":"); !ok || p == "" || rest == "" {
				bad(key+".chats", `must look like "platform:chat_id", got %q`, chat)
			}
		}
		if len(r.Approvers) > 0 && r.Action != "ask" {
			bad(key+".approvers", `only an "ask" rule has approvers`)
		}
		for _, a := range r.Approvers {
			switch a {
			case "asker", "chat_admins", "admins":
			default:
				bad(key+".approvers", `%q must be "asker", "chat_admins" or "admins"`, a)
			}
		}
	}
}

// validateQuotas checks that no limit is negative and that overrides name users and roles.
func (c *Config) validateQuotas(bad func(key, format string, args ...any)) {
	limits := func(key string, l QuotaLimits) {
		if l.TokensPerDay < 0 || l.TokensPerMonth < 0 || l.CostPerDay < 0 || l.CostPerMonth < 0 ||
			math.IsNaN(l.CostPerDay) || math.IsNaN(l.CostPerMonth) {
			bad(key, "limits must be 0 (no limit) or more")
		}
	}
	limits("quotas.user", c.Quotas.User)
	limits("quotas.chat", c.Quotas.Chat)
	for i, o := range c.Quotas.Overrides {
		key := fmt.Sprintf("quotas.overrides[%d]", i)
		limits(key, o.QuotaLimits)
		if len(o.Users) == 0 && len(o.Roles) == 0 {
			bad(key, "must list users or roles")
		}
		for _, u := range o.Users {
			if p, rest, ok := strings.Cut(u, ":"); !ok || p == "" || rest == "" {
				bad(key+".users", `must look like "platform:id" or "*:id", got %q`, u)
			}
		}
		for _, r := range o.Roles {
			if id, ok := strings.CutPrefix(r, "discord_role:"); !(ok && snowflake(id)) && r != "chat_admins" {
				bad(key+".roles", `%q must be "discord_role:ID" or "chat_admins"`, r)
			}
		}
	}
}
