package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"relaybot/config"
	dtk "relaybot/internal/testkit/discord"
	"relaybot/internal/testkit/llm"
	"relaybot/internal/testkit/wait"
	"relaybot/pipeline/knowledge"
)

// faqMD is the "auto" base's document of the scope tests.
const faqMD = "# FAQ\n\n## Wifi\n\nThe wifi password is on the fridge.\n"

// scopeBases configures, for the chats given, a "tool" base holding handbook.md and an "auto"
// base holding faq.md, and adds the documents with bot knowledge add.
func scopeBases(t *testing.T, e *env, chats []string) *config.Config {
	t.Helper()
	c := e.toml().set("embeddings", "base_url", e.llm.URL, "model", "embed-a")
	cfg := c.parse(t)
	cfg.Knowledge.Bases = []config.KnowledgeBase{
		{Name: "handbook", Description: "the staff handbook", Chats: chats, Mode: config.KnowledgeTool, MaxTokens: 400},
		{Name: "faq", Description: "answers to common questions", Chats: chats, Mode: config.KnowledgeAuto, MaxTokens: 400},
	}
	ctx := context.Background()
	if err := runMigrate(ctx, cfg, nil, &strings.Builder{}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for base, doc := range map[string][2]string{"handbook": {"handbook.md", handbookMD}, "faq": {"faq.md", faqMD}} {
		path := filepath.Join(dir, doc[0])
		if err := os.WriteFile(path, []byte(doc[1]), 0o600); err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		if err := runKnowledge(ctx, cfg, []string{"add", "-base", base, path}, &out); err != nil {
			t.Fatalf("bot knowledge add -base %s: %v\n%s", base, err, out.String())
		}
	}
	return cfg
}

// scopeTurn is what the model saw in the turn of the user message holding tag.
type scopeTurn struct {
	offered bool
	// block is the knowledge block put into the turn ("" when none); toolResult what
	// search_knowledge answered.
	block, toolResult string
}

func scopeTurnOf(reqs []llm.Request, tag string) (scopeTurn, bool) {
	var st scopeTurn
	found := false
	for _, r := range reqs {
		if !strings.Contains(lastUser(r), tag) {
			continue
		}
		found = true
		st.offered = st.offered || slices.Contains(r.Tools, knowledge.ToolSearch)
		for _, m := range r.Messages {
			if m.Role == "system" && strings.HasPrefix(m.Content, knowledge.BlockStart) {
				st.block = m.Content
			}
		}
		if m := r.Messages[len(r.Messages)-1]; m.Role == "tool" {
			st.toolResult = m.Content
		}
	}
	return st, found
}

// checkScope says what is wrong with the turn tagged tag: in a chat the bases serve, the tool is
// offered and finds the handbook's passage and the FAQ's passage comes into the turn; elsewhere
// neither, and the call the model makes anyway is refused.
func checkScope(t *testing.T, km *knowledgeModel, tag string, served bool) {
	t.Helper()
	var st scopeTurn
	wait.For(t, "the search_knowledge result of the turn "+tag, func() bool {
		var ok bool
		st, ok = scopeTurnOf(km.requests(), tag)
		return ok && st.toolResult != ""
	})
	if served {
		if !st.offered || !strings.Contains(st.toolResult, "sixteen weeks") || !strings.Contains(st.block, "on the fridge") {
			t.Errorf("%s, a chat the bases serve: offered %v, the tool found %q, the turn's block %q; want the tool offered, the handbook's passage and the FAQ's",
				tag, st.offered, st.toolResult, st.block)
		}
		return
	}
	if st.offered || st.block != "" || strings.Contains(st.toolResult, "sixteen") || !strings.Contains(st.toolResult, "search_knowledge is not available in this chat") {
		t.Errorf("%s, a chat no base serves: offered %v, the turn's block %q, the forced call answered %q; want nothing offered, no block, the call refused",
			tag, st.offered, st.block, st.toolResult)
	}
}

// On Discord a base serves the channel it names and that channel's threads, in both modes, and
// no other channel or DM: there the tool is not offered, no passage comes into the turn, and a
// call made anyway is refused. The served answer ends with its Sources as a footer (subtext
// lines, the Markdown in a place's name escaped).
func TestOnDiscordABaseServesItsChannelAndItsThreadsOnly(t *testing.T) {
	e := newEnv(t)
	dc := dtk.New(dtk.Config{})
	t.Cleanup(dc.Close)
	const guild, channel, thread, other, dm = "900000000000000001", "800000000000000001", "800000000000000002",
		"800000000000000003", "500000000000000001"
	dc.AddChannel(dtk.Channel{ID: channel, GuildID: guild, Type: dtk.ChannelGuildText})
	dc.AddChannel(dtk.Channel{ID: thread, GuildID: guild, ParentID: channel, Type: dtk.ChannelPublicThread})
	dc.AddChannel(dtk.Channel{ID: other, GuildID: guild, Type: dtk.ChannelGuildText})
	e.discord = []any{"enabled", true, "token", dc.Token(), "api_base", dc.APIBase()}
	km := &knowledgeModel{query: "parental leave weeks", force: true}
	e.llm.SetHandler(km.handle)
	e.start(scopeBases(t, e, []string{"discord:" + channel}))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := dc.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, channel, guild string
		served               bool
	}{
		{"the channel", channel, guild, true},
		{"a thread of the channel", thread, guild, true},
		{"another channel", other, guild, false},
		{"a DM", dm, "", false},
	} {
		tag := "(" + tc.name + ")"
		um := dtk.UserMessage{ChannelID: tc.channel, GuildID: tc.guild, AuthorID: "600", Content: "wifi password and parental leave? " + tag}
		if tc.guild != "" {
			um.MentionBot, um.Content = true, "<@100000000000000001> "+um.Content
		}
		if _, err := dc.Post(um); err != nil {
			t.Fatal(err)
		}
		checkScope(t, km, tag, tc.served)
		wait.Until(t, "the answer in "+tc.name, func() error {
			var got []string
			for _, m := range dc.BotMessages(tc.channel) {
				if tc.served && strings.Contains(m.Content, "Sixteen weeks at full pay [1].") && strings.Contains(m.Content, "-# 📚 Sources\n") &&
					strings.Contains(m.Content, `handbook\.md › Handbook › Leave › Parental leave`) {
					return nil
				}
				if !tc.served && strings.Contains(m.Content, "No passage") {
					return nil
				}
				got = append(got, m.Content)
			}
			return fmt.Errorf("the bot posted %q", got)
		})
	}
}

// In the web chat a base that names other chats is not offered and none of its passages come
// into a turn, in either mode, and a call naming it is refused; a base of every chat serves the
// web chat too, and its answer ends with its folded Sources.
func TestInTheWebChatOnlyABaseOfEveryChatServes(t *testing.T) {
	e := newEnv(t)
	km := &knowledgeModel{query: "parental leave weeks", force: true}
	e.llm.SetHandler(km.handle)
	c := e.toml().set("admin", webChatAdmin...).set("embeddings", "base_url", e.llm.URL, "model", "embed-a")
	cfg := c.parse(t)
	cfg.Knowledge.Bases = []config.KnowledgeBase{
		{Name: "handbook", Description: "the staff handbook", Chats: []string{"telegram:42"}, Mode: config.KnowledgeTool, MaxTokens: 400},
		{Name: "faq", Description: "answers to common questions", Chats: []string{"telegram:42"}, Mode: config.KnowledgeAuto, MaxTokens: 400},
		{Name: "public", Description: "the public leaflet", Mode: config.KnowledgeTool, MaxTokens: 400},
	}
	ctx := context.Background()
	if err := runMigrate(ctx, cfg, nil, &strings.Builder{}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, d := range []struct{ base, name, text string }{
		{"handbook", "handbook.md", handbookMD},
		{"faq", "faq.md", faqMD},
		{"public", "leaflet.md", "# Leaflet\n\n## Leave\n\nVisitors ask at the front desk about parental leave forms."},
	} {
		path := filepath.Join(dir, d.name)
		os.WriteFile(path, []byte(d.text), 0o600)
		var out strings.Builder
		if err := runKnowledge(ctx, cfg, []string{"add", "-base", d.base, path}, &out); err != nil {
			t.Fatalf("bot knowledge add -base %s: %v\n%s", d.base, err, out.String())
		}
	}
	e.start(cfg)
	w := openWebChatOf(t, e)

	w.say("wifi password and parental leave? (web, any base)")
	w.waitMsg("the web chat's answer from the public base", func(m webMsg) bool {
		return m.Role == "bot" && strings.Contains(m.HTML, "[1] leaflet.md › Leaflet › Leave") && strings.Contains(m.HTML, "<details")
	})
	st, _ := scopeTurnOf(km.requests(), "(web, any base)")
	if !st.offered || st.block != "" || !strings.Contains(st.toolResult, "front desk") || strings.Contains(st.toolResult, "sixteen") {
		t.Fatalf("web chat: offered %v, block %q, the tool found %q; want the tool offered, no block, the public base's passage alone", st.offered, st.block, st.toolResult)
	}
	if desc := toolDescription(t, km.requests(), "(web, any base)", knowledge.ToolSearch); !strings.Contains(desc, `"public"`) || strings.Contains(desc, "handbook") {
		t.Fatalf("in the web chat search_knowledge is described as %q; want the public base named and no other", desc)
	}

	km.setBase("handbook")
	w.say("wifi password and parental leave? (web, the handbook by name)")
	wait.For(t, "the call naming the handbook in the web chat", func() bool {
		st, _ = scopeTurnOf(km.requests(), "(web, the handbook by name)")
		return st.toolResult != ""
	})
	if st.block != "" || strings.Contains(st.toolResult, "sixteen") || !strings.Contains(st.toolResult, `no knowledge base "handbook"`) {
		t.Fatalf("web chat, the handbook by name: block %q, the call answered %q; want no block and the call refused", st.block, st.toolResult)
	}

	// The same call in the chat the bases name is served: the refusal above is the scope's.
	e.say(42, "wifi password and parental leave? (telegram:42)")
	checkScope(t, km, "(telegram:42)", true)
}

// toolDescription is the description of the tool name as offered in the turn tagged tag.
func toolDescription(t *testing.T, reqs []llm.Request, tag, name string) string {
	t.Helper()
	for _, r := range reqs {
		if !strings.Contains(lastUser(r), tag) {
			continue
		}
		var body struct {
			Tools []struct {
				Function struct{ Name, Description string } `json:"function"`
			} `json:"tools"`
		}
		if err := json.Unmarshal(r.Body, &body); err != nil {
			t.Fatal(err)
		}
		for _, tl := range body.Tools {
			if tl.Function.Name == name {
				return tl.Function.Description
			}
		}
	}
	return ""
}

// openWebChatOf opens the web chat of the bot e runs (its admin listener's).
func openWebChatOf(t *testing.T, e *env) *webChat {
	t.Helper()
	e.waitLog("admin listening")
	m := regexp.MustCompile(`admin listening" addr=(\S+)`).FindStringSubmatch(e.logs.String())
	if m == nil {
		t.Fatalf("no admin address in the logs:\n%s", e.logs.String())
	}
	return openWebChat(t, "http://"+m[1])
}
