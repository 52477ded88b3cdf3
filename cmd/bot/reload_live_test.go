package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"

	"relaybot/config"
	"relaybot/internal/testkit/llm"
	mcpkit "relaybot/internal/testkit/mcp"
	"relaybot/internal/testkit/wait"
	"relaybot/internal/testkit/websearch"
	"relaybot/pipeline/knowledge"
	"relaybot/pipeline/memory"
)

// startReloadable runs the bot of c as serve does with SIGHUP, and returns its reload: it writes
// next (config.toml's text) as the bot's config file, sends SIGHUP, waits for the reload's log line and checks that it
// applied every key of want.
func (e *env) startReloadable(first string) (reload func(next string, want ...string), file string) {
	t := e.t
	file = filepath.Join(t.TempDir(), "config.toml")
	writeFile(t, file, first)
	cfg, err := config.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	hup := make(chan os.Signal, 1)
	e.startSignals(cfg, nil, hup)
	return func(next string, want ...string) {
		t.Helper()
		writeFile(t, file, next)
		const line = `msg="config reloaded"`
		n := strings.Count(e.logs.String(), line)
		hup <- syscall.SIGHUP
		wait.For(t, "the reload", func() bool { return strings.Count(e.logs.String(), line) > n })
		logs := e.logs.String()
		last := logs[strings.LastIndex(logs, line):]
		last = last[:strings.IndexByte(last, '\n')]
		for _, k := range want {
			if !strings.Contains(last, k) {
				t.Fatalf("the reload (%s) did not apply %s", last, k)
			}
		}
	}, file
}

// writeFile writes text as the config file path.
func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// adminAPI calls the admin API of the bot whose log e keeps, with the token, and decodes the
// answer into into (nil: not read); it returns the status.
func (e *env) adminAPI(method, path string, into any) int {
	t := e.t
	t.Helper()
	m := regexp.MustCompile(`admin listening" addr=(\S+)`).FindStringSubmatch(e.logs.String())
	if m == nil {
		t.Fatalf("no admin address in the logs")
	}
	return callAdmin(t, method, "http://"+m[1], path, reloadAdminToken, into)
}

// callAdmin calls the admin API at base with the bearer token and decodes the answer into into
// (nil: not read); it returns the status.
func callAdmin(t *testing.T, method, base, path, token string, into any) int {
	t.Helper()
	req, _ := http.NewRequest(method, base+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if into != nil {
		if err := json.NewDecoder(resp.Body).Decode(into); err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
	}
	return resp.StatusCode
}

// reloadAdminToken is the admin API's token of the reload tests.
const reloadAdminToken = "reload-admin-token"

// ask sends text from user id in their private chat and waits for the bot's next message there.
func (e *env) ask(id int64, text string) {
	e.t.Helper()
	n := len(e.botTexts(id))
	e.say(id, text)
	wait.For(e.t, "the answer to "+text, func() bool { return len(e.botTexts(id)) > n })
}

// offered reports whether the last model request of a turn in chat (its last user message is
// text) offered the tool.
func offered(reqs []llm.Request, text, tool string) bool {
	for i := len(reqs) - 1; i >= 0; i-- {
		if lastUser(reqs[i]) == text {
			return slices.Contains(reqs[i].Tools, tool)
		}
	}
	return false
}

// TestAReloadGivesAndTakesAKnowledgeBaseWithoutCuttingTheTurnThatSearchesIt starts the bot
// without the handbook's base: a chat is not offered search_knowledge. A reload that adds the
// base for that chat offers it at the next turn, which finds the passage. While a turn that was
// offered the tool streams, a reload moves the base to another chat in mode "auto": that turn's
// search still finds the passage, the chat's next turn is offered nothing, and the other chat's
// turns carry the base's chunks. The admin's knowledge API serves the base from the reload that
// added it, and the Settings API's reload names the keys it could not change (storage, a
// platform token) as needing a restart.
func TestAReloadGivesAndTakesAKnowledgeBaseWithoutCuttingTheTurnThatSearchesIt(t *testing.T) {
	e, km, c := knowledgeEnv(t, "tool", []string{"telegram:42"}, "parental leave weeks")
	c.set("admin", "enabled", true, "listen", "127.0.0.1:0", "token", reloadAdminToken)
	hold := make(chan struct{})
	e.llm.SetHandler(func(req llm.Request) llm.Reply {
		last := req.Messages[len(req.Messages)-1]
		switch {
		case last.Role == "user" && last.Content == "hold on, how long is it?":
			args, _ := json.Marshal(map[string]string{"query": "parental leave weeks"})
			return llm.Reply{Chunks: []llm.Chunk{{Content: "Looking it up."},
				{ToolCalls: []llm.ToolCallDelta{{Index: 0, ID: "call_held", Name: knowledge.ToolSearch, Arguments: string(args)}}, Wait: hold}}}
		case last.Role == "tool" && lastUser(req) == "hold on, how long is it?":
			return llm.Text("Found in flight: " + strings.Split(last.Content, "\n")[0])
		}
		return km.handle(req)
	})
	reload, file := e.startReloadable(c.without("knowledge.bases").String())
	e.waitLog("admin listening")
	const docs = "/api/v1/knowledge/handbook/documents"
	if code := e.adminAPI(http.MethodGet, docs, nil); code != http.StatusNotFound {
		t.Fatalf("GET %s before the base was configured: %d, want 404", docs, code)
	}

	e.ask(42, "how long is parental leave?")
	if offered(km.requests(), "how long is parental leave?", knowledge.ToolSearch) {
		t.Fatal("a chat was offered search_knowledge before any base was configured")
	}

	reload(c.String(), "knowledge.bases")
	var listed struct {
		Items []struct{ Name string } `json:"items"`
	}
	if code := e.adminAPI(http.MethodGet, docs, &listed); code != http.StatusOK || len(listed.Items) != 1 || listed.Items[0].Name != "handbook.md" {
		t.Fatalf("GET %s after the reload that added the base: %d %+v, want handbook.md", docs, code, listed)
	}
	e.say(42, "and now, how long?")
	e.waitBotText(42, "the cited answer after the base was added", contains("Sixteen weeks at full pay [1]."))

	e.say(42, "hold on, how long is it?")
	e.waitBotText(42, "the held turn's first words", contains("Looking it up."))
	moved := c.clone().set("knowledge.bases", "chats", []string{"telegram:43"}, "mode", "auto").
		set("storage", "dsn", e.db+".elsewhere").set("telegram", "token", "999:another")
	writeFile(t, file, moved.String())
	var out struct {
		Outcome          string
		Applied, Restart []string
	}
	if code := e.adminAPI(http.MethodPost, "/api/v1/settings/reload", &out); code != http.StatusOK || out.Outcome != "applied" ||
		!slices.Equal(out.Applied, []string{"knowledge.bases"}) || !slices.Equal(out.Restart, []string{"storage.dsn", "telegram.token"}) {
		t.Fatalf("POST /api/v1/settings/reload: %d %+v, want knowledge.bases applied and storage.dsn, telegram.token named for a restart", code, out)
	}
	close(hold)
	e.waitBotText(42, "the held turn's answer", contains("Found in flight: [1] handbook.md › Handbook › Leave › Parental leave"))

	e.ask(42, "still there?")
	reqs := km.requests()
	if offered(reqs, "still there?", knowledge.ToolSearch) {
		t.Fatal("the chat taken out of the base's chats was still offered search_knowledge")
	}
	if msgs := reqs[len(reqs)-1].Messages; strings.Contains(msgs[len(msgs)-2].Content, knowledge.BlockStart) {
		t.Fatal("the chat taken out of the base's chats got its chunks")
	}
	e.ask(43, "how long is parental leave?")
	reqs = km.requests()
	msgs := reqs[len(reqs)-1].Messages
	if n := len(msgs); n < 3 || !strings.Contains(msgs[n-2].Content, "[1] handbook.md › Handbook › Leave › Parental leave") {
		t.Fatalf("the chat the base moved to in mode auto got no chunks: %+v", msgs)
	}
}

// TestAReloadTurnsOnMemoryAndWebSearchAndANewEmbeddingModelReembedsTheFacts starts the bot
// without [memory] or [tools.web_search]: a reload that adds both offers their tools at the next
// turn and learns its fact; a reload that changes the embedding model re-embeds the facts in the
// background; a reload that takes both away offers neither tool again, and the queue's size
// changed with it is logged as needing a restart. A reload's [telegram] allowed_users refuses a
// user at once, and the next one lets them in again.
func TestAReloadTurnsOnMemoryAndWebSearchAndANewEmbeddingModelReembedsTheFacts(t *testing.T) {
	e, mm := newMemoryEnv(t, map[string]string{"my cat is called Tom": "Has a cat called Tom"})
	fake := websearch.New(websearch.SearXNG, websearch.Options{})
	t.Cleanup(fake.Close)
	off := e.toml()
	reload, _ := e.startReloadable(off.String())
	answers := func(text string) []llm.Request {
		t.Helper()
		e.ask(42, text)
		mm.mu.Lock()
		defer mm.mu.Unlock()
		return slices.Clone(mm.turns)
	}
	if reqs := answers("hello"); offered(reqs, "hello", memory.ToolSearch) || offered(reqs, "hello", "web_search") {
		t.Fatal("a turn was offered the memory's or web_search's tools before they were configured")
	}

	on := searchTools(memoryConfig(e), fake, "searxng", "")
	reload(on.String(), "memory.enabled", "embeddings.model", "tools.native", "tools.web_search.base_url")
	reqs := answers("my cat is called Tom")
	if !offered(reqs, "my cat is called Tom", memory.ToolSearch) || !offered(reqs, "my cat is called Tom", "web_search") {
		t.Fatalf("the turn after the reload was offered %q, without search_memory and web_search", reqs[len(reqs)-1].Tools)
	}
	wait.For(t, "the fact extracted", func() bool { return mm.extracted() == 1 })
	e.waitLog("memory updated")

	e.llm.SetEmbeddingDims("embed-b", 24)
	reload(on.clone().set("embeddings", "model", "embed-b").String(), "embeddings.model")
	e.waitLog(`memory: every fact has a vector" space=embed-b/24`)

	reload(off.clone().set("chat", "queue_size", 7).set("telegram", "allowed_users", []string{"42"}).String(),
		"memory.enabled", "tools.web_search.base_url", "telegram.allowed_users")
	e.waitLog(`config reload: these keys need a restart; their running values stay" keys=[chat.queue_size]`)
	e.say(43, "may I?")
	e.waitLog(`telegram: user not allowed" user=43`)
	reload(off.String(), "telegram.allowed_users")
	e.ask(43, "and now?")
	if reqs := answers("bye"); offered(reqs, "bye", memory.ToolSearch) || offered(reqs, "bye", "web_search") {
		t.Fatal("a turn after [memory] and [tools.web_search] were taken away was offered their tools")
	}
}

// TestAnMCPChangeRestartsOnlyTheServerChanged runs two MCP servers and, while a turn that called
// the first one's tool streams on, changes the second one's tool prefix: the turn's next call
// reaches the first server on the session it began with, the second is connected anew and its
// tools are offered under the new prefix, and once the turn has ended (its loader closed) the
// first server still answers on its one session.
func TestAnMCPChangeRestartsOnlyTheServerChanged(t *testing.T) {
	e := newEnv(t)
	kit2 := mcpkit.New("kit2")
	kit2.Legacy()
	srv2 := mcpkit.StartHTTP(t, kit2)
	second := func(prefix string) string {
		return fmt.Sprintf("[[mcp.servers]]\nname = \"two\"\ntransport = \"http\"\nurl = %q\nlocal = true\ntool_prefix = %q\n", srv2.URL, prefix)
	}
	c := e.toml().set("chat", "shutdown_grace_sec", 0).String()
	reload, _ := e.startReloadable(c + second("a_"))
	hold := make(chan struct{})
	e.llm.Push(echoCall("call_1", "Echo.", nil), echoCall("call_2", "Once more.", hold), llm.Text("Both echoed."))
	e.say(5, "echo twice")
	e.waitBotText(5, "the answer between the calls", contains("Once more."))
	if tools := e.llm.Requests()[0].Tools; !slices.Contains(tools, "echo") || !slices.Contains(tools, "a_echo") {
		t.Fatalf("the first turn was offered %q, want both servers' echo", tools)
	}

	reload(c+second("b_"), "mcp.servers")
	wait.For(t, "the changed server connected anew", func() bool { return srv2.SessionsStarted() == 2 })
	close(hold)
	e.waitBotText(5, "the answer after both calls", contains("Both echoed."))
	if n := e.kit.Calls("echo"); n != 2 {
		t.Fatalf("the unchanged server ran %d echo calls, want 2: the turn's second call did not reach it", n)
	}

	e.llm.Push(echoCall("call_3", "Third.", nil), llm.Text("Echoed again."))
	e.say(6, "echo once")
	e.waitBotText(6, "the answer after the old servers' loader closed", contains("Echoed again."))
	if n := e.kit.Calls("echo"); n != 3 {
		t.Fatalf("the unchanged server ran %d echo calls, want 3", n)
	}
	if n := e.mcp.SessionsStarted(); n != 1 {
		t.Fatalf("the unchanged server saw %d sessions, want its first only: the reload restarted it", n)
	}
	reqs := e.llm.Requests()
	if tools := reqs[len(reqs)-1].Tools; !slices.Contains(tools, "b_echo") || slices.Contains(tools, "a_echo") {
		t.Fatalf("the turn after the reload was offered %q, want the changed server's tools under b_ only", tools)
	}
}
