package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"relaybot/audit"
	"relaybot/internal/testkit/llm"
	"relaybot/internal/testkit/otlp"
	"relaybot/internal/testkit/wait"
	"relaybot/store"
)

// twoRoundModel asks for the kit's echo tool, then its fail tool, then answers.
func twoRoundModel(r llm.Request) llm.Reply {
	tools := 0 // of this turn: after the user's message
	for _, m := range r.Messages {
		switch m.Role {
		case "user":
			tools = 0
		case "tool":
			tools++
		}
	}
	switch tools {
	case 0:
		return llm.ToolCalls(llm.Call{ID: "call_echo", Name: "echo", Args: []string{`{"text":"hello","api_key":"sk-live-abcdef123456"}`}})
	case 1:
		return llm.ToolCalls(llm.Call{ID: "call_fail", Name: "fail", Args: []string{`{"message":"boom"}`}})
	}
	return llm.Text("all ", "done")
}

// startTracedBot runs a bot with the web chat, echo behind an approval, and traces exported to
// endpoint; it returns the bot's world and a browser of its web chat.
func startTracedBot(t *testing.T, endpoint string) (*env, *webChat) {
	t.Helper()
	// Batches leave quickly, so the test need not wait the default 5 s per batch.
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "20")
	return startWebBotWith(t, twoRoundModel, 300, func(c *tomlConfig) {
		c.set("otel", "enabled", true, "endpoint", endpoint, "capture_content", true,
			"trace_url", "https://tempo.example/trace/{trace_id}")
	})
}

// approveAndWait approves the echo call turn n (from 1) asks about and waits for its answer.
func approveAndWait(t *testing.T, w *webChat, n int) {
	t.Helper()
	var q webMsg
	wait.For(t, fmt.Sprintf("question %d", n), func() bool {
		q = webMsg{}
		seen := 0
		_, _ = w.find(func(m webMsg) bool {
			if m.Question != "" {
				seen++
			}
			if seen == n && q.Question == "" && m.Question != "" {
				q = m
			}
			return false
		})
		return q.Question != ""
	})
	if code, body := w.post("/chat/answer", url.Values{"q": {q.Question}, "choice": {"approve"}}); code != http.StatusNoContent {
		t.Fatalf("press approve: %d %s", code, body)
	}
	wait.For(t, fmt.Sprintf("answer %d", n), func() bool {
		return w.count(func(m webMsg) bool { return m.Role == "bot" && strings.Contains(m.Text, "all done") }) >= n
	})
}

// A turn with two tool rounds and an approval is one trace in the collector: the turn's
// invoke_agent span holds a chat span per model call, an execute_tool span per tool call (the
// approval wait and the MCP tools/call under echo's, and the MCP server's own span under that),
// and the deliveries; the audit rows and the turn row name the same trace.
func TestATurnIsOneTraceWithTheMCPServersSpanInIt(t *testing.T) {
	rcv := otlp.Start(t)
	e, w := startTracedBot(t, rcv.URL)
	e.kit.TraceTo(rcv.URL)
	w.say("hi")
	approveAndWait(t, w, 1)

	st := e.openStore()
	rows, _, err := st.ToolCalls.ToolCalls(context.Background(), audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 {
		t.Fatalf("%d audit rows, want 2 (echo, fail)", len(rows))
	}
	traceID := rows[0].TraceID
	if len(traceID) != 32 || rows[1].TraceID != traceID {
		t.Fatalf("audit rows' trace ids %q and %q; want one trace id of 32 hex digits", rows[0].TraceID, rows[1].TraceID)
	}
	if turn := finishedTurn(t, st, rows[0].TurnID); turn.TraceID != traceID {
		t.Fatalf("turn row's trace id %q; want the audit rows' %s", turn.TraceID, traceID)
	}

	// The root ends last; once it and the server's span are in, the whole trace is.
	var spans []otlp.Span
	wait.Until(t, "the whole trace in the collector", func() error {
		spans = spansOf(rcv.Spans(), traceID)
		var root, server bool
		for _, s := range spans {
			root = root || s.Name == "invoke_agent relaybot"
			server = server || (s.Service == "kit" && s.Name == "tools/call echo")
		}
		if !root || !server {
			return fmt.Errorf("%d spans of the trace: %s", len(spans), names(spans))
		}
		return nil
	})
	byID := map[string]otlp.Span{}
	for _, s := range spans {
		byID[s.SpanID] = s
	}
	one := func(name, service string) otlp.Span {
		t.Helper()
		var found []otlp.Span
		for _, s := range spans {
			if s.Name == name && s.Service == service {
				found = append(found, s)
			}
		}
		if len(found) != 1 {
			t.Fatalf("%d spans %q of %s, want 1; the trace: %s", len(found), name, service, names(spans))
		}
		return found[0]
	}
	parentOf := func(s otlp.Span) string { return byID[s.ParentID].Name }

	root := one("invoke_agent relaybot", "relaybot")
	if root.ParentID != "" || root.Attrs["gen_ai.operation.name"] != "invoke_agent" || root.Attrs["relaybot.platform"] != "web" ||
		root.Attrs["gen_ai.conversation.id"] == nil || root.Attrs["relaybot.turn.status"] != "ok" {
		t.Errorf("turn span: parent %q, attributes %v; want a root span of the web turn, status ok", root.ParentID, root.Attrs)
	}
	if in, _ := root.Attrs["gen_ai.input.messages"].(string); !strings.Contains(in, "hi") {
		t.Errorf("turn span's input messages %q; want the user's text (capture_content is on)", in)
	}

	var chats int
	for _, s := range spans {
		if s.Name != "chat test-model" {
			continue
		}
		chats++
		if s.ParentID != root.SpanID || s.Attrs["gen_ai.provider.name"] != "openai" || s.Attrs["gen_ai.request.model"] != "test-model" ||
			s.Attrs["gen_ai.usage.input_tokens"] == nil || s.Attrs["gen_ai.response.finish_reasons"] == nil {
			t.Errorf("chat span under %q with %v; want it under the turn with provider, model, tokens, finish reason", parentOf(s), s.Attrs)
		}
		if !contains("gen_ai.first_token")(strings.Join(s.Events, ",")) {
			t.Errorf("chat span events %v; want the first token's", s.Events)
		}
	}
	if chats != 3 {
		t.Errorf("%d chat spans, want 3 (two tool rounds and the answer); the trace: %s", chats, names(spans))
	}

	echo := one("execute_tool echo", "relaybot")
	if echo.ParentID != root.SpanID || echo.Attrs["gen_ai.tool.call.id"] != "call_echo" || echo.Attrs["relaybot.tool.source"] != "mcp" ||
		echo.Attrs["relaybot.tool.server"] != "kit" || echo.Attrs["relaybot.tool.status"] != "ok" {
		t.Errorf("echo's span under %q with %v; want it under the turn, call id, source mcp, server kit, status ok", parentOf(echo), echo.Attrs)
	}
	if args, _ := echo.Attrs["gen_ai.tool.call.arguments"].(string); !strings.Contains(args, "hello") || strings.Contains(args, "sk-live") {
		t.Errorf("echo's arguments on the span %q; want them redacted as in the audit log", args)
	}
	fail := one("execute_tool fail", "relaybot")
	if fail.ParentID != root.SpanID || fail.Attrs["relaybot.tool.status"] != "error" || !fail.Error {
		t.Errorf("fail's span under %q with %v (error %v); want it under the turn with status error", parentOf(fail), fail.Attrs, fail.Error)
	}
	approval := one("await_approval echo", "relaybot")
	if approval.ParentID != echo.SpanID || approval.Attrs["relaybot.approval.decision"] != "approved" {
		t.Errorf("approval span under %q with %v; want it under echo's, approved", parentOf(approval), approval.Attrs)
	}
	client := one("tools/call echo", "relaybot")
	if client.ParentID != echo.SpanID || client.Attrs["mcp.method.name"] != "tools/call" {
		t.Errorf("MCP client span under %q with %v; want it under echo's", parentOf(client), client.Attrs)
	}
	server := one("tools/call echo", "kit")
	if server.ParentID != client.SpanID {
		t.Errorf("the MCP server's span is under %q; want it under the bot's tools/call span", parentOf(server))
	}

	var finals int
	for _, s := range spans {
		if s.Attrs["relaybot.delivery.event"] != nil && s.ParentID == root.SpanID && s.Attrs["relaybot.delivery.final"] == true {
			finals++
		}
	}
	if finals == 0 {
		t.Errorf("no delivery span of the final text under the turn; the trace: %s", names(spans))
	}
}

// A collector that takes every export and never answers leaves the turns alone: they are
// answered and delivered, and the audit rows are written, while the exporter waits.
func TestASlowCollectorDoesNotHoldUpTurns(t *testing.T) {
	rcv := otlp.Start(t)
	rcv.Slow()
	e, w := startTracedBot(t, rcv.URL)
	for i := range 3 {
		w.say("hi")
		approveAndWait(t, w, i+1)
	}
	wait.For(t, "an export held by the collector", func() bool { return rcv.Exports() > 0 })
	rows, _, err := e.openStore().ToolCalls.ToolCalls(context.Background(), audit.Filter{})
	if err != nil || len(rows) != 6 {
		t.Fatalf("%d audit rows (%v), want 6", len(rows), err)
	}
}

// A collector that is not there at all costs the turns nothing either.
func TestADeadCollectorDoesNotHoldUpTurns(t *testing.T) {
	srv := otlp.Start(t)
	dead := srv.URL
	srv.Close()
	_, w := startTracedBot(t, dead)
	for i := range 2 {
		w.say("hi")
		approveAndWait(t, w, i+1)
	}
}

// The admin page's turn timeline links to the trace.
func TestTheTurnPageLinksToItsTrace(t *testing.T) {
	rcv := otlp.Start(t)
	e, w := startTracedBot(t, rcv.URL)
	w.say("hi")
	approveAndWait(t, w, 1)
	st := e.openStore()
	rows, _, err := st.ToolCalls.ToolCalls(context.Background(), audit.Filter{})
	if err != nil || len(rows) == 0 {
		t.Fatalf("audit rows: %d, %v", len(rows), err)
	}
	finishedTurn(t, st, rows[0].TurnID)
	resp, err := w.client.Get(fmt.Sprintf("%s/admin/turns/%d", w.base, rows[0].TurnID))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	page, _ := io.ReadAll(resp.Body)
	if want := "https://tempo.example/trace/" + rows[0].TraceID; resp.StatusCode != http.StatusOK || !strings.Contains(string(page), want) {
		t.Fatalf("turn page %s does not link to %s:\n%.2000s", resp.Status, want, page)
	}
}

// finishedTurn waits until turn id is saved as finished (its answer is out a moment before).
func finishedTurn(t *testing.T, st *store.Database, id int64) store.Turn {
	t.Helper()
	var turn store.Turn
	wait.Until(t, fmt.Sprintf("turn %d saved", id), func() error {
		var err error
		turn, err = st.Turns.Turn(context.Background(), id)
		if err == nil && turn.FinishedAt.IsZero() {
			err = fmt.Errorf("status %s", turn.Status)
		}
		return err
	})
	return turn
}

func spansOf(all []otlp.Span, traceID string) []otlp.Span {
	var out []otlp.Span
	for _, s := range all {
		if s.TraceID == traceID {
			out = append(out, s)
		}
	}
	return out
}

func names(spans []otlp.Span) string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Service+":"+s.Name)
	}
	return strings.Join(out, ", ")
}
