package main

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"relaybot/audit"
	"relaybot/internal/testkit/everything"
	"relaybot/internal/testkit/llm"
	"relaybot/internal/testkit/wait"
)

// The reference server's elicitation form (every field kind of MCP 2025-11-25: formats,
// bounds, defaults, untitled, titled and legacy single-selects, untitled and titled
// multi-selects), through the real pipeline in the web chat: the whole form is shown with
// its defaults, the multi-selects as option lists, and the user's answer reaches the server
// typed, the multi-selects as lists of strings, where it used to be declined unseen.
func TestReferenceServerElicitationFormInTheWebChat(t *testing.T) {
	entry := everything.Entry(t)
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

// The reference server through the real pipeline on Telegram, over stdio and over streamable
// HTTP: its task-only tool (simulate-research-query) runs as a task whose stages show in the
// status line and whose report is the answer of the same round; a second run is cancelled on
// the server by /stop, the audit row saying cancelled with the stage it had reached; its
// features document, attached to one chat, is in that chat's turns and not another's; and its
// args-prompt, enabled, runs as /prompt with the user's arguments.
func TestReferenceServerThroughTelegram(t *testing.T) {
	entry := everything.Entry(t)
	doc, err := os.ReadFile(filepath.Join(filepath.Dir(entry), "docs", "features.md"))
	if err != nil {
		t.Fatal(err)
	}
	firstLine, _, _ := strings.Cut(strings.TrimSpace(string(doc)), "\n")
	stages := []string{"Gathering sources...", "Analyzing content...", "Synthesizing findings...", "Generating report..."}
	model := func(r llm.Request) llm.Reply {
		last := r.Messages[len(r.Messages)-1]
		if last.Role == "tool" {
			return llm.Text("tool said: " + last.Content)
		}
		switch {
		case strings.Contains(last.Content, "What's weather in Lisbon, Lx?"):
			return llm.Text("Sunny in Lisbon.")
		case strings.HasSuffix(last.Content, "research otters"), strings.HasSuffix(last.Content, "research stoats"):
			topic := last.Content[strings.LastIndex(last.Content, " ")+1:]
			return llm.ToolCalls(llm.Call{ID: "r_" + topic, Name: "simulate-research-query", Args: []string{`{"topic":"` + topic + `"}`}})
		}
		for _, m := range r.Messages {
			if m.Role == "system" && strings.Contains(m.Content, firstLine) {
				return llm.Text("I have read the features document.")
			}
		}
		return llm.Text("No document here.")
	}
	for _, tr := range []string{"stdio", "http"} {
		t.Run(tr, func(t *testing.T) {
			e := newEnv(t)
			e.llm.SetHandler(model)
			c := e.toml()
			s := c.section("mcp.servers")
			s.keys, s.values = nil, map[string]any{}
			if tr == "stdio" {
				c.set("mcp.servers", "name", "everything", "transport", "stdio", "command", "node", "args", []string{entry, "stdio"})
			} else {
				c.set("mcp.servers", "name", "everything", "transport", "http", "url", everything.StartHTTP(t, entry), "local", true)
			}
			c.set("mcp.servers", "task_timeout_sec", 600, "prompts", true,
				"attach_resources", []string{"demo://resource/static/document/features.md"}, "attach_chats", []string{"telegram:7"})
			e.start(c.parse(t))
			e.waitLog(`msg="MCP server connected" mcp_server=everything`)

			e.say(7, "research otters")
			e.waitBotText(7, "the task's report as the answer", contains("Research Report: otters"))

			e.say(7, "research stoats")
			e.waitBotText(7, "a stage of the task in the status line", func(s string) bool {
				return strings.Contains(s, "⏳ simulate-research-query") && slices.ContainsFunc(stages[:3], func(st string) bool { return strings.Contains(s, st) })
			})
			e.say(7, "/stop")
			st := e.openStore()
			wait.For(t, "the audit rows of both runs", func() bool {
				rows, _, err := st.ToolCalls.ToolCalls(context.Background(), audit.Filter{Tool: "simulate-research-query"})
				if err != nil || len(rows) != 2 {
					return false
				}
				got := map[audit.Status]string{rows[0].Status: rows[0].Progress, rows[1].Status: rows[1].Progress}
				stopped, cancelled := got[audit.StatusCancelled]
				done, ok := got[audit.StatusOK]
				return cancelled && slices.Contains(stages[:3], stopped) && ok && done == "Generating report..."
			})
			if strings.Contains(e.logs.String(), "could not be cancelled") {
				t.Errorf("the stopped task was not cancelled on the server: %s", e.logs.String())
			}
			// Both tasks are done with: neither is left booked for a next process to cancel (this
			// store handle is another process, so it would take them).
			if left, err := st.MCPTasks.TakeLeftTasks(context.Background(), "everything"); err != nil || len(left) != 0 {
				t.Errorf("tasks left booked after their result and their cancellation: %+v, %v", left, err)
			}

			e.say(7, "what do you know?")
			e.waitBotText(7, "the answer from the attached document", contains("I have read the features document."))
			e.say(8, "what do you know?")
			e.waitBotText(8, "the answer in a chat it is not attached to", contains("No document here."))

			e.say(7, "/prompt args-prompt city=Lisbon state=Lx")
			e.waitBotText(7, "the answer to the server's prompt", contains("Sunny in Lisbon."))
		})
	}
}
