package main

import (
	"context"
	"net/http"
	"net/url"
	"os"
	osexec "os/exec"
	"strings"
	"testing"

	"relaybot/audit"
	"relaybot/internal/testkit/llm"
)

// everythingEntry is the MCP reference server's entry point (.ci/run installs it and sets
// BOT_TEST_MCP_EVERYTHING), or the test is skipped saying why.
func everythingEntry(t *testing.T) string {
	t.Helper()
	entry := os.Getenv("BOT_TEST_MCP_EVERYTHING")
	if entry == "" {
		t.Skip("BOT_TEST_MCP_EVERYTHING is not set: the MCP reference server is not installed " +
			"(npm ci in .ci/mcp-everything, then point it at node_modules/@modelcontextprotocol/server-everything/dist/index.js)")
	}
	if _, err := os.Stat(entry); err != nil {
		t.Fatalf("BOT_TEST_MCP_EVERYTHING: %v", err)
	}
	if _, err := osexec.LookPath("node"); err != nil {
		t.Fatalf("BOT_TEST_MCP_EVERYTHING is set but node is not on PATH: %v", err)
	}
	return entry
}

// The reference server's elicitation form (every field kind of MCP 2025-11-25: formats,
// bounds, defaults, untitled, titled and legacy single-selects, untitled and titled
// multi-selects), through the real pipeline in the web chat: the whole form is shown with
// its defaults, the multi-selects as option lists, and the user's answer reaches the server
// typed, the multi-selects as lists of strings, where it used to be declined unseen.
func TestReferenceServerElicitationFormInTheWebChat(t *testing.T) {
	entry := everythingEntry(t)
	model := func(r llm.Request) llm.Reply {
		last := r.Messages[len(r.Messages)-1]
		if last.Role == "tool" {
			return llm.Text("tool said: " + last.Content)
		}
		return llm.ToolCalls(llm.Call{ID: "el1", Name: "trigger-elicitation-request", Args: []string{`{}`}})
	}
	e, w := startWebBotWith(t, model, 300, func(c *tomlConfig) {
		s := c.section("mcp.servers")
		s.keys, s.values = nil, map[string]any{}
		c.set("mcp.servers", "name", "everything", "transport", "stdio", "command", "node", "args", []string{entry, "stdio"})
	})
	e.waitLog(`msg="MCP server connected" mcp_server=everything`)
	w.say("fill in the form")
	q := w.waitMsg("the reference server's form", func(m webMsg) bool { return m.Question != "" && len(m.Form) > 0 })
	kinds := map[string]string{}
	defaults := map[string][]string{}
	for _, f := range q.Form {
		kinds[f.Name], defaults[f.Name] = f.Kind, f.Default
	}
	for name, kind := range map[string]string{"name": "text", "check": "boolean", "email": "text", "integer": "integer",
		"number": "number", "untitledSingleSelectEnum": "enum", "titledSingleSelectEnum": "enum", "legacyTitledEnum": "enum",
		"untitledMultipleSelectEnum": "multi", "titledMultipleSelectEnum": "multi"} {
		if kinds[name] != kind {
			t.Errorf("field %s is shown as %q, want %q", name, kinds[name], kind)
		}
	}
	if len(q.Form) != 13 || strings.Join(defaults["titledMultipleSelectEnum"], ",") != "fish-1" || strings.Join(defaults["integer"], ",") != "42" {
		t.Fatalf("form %+v; want all 13 fields, the defaults given", q.Form)
	}
	if code, body := w.post("/chat/answer", url.Values{"q": {q.Question}, "choice": {"submit"}, "v.name": {"Ann Example"},
		"v.email": {"ann@example.com"}, "v.integer": {"7"}, "v.check": {"yes"},
		"v.untitledMultipleSelectEnum": {`["Piano","Drums"]`}, "v.titledMultipleSelectEnum": {`["fish-2","fish-3"]`}}); code != http.StatusNoContent {
		t.Fatalf("submit the form: %d %s", code, body)
	}
	reply := w.waitMsg("the server's answer", func(m webMsg) bool {
		return m.Role == "bot" && strings.Contains(m.Text, "tool said:") && strings.Contains(m.Text, "Raw result")
	})
	for _, want := range []string{"User provided the requested information", "Name: Ann Example", "Favorite Integer: 7",
		`"Piano"`, `"Drums"`, `"fish-2"`, `"fish-3"`, `"check": true`} {
		if !strings.Contains(reply.Text, want) {
			t.Fatalf("the server answered %q; want %q in it", reply.Text, want)
		}
	}
	rows, _, err := e.openStore().ToolCalls.ToolCalls(context.Background(), audit.Filter{Tool: "trigger-elicitation-request"})
	if err != nil || len(rows) != 1 || !strings.Contains(rows[0].Elicitation, `"action":"accept"`) || rows[0].Server != "everything" {
		t.Fatalf("audit rows %+v, %v; want one accepted call of the everything server", rows, err)
	}
}
