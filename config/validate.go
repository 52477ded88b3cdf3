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
	"slices"
	"strings"
	"time"
	_ "time/tzdata" // default_timezone is checked on hosts without a zoneinfo database

	"relaybot/chat"
	"relaybot/policy"
)

// validate checks every key and returns all problems at once, each naming its key.
func (c *Config) validate(missing map[string][]string) error {
	p := &problems{missing: missing}
	c.validateOTel(p)
	c.validateStorage(p)
	names := c.validateModels(p)
	c.validateAgent(p)
	c.validateChat(p, names)
	c.validateAccess(p)
	c.validateTools(p)
	c.validateWebTools(p)
	c.validatePolicy(p.bad)
	c.validateQuotas(p.bad)
	c.validateTelegram(p)
	c.validateDiscord(p)
	c.validateMCP(p)
	c.validateAdmin(p)
	c.validateMedia(p.bad, p.httpURL)
	c.validateMemory(p, names)
	c.validateKnowledge(p)
	c.validateTasks(p)
	return errors.Join(p.errs...)
}

// problems collects what validate found wrong, one error per key. missing maps a key to the
// environment variables its ${ENV} references named that were not set, so an empty value can say
// which variable to set.
type problems struct {
	errs    []error
	missing map[string][]string
}

// bad records that key is wrong and why.
func (p *problems) bad(key, format string, args ...any) {
	p.errs = append(p.errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
}

// required records an empty val, naming the unset environment variable when there is one.
func (p *problems) required(key, val string) {
	if val != "" {
		return
	}
	if vars := p.missing[key]; len(vars) > 0 {
		p.bad(key, "empty: environment variable %s is not set", strings.Join(vars, ", "))
		return
	}
	p.bad(key, "must be set")
}

// between records a v outside lo..hi (both included).
func (p *problems) between(key string, v, lo, hi int) {
	if v < lo || v > hi {
		p.bad(key, "must be between %d and %d, got %d", lo, hi, v)
	}
}

// httpURL records a v that is not an absolute http or https URL with a host.
func (p *problems) httpURL(key, v string) {
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		p.bad(key, "must be an http(s) URL, got %q", v)
	}
}

// validateOTel checks [otel]: both URLs are optional.
func (c *Config) validateOTel(p *problems) {
	if c.OTel.Endpoint != "" {
		p.httpURL("otel.endpoint", c.OTel.Endpoint)
	}
	if c.OTel.TraceURL != "" {
		p.httpURL("otel.trace_url", c.OTel.TraceURL)
		if !strings.Contains(c.OTel.TraceURL, "{trace_id}") {
			p.bad("otel.trace_url", "must contain {trace_id}, got %q", c.OTel.TraceURL)
		}
	}
}

// validateStorage checks [storage].
func (c *Config) validateStorage(p *problems) {
	p.required("storage.dsn", c.Storage.DSN)
	p.durationBetween("storage.retention_days", c.Storage.Retention, 0, 36500)
}

// validateModels checks the [[models]] entries and returns their names, which other sections
// refer to.
func (c *Config) validateModels(p *problems) map[string]bool {
	if len(c.Models) == 0 {
		p.bad("models", "at least one [[models]] entry is required")
	}
	names := map[string]bool{}
	for i, m := range c.Models {
		key := fmt.Sprintf("models[%d]", i)
		p.required(key+".model", m.Model)
		p.required(key+".base_url", m.BaseURL)
		if m.BaseURL != "" {
			p.httpURL(key+".base_url", m.BaseURL)
		}
		p.durationBetween(key+".timeout_sec", m.Timeout, 1, 3600)
		p.between(key+".context_window", m.ContextWindow, 1024, 100_000_000)
		if m.MaxOutputTokens < 1 || m.MaxOutputTokens > m.ContextWindow/2 {
			p.bad(key+".max_output_tokens", "must be between 1 and half of context_window (%d), got %d", m.ContextWindow/2, m.MaxOutputTokens)
		}
		if names[m.Name] {
			p.bad(key+".name", "duplicate model name %q", m.Name)
		}
		names[m.Name] = true
		if m.PriceIn < 0 || m.PriceOut < 0 || math.IsNaN(m.PriceIn) || math.IsNaN(m.PriceOut) {
			p.bad(key+".price_in", "prices must be 0 or more, got price_in %v, price_out %v", m.PriceIn, m.PriceOut)
		}
		if m.PriceCachedIn < 0 || m.PriceCacheWrite < 0 || math.IsNaN(m.PriceCachedIn) || math.IsNaN(m.PriceCacheWrite) {
			p.bad(key+".price_cached_in", "prices must be 0 or more, got price_cached_in %v, price_cache_write %v", m.PriceCachedIn, m.PriceCacheWrite)
		}
		if vars := p.missing[key+".api_key"]; len(vars) > 0 {
			p.bad(key+".api_key", "empty: environment variable %s is not set", strings.Join(vars, ", "))
		}
	}
	return names
}

// validateAgent checks [agent].
func (c *Config) validateAgent(p *problems) {
	p.between("agent.max_tool_rounds", c.Agent.MaxToolRounds, 1, 1024)
	p.between("agent.stream_flush_chunks", c.Agent.StreamFlushChunks, 1, 1000)
	p.between("agent.history_rounds", c.Agent.HistoryRounds, 0, 1000)
	p.between("agent.tool_result_max_chars", c.Agent.ToolResultMaxChars, 100, 10_000_000)
	if c.Agent.CompactAt <= 0 || c.Agent.CompactAt > 1 {
		p.bad("agent.compact_at", "must be above 0 and at most 1, got %v", c.Agent.CompactAt)
	}
	if c.Agent.ToolResultShare <= 0 || c.Agent.ToolResultShare > 1 {
		p.bad("agent.tool_result_share", "must be above 0 and at most 1, got %v", c.Agent.ToolResultShare)
	}
}

// validateChat checks [chat]; models holds the [[models]] names selectable_models may use.
func (c *Config) validateChat(p *problems, models map[string]bool) {
	p.durationBetween("chat.idle_reset_minutes", c.Chat.IdleReset, 0, 525_600)
	for _, n := range c.Chat.SelectableModels {
		if !models[n] {
			p.bad("chat.selectable_models", "names no [[models]] entry: %q", n)
		}
	}
	p.between("chat.queue_size", c.Chat.QueueSize, 0, 1000)
	p.between("chat.max_turns_in_flight", c.Chat.MaxTurnsInFlight, 1, 100000)
	p.durationBetween("chat.turn_wait_sec", c.Chat.TurnWait, 0, 3600)
	p.between("chat.rate_limit_per_minute", c.Chat.RateLimitPerMin, 0, 100000)
	p.durationBetween("chat.shutdown_grace_sec", c.Chat.ShutdownGrace, 0, 3600)
	p.between("chat.max_image_bytes", c.Chat.MaxImageBytes, 0, 50<<20)
	p.durationBetween("chat.turn_timeout_sec", c.Chat.TurnTimeout, 1, 86400)
}

// validateAccess checks that every [access] list entry is a "platform:id" reference.
func (c *Config) validateAccess(p *problems) {
	for _, list := range []struct {
		key string
		ids []string
	}{
		{"access.allow_users", c.Access.AllowUsers}, {"access.deny_users", c.Access.DenyUsers},
		{"access.allow_chats", c.Access.AllowChats}, {"access.deny_chats", c.Access.DenyChats},
		{"access.admins", c.Access.Admins},
	} {
		for i, id := range list.ids {
			if !platformRef(id) {
				p.bad(fmt.Sprintf("%s[%d]", list.key, i), `must look like "platform:id" or "*:id", got %q`, id)
			}
		}
	}
}

// validateTools checks [tools] apart from its policy rules (validatePolicy).
func (c *Config) validateTools(p *problems) {
	for chat := range c.Tools.PerChat {
		if !platformRef(chat) {
			p.bad("tools.per_chat", `keys must look like "platform:chat_id", got %q`, chat)
		}
	}
	p.durationBetween("tools.approval_timeout_sec", c.Tools.ApprovalTimeout, 1, 86400)
	p.durationBetween("tools.elicitation_timeout_sec", c.Tools.ElicitationTimeout, 1, 86400)
	p.between("tools.max_parallel", c.Tools.MaxParallel, 1, 64)
	for i, g := range c.Tools.ParallelTools {
		if _, err := path.Match(g, ""); err != nil || strings.TrimSpace(g) == "" {
			p.bad(fmt.Sprintf("tools.parallel_tools[%d]", i), "must be a tool name or glob, got %q", g)
		}
	}
	p.between("tools.max_file_bytes", c.Tools.MaxFileBytes, 1, 2<<30)
	p.between("tools.max_files_per_turn", c.Tools.MaxFilesPerTurn, 1, 1000)
	p.durationBetween("tools.always_allow_days", c.Tools.AlwaysAllow, 1, 3650)
	p.between("tools.max_open_questions", c.Tools.MaxOpenQuestions, 1, 100)
}

// validateTelegram checks [telegram] when it is enabled.
func (c *Config) validateTelegram(p *problems) {
	t := c.Telegram
	if !t.Enabled {
		return
	}
	p.required("telegram.token", t.Token)
	if n := strings.Count(t.APIEndpoint, "%s"); n != 2 {
		p.bad("telegram.api_endpoint", `must contain two %%s (token, method), like "https://api.telegram.org/bot%%s/%%s", got %q`, t.APIEndpoint)
	}
	switch {
	case t.PaidBroadcast:
		p.between("telegram.global_per_second", t.GlobalPerSecond, 1, 1000)
	case t.GlobalPerSecond > 30:
		p.bad("telegram.global_per_second", "above 30 needs telegram.paid_broadcast = true (Telegram allows 30 messages a second otherwise), got %d", t.GlobalPerSecond)
	default:
		p.between("telegram.global_per_second", t.GlobalPerSecond, 1, 30)
	}
	if f := t.OffsetFile; f != "" && f != OffsetFileOff {
		if strings.HasSuffix(f, "/") || strings.HasSuffix(f, string(filepath.Separator)) || filepath.Base(f) == "." || filepath.Base(f) == ".." {
			p.bad("telegram.offset_file", `must be a file path, "" (next to the SQLite database) or %q, got %q`, OffsetFileOff, f)
		} else if st, err := os.Stat(f); err == nil && !st.Mode().IsRegular() {
			p.bad("telegram.offset_file", "%s exists and is not a regular file", f)
		}
	}
	if t.Mode == "webhook" {
		p.required("telegram.webhook_listen", t.WebhookListen)
		p.required("telegram.webhook_url", t.WebhookURL)
		p.required("telegram.webhook_secret", t.WebhookSecret)
	}
}

// validateDiscord checks [discord] when it is enabled, and stores the parsed shard count.
func (c *Config) validateDiscord(p *problems) {
	if !c.Discord.Enabled {
		return
	}
	p.required("discord.token", c.Discord.Token)
	p.httpURL("discord.api_base", c.Discord.APIBase)
	p.between("discord.max_lines", c.Discord.MaxLines, 3, 1000)
	p.between("discord.global_per_second", c.Discord.GlobalPerSecond, 1, 100000)
	if !slices.Contains(DiscordAutoArchive, c.Discord.AutoArchive) {
		p.bad("discord.auto_archive", "must be one of %v minutes (Discord's archive durations), got %d", DiscordAutoArchive, c.Discord.AutoArchive)
	}
	if n, err := ParseDiscordShards(c.Discord.ShardsRaw); err != nil {
		p.bad("discord.shards", "%v", err)
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
		{"discord.thread_channels", c.Discord.ThreadChannels},
	} {
		for _, id := range l.ids {
			if !snowflake(id) {
				p.bad(l.key, "%q is not a Discord id (digits only)", id)
			}
		}
	}
}

// validateMCP checks the [[mcp.servers]] entries: unique names, what each transport needs, and
// that OAuth settings come together.
func (c *Config) validateMCP(p *problems) {
	seen := map[string]bool{}
	for i, s := range c.MCP.Servers {
		key := fmt.Sprintf("mcp.servers[%d]", i)
		p.required(key+".name", s.Name)
		if seen[s.Name] {
			p.bad(key+".name", "duplicate server name %q", s.Name)
		}
		seen[s.Name] = true
		switch s.Transport {
		case "stdio":
			p.required(key+".command", s.Command)
		case "sse", "http":
			p.required(key+".url", s.URL)
			if s.URL != "" {
				p.httpURL(key+".url", s.URL)
			}
		}
		p.durationBetween(key+".connect_timeout_sec", s.ConnectTimeout, 1, 600)
		p.durationBetween(key+".task_timeout_sec", s.TaskTimeout, 1, 7*24*3600)
		p.between(key+".max_message_bytes", s.MaxMessageBytes, 64<<10, 1<<30)
		validateMCPAttach(p, key, s)
		validateMCPAuth(p, key, s)
		if pre := s.ToolPrefix; pre != "" && !validToolPrefix.MatchString(strings.ReplaceAll(pre, "{server}", "x")) {
			p.bad(key+".tool_prefix", "may hold only letters, digits, _ and - (and {server}), got %q", pre)
		}
	}
}

// validateMCPAuth checks one MCP server's auth settings; key is the server's "mcp.servers[i]".
func validateMCPAuth(p *problems, key string, s MCPServer) {
	if s.Auth == "oauth" {
		if s.Transport == "stdio" {
			p.bad(key+".auth", `"oauth" is for remote servers (transport "sse" or "http"); a stdio server takes its credentials from env`)
		}
		if _, ok := s.Headers["Authorization"]; ok {
			p.bad(key+".headers", `an Authorization header and auth = "oauth" exclude each other`)
		}
	} else if s.ClientID != "" || s.ClientSecret != "" || len(s.Scopes) > 0 {
		p.bad(key+".auth", `client_id, client_secret and scopes are for auth = "oauth"`)
	}
	if s.ClientSecret != "" && s.ClientID == "" {
		p.bad(key+".client_secret", "needs client_id")
	}
}

// validateAdmin checks [admin] when it is enabled: an admin page reachable from other machines
// needs a token.
func (c *Config) validateAdmin(p *problems) {
	a := c.Admin
	if !a.Enabled {
		return
	}
	if _, _, err := net.SplitHostPort(a.Listen); err != nil {
		p.bad("admin.listen", "must be host:port, got %q", a.Listen)
	} else if !IsLoopback(a.Listen) && a.Token == "" {
		p.bad("admin.token", "must be set when admin.listen (%s) is not a loopback address", a.Listen)
	}
	if a.PublicURL != "" {
		p.httpURL("admin.public_url", a.PublicURL)
	}
	for i, pr := range a.TrustedProxies {
		if !validAddrOrPrefix(pr) {
			p.bad(fmt.Sprintf("admin.trusted_proxies[%d]", i), "must be an IP address or CIDR prefix (\"10.0.0.0/8\", \"::1\"), got %q", pr)
		}
	}
}

// platformRef reports whether s looks like "platform:id" (or "*:id"): two non-empty parts.
func platformRef(s string) bool {
	p, rest, ok := strings.Cut(s, ":")
	return ok && p != "" && rest != ""
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
			if !platformRef(chat) {
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
	limits := func(key string, l policy.Limits) {
		if l.TokensPerDay < 0 || l.TokensPerMonth < 0 || l.CostPerDay < 0 || l.CostPerMonth < 0 ||
			math.IsNaN(l.CostPerDay) || math.IsNaN(l.CostPerMonth) {
			bad(key, "limits must be 0 (no limit) or more")
		}
	}
	limits("quotas.user", c.Quotas.User)
	limits("quotas.chat", c.Quotas.Chat)
	for i, o := range c.Quotas.Overrides {
		key := fmt.Sprintf("quotas.overrides[%d]", i)
		limits(key, o.Limits)
		if len(o.Users) == 0 && len(o.Roles) == 0 {
			bad(key, "must list users or roles")
		}
		for _, u := range o.Users {
			if !platformRef(u) {
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

// validateTasks checks [tasks].
func (c *Config) validateTasks(p *problems) {
	t := c.Tasks
	if t.MaxPerUser < 1 || t.MaxPerUser > 10000 {
		p.bad("tasks.max_per_user", "must be between 1 and 10000, got %d", t.MaxPerUser)
	}
	if t.MinEvery.D() < time.Minute {
		p.bad("tasks.min_every", "must be at least 1m, got %s", t.MinEvery.D())
	}
	if t.MisfireGrace.D() < 0 || t.MisfireGrace.D() > 7*24*time.Hour {
		p.bad("tasks.misfire_grace", "must be between 0s and 168h, got %s", t.MisfireGrace.D())
	}
	if loc, err := time.LoadLocation(t.DefaultTimezone); err != nil || loc == nil || t.DefaultTimezone == "" || t.DefaultTimezone == "Local" {
		p.bad("tasks.default_timezone", "unknown time zone %q; use an IANA name such as Europe/Berlin", t.DefaultTimezone)
	}
}

// validateMCPAttach checks a server's attached resources: chat references as in [access], and
// resources and chats given together.
func validateMCPAttach(p *problems, key string, s MCPServer) {
	for j, ref := range s.AttachChats {
		if _, err := chat.ParseRef(ref); err != nil {
			p.bad(fmt.Sprintf("%s.attach_chats[%d]", key, j), `must look like "platform:chat" or "platform:chat#thread", got %q`, ref)
		}
	}
	for j, uri := range s.AttachResources {
		if strings.TrimSpace(uri) == "" {
			p.bad(fmt.Sprintf("%s.attach_resources[%d]", key, j), "must be a resource URI, got an empty one")
		}
	}
	switch {
	case len(s.AttachResources) > 0 && len(s.AttachChats) == 0:
		p.bad(key+".attach_chats", "must name the chats attach_resources go to")
	case len(s.AttachChats) > 0 && len(s.AttachResources) == 0:
		p.bad(key+".attach_resources", "must name the resources for attach_chats")
	}
}
