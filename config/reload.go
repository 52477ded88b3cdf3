package config

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// A running bot reloads its file on SIGHUP or the Settings page's Reload button (decision 054):
// the new file is parsed and validated like the first (Parse), then Reconcile keeps the running
// value of every key that cannot change while the bot runs and names it, so the parts are rebuilt
// from a config that is the new file where it may be and the old one where it must.

// liveKeys are the keys (a key, or a section ending in ".") whose change the running bot takes
// without a restart: the parts that read them are rebuilt and swapped for the next turn. Every
// other key (listen addresses, storage, platform tokens, the queue's sizes, and any section not
// listed, as a new one is until its part can be swapped) needs a restart. A part that becomes
// live adds its keys here and its rebuild to cmd/bot's reload.
var liveKeys = []string{
	"models", "agent.", "output.", "access.", "quotas.", "speech.", "mcp.servers",
	"media.document_share",
	"chat.turn_timeout_sec", "chat.help_text", "chat.busy_text", "chat.rate_limited_text", "chat.stopped_marker",
	"chat.idle_reset_minutes", "chat.selectable_models",
	"tools.allow", "tools.per_chat", "tools.policy", "tools.elicitation_timeout_sec", "tools.parallel",
	"tools.max_parallel", "tools.parallel_tools", "tools.max_file_bytes", "tools.max_files_per_turn",
	"tools.always_allow_days", "tools.native", "tools.fetch_allow_private", "tools.web_search.", "tools.images.",
	"memory.", "embeddings.", "knowledge.",
	"telegram.allowed_chats", "telegram.allowed_users",
	"discord.allowed_guilds", "discord.allowed_channels", "discord.allowed_roles", "discord.allow_dms",
}

// Touches reports whether one of the keys applied is one of keys or under one (a key ending in
// "." is a section): which parts a reload must rebuild.
func (c Changes) Touches(keys ...string) bool {
	for _, a := range c.Applied {
		a = strings.Split(a, "[")[0]
		for _, k := range keys {
			if a == k || strings.HasSuffix(k, ".") && strings.HasPrefix(a, k) {
				return true
			}
		}
	}
	return false
}

// Live reports whether a change of key (as Reconcile and Settings name it: "chat.busy_text",
// "models", "mcp.servers[0].url") is taken without a restart.
func Live(key string) bool {
	key = strings.Split(key, "[")[0]
	for _, k := range liveKeys {
		if key == k || strings.HasSuffix(k, ".") && strings.HasPrefix(key, k) {
			return true
		}
	}
	return false
}

// Changes are what a reload found between the running config and the file.
type Changes struct {
	// Applied are the keys whose new value the bot now runs with.
	Applied []string
	// Restart are the keys whose new value waits for a restart; the bot keeps running with the
	// old one.
	Restart []string
}

// None reports whether the file says what the running bot runs with.
func (c Changes) None() bool { return len(c.Applied) == 0 && len(c.Restart) == 0 }

// Reconcile compares the running config with a newly loaded one and returns the config to run
// with: next's values where they may change live, running's where a restart is needed (each
// named in Changes.Restart). An array of tables ([[models]], [[mcp.servers]]) is compared whole
// and named by its key. An MCP server with auth = "oauth" added, removed or changed needs a
// restart (its login is built once): [[mcp.servers]] then keeps running as it was.
func Reconcile(running, next *Config) (*Config, Changes) {
	applied := *next
	applied.sources = map[string]source{}
	var ch Changes
	old := map[string]reflect.Value{}
	eachLeaf(reflect.ValueOf(running).Elem(), "", func(key string, v reflect.Value) { old[key] = v })
	eachLeaf(reflect.ValueOf(&applied).Elem(), "", func(key string, v reflect.Value) {
		was := old[key]
		if reflect.DeepEqual(was.Interface(), v.Interface()) {
			return
		}
		live := Live(key)
		if key == "mcp.servers" && oauthChanged(running.MCP.Servers, next.MCP.Servers) {
			live = false
		}
		if live {
			ch.Applied = append(ch.Applied, key)
			return
		}
		v.Set(was)
		ch.Restart = append(ch.Restart, key)
	})
	for k, s := range next.sources {
		if Live(k) {
			applied.sources[k] = s
		}
	}
	for k, s := range running.sources {
		if !Live(k) {
			applied.sources[k] = s
		}
	}
	applied.SecretKey = running.SecretKey
	if slices.Contains(ch.Restart, "discord.shards") {
		applied.Discord.Shards = running.Discord.Shards
	}
	return &applied, ch
}

// oauthChanged reports whether the servers with auth = "oauth" differ between a and b.
func oauthChanged(a, b []MCPServer) bool {
	pick := func(ss []MCPServer) []MCPServer {
		var out []MCPServer
		for _, s := range ss {
			if s.Auth == AuthOAuth {
				out = append(out, s)
			}
		}
		return out
	}
	return !reflect.DeepEqual(pick(a), pick(b))
}

// eachLeaf calls fn with every key under v and its field: a section's keys one by one, an
// array of tables as one key.
func eachLeaf(v reflect.Value, key string, fn func(key string, v reflect.Value)) {
	t := v.Type()
	for i := range t.NumField() {
		f, fv := t.Field(i), v.Field(i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			eachLeaf(fv, key, fn)
			continue
		}
		name := f.Tag.Get("toml")
		if name == "" || name == "-" || !f.IsExported() {
			continue
		}
		if f.Type.Kind() == reflect.Struct && f.Type != durationType {
			eachLeaf(fv, join(key, name), fn)
			continue
		}
		fn(join(key, name), fv)
	}
}

// Source is where a key's running value came from.
type Source string

// The sources of a value.
const (
	// SourceDefault: the file leaves the key out.
	SourceDefault Source = "default"
	// SourceFile: the file sets it.
	SourceFile Source = "file"
	// SourceEnv: the file sets it from an environment variable (${NAME}) that is set.
	SourceEnv Source = "env"
)

// source is where one key's value came from, and the variables it read.
type source struct {
	from Source
	env  []string
}

// Setting is one key of the running configuration as the Settings page shows it.
type Setting struct {
	// Key is the key as the file writes it ("chat.busy_text", "models[0].api_key").
	Key string `json:"key"`
	// Value is the value as the file would write it; a secret's is "(set)" or empty.
	Value  string `json:"value"`
	Secret bool   `json:"secret,omitempty"`
	Source Source `json:"source"`
	// Env names the environment variables the value was read from.
	Env []string `json:"env,omitempty"`
	// Live says a change of the key is taken by a reload; otherwise it needs a restart.
	Live bool `json:"live"`
}

// secretNames are the keys whose values are never shown: their last part.
var secretNames = []string{"api_key", "tts_api_key", "token", "webhook_secret", "client_secret"}

// secretMaps are the keys whose values are maps of secrets (an MCP server's headers and env).
var secretMaps = []string{"headers", "env"}

// Settings lists every key of c with its value (secrets masked), where it came from and whether
// a reload changes it; an array of tables lists each entry's keys ("models[0].name").
func (c *Config) Settings() []Setting {
	var out []Setting
	var walk func(v reflect.Value, key string)
	walk = func(v reflect.Value, key string) {
		t := v.Type()
		for i := range t.NumField() {
			f, fv := t.Field(i), v.Field(i)
			if f.Anonymous && f.Type.Kind() == reflect.Struct {
				walk(fv, key)
				continue
			}
			name := f.Tag.Get("toml")
			if name == "" || name == "-" || !f.IsExported() {
				continue
			}
			k := join(key, name)
			switch {
			case f.Type.Kind() == reflect.Struct && f.Type != durationType:
				walk(fv, k)
			case f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.Struct:
				for j := range fv.Len() {
					walk(fv.Index(j), fmt.Sprintf("%s[%d]", k, j))
				}
			default:
				out = append(out, c.setting(k, name, checked(v, f, fv)))
			}
		}
	}
	walk(reflect.ValueOf(c).Elem(), "")
	return out
}

// checked is the field the parts read for f: a value kept as written (discord.shards,
// tool_call_timeout_sec) is shown as its checked twin.
func checked(parent reflect.Value, f reflect.StructField, fv reflect.Value) reflect.Value {
	if f.Type.Kind() == reflect.Interface {
		if twin := parent.FieldByName(strings.TrimSuffix(f.Name, "Raw")); twin.IsValid() {
			return twin
		}
	}
	return fv
}

// setting describes key (whose last part is name) holding v.
func (c *Config) setting(key, name string, v reflect.Value) Setting {
	s := Setting{Key: key, Live: Live(key), Source: SourceDefault}
	if src, ok := c.sources[key]; ok {
		s.Source, s.Env = src.from, src.env
	}
	// A list's or a map's entries read from the environment make the key's source env.
	for k, src := range c.sources {
		if src.from == SourceEnv && (strings.HasPrefix(k, key+".") || strings.HasPrefix(k, key+"[")) {
			s.Source, s.Env = SourceEnv, append(s.Env, src.env...)
		}
	}
	switch {
	case slices.Contains(secretNames, name):
		s.Secret = true
		if v.String() != "" {
			s.Value = "(set)"
		}
	case slices.Contains(secretMaps, name) && v.Kind() == reflect.Map:
		s.Secret = true
		var keys []string
		for _, k := range v.MapKeys() {
			keys = append(keys, k.String()+"=(set)")
		}
		sort.Strings(keys)
		s.Value = strings.Join(keys, ", ")
	case name == "dsn":
		s.Value = maskDSN(v.String())
		s.Secret = s.Value != v.String()
	default:
		s.Value = renderValue(key, v)
	}
	return s
}

// renderValue writes v as the file would.
func renderValue(key string, v reflect.Value) string {
	if v.Type() == durationType {
		return inUnit(key, time.Duration(v.Int()))
	}
	if v.Kind() == reflect.String {
		return v.String()
	}
	b, err := json.Marshal(v.Interface())
	if err != nil {
		return fmt.Sprint(v.Interface())
	}
	return string(b)
}

// maskDSN hides a database URL's password (postgres://bot:secret@host/db) and a key=value DSN's
// password= value.
func maskDSN(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
			return u.String()
		}
	}
	fields := strings.Fields(dsn)
	for i, f := range fields {
		if strings.HasPrefix(strings.ToLower(f), "password=") {
			fields[i] = "password=xxxxx"
			return strings.Join(fields, " ")
		}
	}
	return dsn
}

// Digest names the running configuration in 12 hex digits: two replicas with the same digest run
// with the same values (the file's and the environment's). Secrets enter only as a SHA-256 of the
// whole, which the digest's 48 bits are a part of.
func (c *Config) Digest() string {
	h := sha256.New()
	eachLeaf(reflect.ValueOf(c).Elem(), "", func(key string, v reflect.Value) {
		b, _ := json.Marshal(v.Interface())
		fmt.Fprintf(h, "%s=%s\n", key, b)
	})
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// sourcesOf records where each key came from: the keys the file set (md, its [[tables]] counted
// into entry indices), and among them those read from environment variables that were set.
func sourcesOf(md toml.MetaData, env map[string][]string) map[string]source {
	out := map[string]source{}
	entries := map[string]int{}
	for _, k := range md.Keys() {
		path := k.String()
		if md.Type(k...) == "ArrayHash" {
			entries[path]++
			continue
		}
		for n := len(k) - 1; n >= 1; n-- {
			table := toml.Key(k[:n]).String()
			if c, ok := entries[table]; ok {
				path = fmt.Sprintf("%s[%d].%s", table, c-1, toml.Key(k[n:]).String())
				break
			}
		}
		out[path] = source{from: SourceFile}
	}
	for key, names := range env {
		out[key] = source{from: SourceEnv, env: names}
	}
	return out
}
