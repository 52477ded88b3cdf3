package main

import (
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"relaybot/config"
	"relaybot/policy"
	"relaybot/tools/mcp/oauth"
)

// The options that are a part's own (pipeline.Options, mcp.ServerConfig, the runner's, the tool
// manager's, speech's, the OAuth logins') are copied from the config in wire.go, a line a key
// (decision 042). These keys are read elsewhere, whole or by a part that takes the file's own
// type, so no copy of them is expected among the built options.
var keysReadElsewhere = map[string]string{
	"chat.shutdown_grace_sec": "serve's shutdown grace (shutdownGrace)",
	"chat.trigger_prefix":     "the platform adapters' options",
	"tools.plugins":           "plugin.NewLoader, as the list",
	"tools.skill_dirs":        "skill.Options, as the list",
	"tools.policy.":           "tools.NewPolicy takes the file's policy.Rule as it is",
	"memory.enabled":          "newMemory: whether memory is built at all",
	"memory.model":            "memoryOptions, as the name of a [[models]] entry (a changed name finds none: the first)",
}

// builtOptions are the parts' options wire.go builds from cfg, as far as they come from the file.
func builtOptions(cfg *config.Config) []any {
	return []any{pipelineOptions(cfg), agentModels(cfg.Models), runnerOptions(cfg), managerOptions(cfg),
		speechOptions(cfg), mcpServers(cfg.MCP.Servers, &oauth.Manager{}), oauthServers(cfg.MCP.Servers),
		memoryOptions(cfg), embedderOptions(cfg), knowledgeOptions(cfg), nativeOptions(cfg)}
}

// TestEveryKeyReachesThePartThatReadsIt changes one key of the shipped config.toml at a time
// (and of one entry of each array table it only shows in comments) and checks that the options
// a part is built with change with it: a key added to the file and forgotten in wire.go's copies
// would be accepted and then do nothing.
func TestEveryKeyReachesThePartThatReadsIt(t *testing.T) {
	data, err := os.ReadFile("../../config.toml")
	if err != nil {
		t.Fatal(err)
	}
	fresh := func() *config.Config {
		cfg, err := config.Parse(data, func(string) (string, bool) { return "", false })
		if err != nil {
			t.Fatalf("the shipped config.toml: %v", err)
		}
		// The array tables the file shows only in comments get one entry each, and [speech] a
		// model and a voice, so that their keys are walked and used.
		cfg.MCP.Servers = []config.MCPServer{{Name: "kit", Transport: config.TransportHTTP, URL: "http://127.0.0.1:1/mcp",
			ConnectTimeout: time.Second, ToolCallTimeout: time.Second, Auth: config.AuthOAuth}}
		cfg.Tools.Policy = []policy.Rule{{Tool: "echo", Action: policy.ActionAsk}}
		cfg.Quotas.Overrides = []policy.Override{{Users: []string{"telegram:1"}}}
		cfg.Speech.Model, cfg.Speech.BaseURL, cfg.Speech.Reply = "whisper-1", "http://127.0.0.1:1/v1", "always"
		cfg.Speech.Fallbacks = []config.SpeechModel{cfg.Speech.SpeechModel}
		cfg.Speech.Fallbacks[0].Name = "whisper-2"
		cfg.Embeddings.Model, cfg.Embeddings.BaseURL = "text-embedding-3-small", "http://127.0.0.1:1/v1"
		cfg.Embeddings.Fallbacks = []config.EmbeddingModel{cfg.Embeddings.EmbeddingModel}
		cfg.Embeddings.Fallbacks[0].Name = "embed-2"
		cfg.Tools.Images.BaseURL, cfg.Tools.Images.Model = "http://127.0.0.1:1/v1", "gpt-image-1"
		cfg.Knowledge.Bases = []config.KnowledgeBase{{Name: "handbook", Description: "the handbook", Chats: []string{"telegram:-100"},
			Mode: config.KnowledgeTool, MaxTokens: 1500}}
		return cfg
	}
	parts := []string{"models", "agent", "output", "chat", "access", "tools", "mcp", "quotas", "media", "speech", "memory", "embeddings", "knowledge"}
	want := builtOptions(fresh())
	var keys []string
	eachKey(reflect.ValueOf(fresh()).Elem(), "", func(key string, _ reflect.Value) { keys = append(keys, key) })
	checked := 0
	for _, key := range keys {
		section, _, _ := strings.Cut(key, ".")
		if !slices.Contains(parts, section) || readElsewhere(key) {
			continue
		}
		reached := false
		for try := 0; !reached; try++ {
			cfg, tried := fresh(), false
			eachKey(reflect.ValueOf(cfg).Elem(), "", func(k string, v reflect.Value) {
				if k == key {
					tried = change(t, key, v, try)
				}
			})
			if !tried {
				break
			}
			reached = !reflect.DeepEqual(builtOptions(cfg), want)
		}
		if !reached {
			t.Errorf("%s changed and no part's options changed: the key is read by nobody (a line missing in cmd/bot/wire.go, or list it in keysReadElsewhere with where it is read)", key)
		}
		checked++
	}
	if checked < 80 {
		t.Fatalf("only %d keys checked: the walk of the config lost its way", checked)
	}
}

func readElsewhere(key string) bool {
	for k := range keysReadElsewhere {
		if key == k || strings.HasSuffix(k, ".") && strings.HasPrefix(key, k) {
			return true
		}
	}
	return false
}

// eachKey calls fn with every key of config.toml under key (as "chat.queue_size"; an array
// table's keys through its first entry, "models.name") and the field that holds its value. A
// value kept as written (discord.shards, tool_call_timeout_sec) is given as its checked twin,
// the field the parts read.
func eachKey(v reflect.Value, key string, fn func(key string, v reflect.Value)) {
	t := v.Type()
	for i := range t.NumField() {
		f, fv := t.Field(i), v.Field(i)
		if f.Anonymous {
			eachKey(fv, key, fn)
			continue
		}
		name := f.Tag.Get("toml")
		if name == "" || name == "-" {
			continue
		}
		k := name
		if key != "" {
			k = key + "." + name
		}
		switch {
		case f.Type.Kind() == reflect.Struct:
			eachKey(fv, k, fn)
		case f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.Struct:
			if fv.Len() > 0 {
				eachKey(fv.Index(0), k, fn)
			}
		case f.Type.Kind() == reflect.Interface:
			fn(k, v.FieldByName(strings.TrimSuffix(f.Name, "Raw")))
		default:
			fn(k, fv)
		}
	}
}

// enumValues are the values of config's enums: a part may tell one value of an enum from the
// rest only ("anthropic" among the caches), so each is tried.
var enumValues = map[reflect.Type][]string{
	reflect.TypeFor[config.Cache]():             strs(config.Caches),
	reflect.TypeFor[config.ExceptionHandling](): strs(config.ExceptionHandlings),
	reflect.TypeFor[config.Reasoning]():         strs(config.Reasonings),
	reflect.TypeFor[config.Scope]():             strs(config.Scopes),
	reflect.TypeFor[config.Busy]():              strs(config.Busies),
	reflect.TypeFor[config.Transport]():         strs(config.Transports),
	reflect.TypeFor[config.MCPAuth]():           strs(config.MCPAuths),
	reflect.TypeFor[config.ParallelMode]():      strs(config.ParallelModes),
	reflect.TypeFor[config.SearchProvider]():    strs(config.SearchProviders),
	reflect.TypeFor[config.KnowledgeMode]():     strs(config.KnowledgeModes),
}

// change sets v to the try-th value other than the one it holds, and reports whether there was
// one: a string is changed by a letter, then set to each value of its enum.
func change(t *testing.T, key string, v reflect.Value, try int) bool {
	switch v.Kind() {
	case reflect.String:
		if try == 0 {
			v.SetString(v.String() + "x")
			return true
		}
		values := enumValues[v.Type()]
		if try > len(values) {
			return false
		}
		v.SetString(values[try-1])
		return true
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.Int, reflect.Int64:
		v.SetInt(v.Int() + 1)
	case reflect.Float64:
		v.SetFloat(v.Float() + 0.5)
	case reflect.Slice:
		e := reflect.New(v.Type().Elem()).Elem()
		change(t, key, e, 0)
		v.Set(reflect.Append(v, e))
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		for _, k := range v.MapKeys() {
			m.SetMapIndex(k, v.MapIndex(k))
		}
		e := reflect.New(v.Type().Elem()).Elem()
		change(t, key, e, 0)
		m.SetMapIndex(reflect.ValueOf("telegram:1"), e)
		v.Set(m)
	default:
		t.Fatalf("%s: the test cannot change a %s", key, v.Type())
	}
	return try == 0
}
