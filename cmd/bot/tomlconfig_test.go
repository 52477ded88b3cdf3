package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"relaybot/config"
)

// tomlConfig is a config.toml a test builds: sections in the order first named, keys in the
// order first set, each value written as TOML. A child process reads it from a file (write);
// a test in this process parses it (parse), so every config these tests run went through the
// same parser as an operator's.
type tomlConfig struct {
	sections []*tomlSection
}

// tomlSection is one table of a tomlConfig.
type tomlSection struct {
	name   string
	keys   []string
	values map[string]any
}

// arrayTables are the tables config.toml lists as arrays ([[models]]); these tests configure
// one of each.
var arrayTables = []string{"models", "mcp.servers", "speech.fallbacks", "tools.policy", "knowledge.bases"}

// set sets keys of section, given as pairs: set("chat", "queue_size", 1, "busy", "queue").
// A value is a string, an int, a float64, a bool or a []string.
func (c *tomlConfig) set(section string, pairs ...any) *tomlConfig {
	if len(pairs)%2 != 0 {
		panic(fmt.Sprintf("tomlConfig.set(%q): keys and values come in pairs, got %d", section, len(pairs)))
	}
	s := c.section(section)
	for i := 0; i < len(pairs); i += 2 {
		key := pairs[i].(string)
		if _, ok := s.values[key]; !ok {
			s.keys = append(s.keys, key)
		}
		s.values[key] = pairs[i+1]
	}
	return c
}

func (c *tomlConfig) section(name string) *tomlSection {
	for _, s := range c.sections {
		if s.name == name {
			return s
		}
	}
	s := &tomlSection{name: name, values: map[string]any{}}
	c.sections = append(c.sections, s)
	return s
}

// clone is a copy of c that the copy's set calls leave alone.
func (c *tomlConfig) clone() *tomlConfig {
	out := &tomlConfig{}
	for _, s := range c.sections {
		for _, k := range s.keys {
			out.set(s.name, k, s.values[k])
		}
	}
	return out
}

// String renders c as config.toml text.
func (c *tomlConfig) String() string {
	var b strings.Builder
	for _, s := range c.sections {
		if slices.Contains(arrayTables, s.name) {
			fmt.Fprintf(&b, "[[%s]]\n", s.name)
		} else {
			fmt.Fprintf(&b, "[%s]\n", s.name)
		}
		for _, k := range s.keys {
			fmt.Fprintf(&b, "%s = %s\n", k, tomlValue(s.values[k]))
		}
	}
	return b.String()
}

// tomlValue writes v as a TOML value.
func tomlValue(v any) string {
	switch v := v.(type) {
	case string:
		return strconv.Quote(v)
	case int:
		return strconv.Itoa(v)
	case bool:
		return strconv.FormatBool(v)
	case float64:
		f := strconv.FormatFloat(v, 'f', -1, 64)
		if !strings.ContainsAny(f, ".eE") {
			f += ".0" // a TOML float, not an integer
		}
		return f
	case []string:
		quoted := make([]string, len(v))
		for i, s := range v {
			quoted[i] = strconv.Quote(s)
		}
		return "[" + strings.Join(quoted, ", ") + "]"
	}
	panic(fmt.Sprintf("tomlConfig: no TOML for %T", v))
}

// parse reads c as the bot reads its config file.
func (c *tomlConfig) parse(t testing.TB) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(c.String()), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatalf("config: %v\n%s", err, c)
	}
	return cfg
}

// write saves c in a file of the test's own and returns its path.
func (c *tomlConfig) write(t testing.TB) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(path, []byte(c.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// webChatAdmin is the [admin] section of a bot serving the web chat on a port of its own.
var webChatAdmin = []any{"enabled", true, "listen", "127.0.0.1:0", "web_chat", true}

// TestTheConfigBuilderWritesWhatTheParserReads: strings (quotes and backslashes in them too),
// numbers, booleans, lists and array tables come back from the bot's parser as they were set,
// and setting a key again replaces its value.
func TestTheConfigBuilderWritesWhatTheParserReads(t *testing.T) {
	dsn := `C:\data\"bot".db`
	cfg := (&tomlConfig{}).
		set("storage", "dsn", dsn).
		set("models", "name", "primary", "base_url", "http://127.0.0.1:1/v1", "model", "m").
		set("chat", "queue_size", 3, "queue_size", 4).
		set("access", "admins", []string{"telegram:1", "discord:2"}).
		set("telegram", "enabled", false).
		parse(t)
	if cfg.Storage.DSN != dsn || cfg.Chat.QueueSize != 4 || len(cfg.Models) != 1 || cfg.Models[0].Name != "primary" ||
		strings.Join(cfg.Access.Admins, " ") != "telegram:1 discord:2" || cfg.Telegram.Enabled {
		t.Fatalf("the parser read dsn %q, queue_size %d, models %+v, admins %q, telegram %v",
			cfg.Storage.DSN, cfg.Chat.QueueSize, cfg.Models, cfg.Access.Admins, cfg.Telegram.Enabled)
	}
}
