package main

import (
	"context"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/server"

	"relaybot/audit"
	"relaybot/config"
	"relaybot/internal/testkit/llm"
	mcpkit "relaybot/internal/testkit/mcp"
	astest "relaybot/internal/testkit/oauth"
)

// callModel calls the tool the user names ("call NAME") and then says what the tool said.
func callModel(r llm.Request) llm.Reply {
	last := r.Messages[len(r.Messages)-1]
	if last.Role == "tool" {
		return llm.Text("tool said: " + last.Content)
	}
	name := strings.TrimSpace(strings.TrimPrefix(last.Content, "call "))
	return llm.ToolCalls(llm.Call{ID: "c_" + name, Name: name, Args: []string{`{"text":"x"}`}})
}

// Before any admin logged in here, two OAuth servers without tool_prefix wait for a login.
// tracker's tools an earlier connection remembered in the database (another replica, an earlier
// run): a call to one of them is answered that an admin must log in, and the audit row says
// unavailable, naming tracker. wiki never connected anywhere: a call to a tool nobody is known
// to offer is answered not found, naming wiki as a server whose tools are unknown until an
// admin logs in.
func TestBeforeTheFirstLoginACallNamesTheServerThatNeedsIt(t *testing.T) {
	as := astest.Start(t, astest.Options{})
	kit := mcpkit.New("tracker")
	url := as.Protect(t, "/mcp", kit.Serve(server.NewStreamableHTTPServer(kit.Server)))
	e := newEnv(t)
	e.llm.SetHandler(callModel)
	st := e.openStore()
	ctx := context.Background()
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := st.MCPTools.RememberTools(ctx, "tracker", []string{"echo", "add"}); err != nil {
		t.Fatal(err)
	}
	cfg := e.config()
	tracker, wiki := cfg.MCP.Servers[0], cfg.MCP.Servers[0]
	tracker.Name, tracker.URL, tracker.Auth = "tracker", url, config.AuthOAuth
	wiki.Name, wiki.URL, wiki.Auth = "wiki", url, config.AuthOAuth
	cfg.MCP.Servers = []config.MCPServer{tracker, wiki}
	cfg.SecretKey = make([]byte, 32)
	e.start(cfg)

	e.say(4500, "call echo")
	said := e.waitBotText(4500, "the answer about echo", contains("tool said: "))
	if !strings.Contains(said, "MCP server tracker needs an admin to log in at /admin/servers (no one has yet)") {
		t.Errorf("a call to a remembered tool of tracker was answered %q; want that an admin must log in (a first login, not again)", said)
	}
	e.say(4500, "call lookup")
	said = e.waitBotText(4500, "the answer about lookup", contains("lookup"))
	if !strings.Contains(said, "Tool not found: lookup") || !strings.Contains(said, "wiki (needs an admin to log in)") ||
		strings.Contains(said, "tracker (") {
		t.Errorf("a call to an unknown tool was answered %q; want not found, naming wiki (not tracker) as waiting for a login", said)
	}
	rows, _, err := st.ToolCalls.ToolCalls(ctx, audit.Filter{})
	if err != nil || len(rows) != 2 {
		t.Fatalf("audit rows %+v, %v; want two", rows, err)
	}
	byTool := map[string]audit.Record{}
	for _, r := range rows {
		byTool[r.ToolName] = r
	}
	if r := byTool["echo"]; r.Status != audit.StatusUnavailable || r.Server != "tracker" || r.Source != audit.SourceMCP {
		t.Errorf("echo's audit row: %s, server %q, source %q; want unavailable, tracker, mcp", r.Status, r.Server, r.Source)
	}
	if r := byTool["lookup"]; r.Status != audit.StatusNotFound || r.Server != "" {
		t.Errorf("lookup's audit row: %s, server %q; want not_found, no server", r.Status, r.Server)
	}
	rows, _, err = st.ToolCalls.ToolCalls(ctx, audit.Filter{Statuses: []audit.Status{audit.StatusUnavailable}, Server: "tracker"})
	if err != nil || len(rows) != 1 {
		t.Errorf("filtering the audit by unavailable and tracker found %d rows (%v); want echo's", len(rows), err)
	}
}
