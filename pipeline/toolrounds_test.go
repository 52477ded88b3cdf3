package pipeline

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"relaybot/adapters"
	"relaybot/audit"
	"relaybot/chat"
	"relaybot/internal/testkit/llm"
	testmcp "relaybot/internal/testkit/mcp"
	"relaybot/internal/testkit/wait"
	"relaybot/tools"
	"relaybot/tools/mcp"
)

// mcpHarness is a pipeline whose tools are a testkit MCP server's over streamable HTTP.
func mcpHarness(t *testing.T, mopts tools.ManagerOptions) (*harness, *testmcp.Kit) {
	t.Helper()
	k := testmcp.New("kit")
	k.Legacy() // its "ask" tool's question is a server request: 2025-11-25 only (decision 056)
	l := mcp.NewLoader([]mcp.ServerConfig{{Name: "kit", Transport: "http", Local: true, URL: testmcp.StartHTTP(t, k).URL}}, nil)
	l.Start(context.Background())
	t.Cleanup(l.Close)
	wait.For(t, "the MCP server", func() bool { return len(l.Tools(context.Background())) > 0 })
	return newHarnessLoaders(t, Options{Output: OutputOptions{TrackFunctionCalls: true}}, mopts, nil, l), k
}

func (r *recReply) sawUpdate(sub string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, u := range r.updates {
		if strings.Contains(u, sub) {
			return true
		}
	}
	return false
}

// The server's progress shows in the tool's status line while the call runs; /stop then
// cancels the call at the server, and the audit row says cancelled and keeps the last message.
func TestProgressInTheStatusLineAndStopReachesTheServer(t *testing.T) {
	h, k := mcpHarness(t, tools.ManagerOptions{})
	h.llm.Push(llm.ToolCalls(llm.Call{ID: "c1", Name: "progress", Args: []string{`{"steps":4,"seconds":60}`}}), llm.Text("stopped"))
	out := &recResponder{stream: true}
	done := h.handle(privateMsg("7", "1", "go"), out)
	wait.For(t, "the status line to show the progress", func() bool {
		r := out.Reply(0)
		return r != nil && r.sawUpdate("⏳ progress 100% — step 4 of 4")
	})
	<-h.handle(privateMsg("7", "2", "/stop"), &recResponder{})
	<-done
	wait.For(t, "the server to be told", func() bool { return k.CancelNotices() >= 1 })
	wait.For(t, "the audit row", func() bool {
		recs := h.rec.Records()
		return len(recs) == 1 && recs[0].Status == audit.StatusCancelled && recs[0].Progress == "step 4 of 4"
	})
}

// Three read-only calls of a round run side by side: all three status lines show running at
// once, their audit rows keep the model's order and their times overlap. A round with one
// unannotated call runs one call after another: its rows do not overlap.
func TestReadOnlyRoundRunsSideBySide(t *testing.T) {
	h, _ := mcpHarness(t, tools.ManagerOptions{})
	args := []string{`{"seconds":0.3}`}
	h.llm.Push(llm.ToolCalls(llm.Call{ID: "a", Name: "read_sleep", Args: args}, llm.Call{ID: "b", Name: "read_sleep", Args: args},
		llm.Call{ID: "c", Name: "read_sleep", Args: args}), llm.Text("read"))
	out := &recResponder{stream: true}
	<-h.handle(privateMsg("7", "1", "read"), out)
	if !out.Reply(0).sawUpdate(`⏳ read\_sleep…` + "\n" + `⏳ read\_sleep…` + "\n" + `⏳ read\_sleep…`) {
		t.Fatalf("the status lines never showed three calls running at once: %q", out.Reply(0).updates)
	}
	recs := h.rec.Records()
	if len(recs) != 3 || recs[0].ToolCallID != "a" || recs[1].ToolCallID != "b" || recs[2].ToolCallID != "c" {
		t.Fatalf("audit rows %+v, want a, b, c in the model's order", recs)
	}
	if !spansOverlap(recs[0], recs[1]) || !spansOverlap(recs[1], recs[2]) || !spansOverlap(recs[0], recs[2]) {
		t.Fatalf("the read-only calls did not overlap: %v", recs)
	}

	h.rec.Reset()
	h.llm.Push(llm.ToolCalls(llm.Call{ID: "d", Name: "read_sleep", Args: args}, llm.Call{ID: "e", Name: "sleep", Args: args},
		llm.Call{ID: "f", Name: "read_sleep", Args: args}), llm.Text("slept"))
	<-h.handle(privateMsg("7", "2", "mixed"), &recResponder{stream: true})
	recs = h.rec.Records()
	if len(recs) != 3 || spansOverlap(recs[0], recs[1]) || spansOverlap(recs[1], recs[2]) {
		t.Fatalf("a round with an unannotated call overlapped: %v", recs)
	}
}

func spansOverlap(a, b audit.Record) bool {
	return a.StartedAt.Before(b.FinishedAt) && b.StartedAt.Before(a.FinishedAt)
}

// A tool's question is asked with buttons for an enum and a boolean: a bystander's press is
// refused and told why, the asker's answers go to the server, and the audit row keeps who gave
// them.
func TestToolQuestionAnsweredWithButtons(t *testing.T) {
	h, _ := mcpHarness(t, tools.ManagerOptions{})
	h.llm.Push(llm.ToolCalls(llm.Call{ID: "c1", Name: "ask", Args: []string{`{"form":"choice"}`}}), llm.Text("thanks"))
	out := &askResponder{recResponder: &recResponder{stream: true}, pressFor: func(q adapters.Question) []adapters.Answer {
		choice := "yes"
		if strings.Contains(q.Text, "Colour") {
			choice = "v1"
		}
		return []adapters.Answer{{Choice: choice, UserID: "bystander", UserName: "Bob"}, {Choice: choice, UserID: "7", UserName: "Ann"}}
	}}
	in := adapters.Inbound{Chat: chat.Ref{Platform: chat.Telegram, ChatID: "-100"}, Kind: adapters.Group,
		MessageID: "1", UserID: "7", UserName: "Ann", Text: "ask me"}
	<-h.handle(in, out)
	if len(out.questions) != 2 || len(out.told) != 4 || !strings.HasPrefix(out.told[0], "You may not answer this") {
		t.Fatalf("questions %d, presses told %q; want two questions and Bob refused on each", len(out.questions), out.told)
	}
	reqs := h.llm.Requests()
	msgs := reqs[len(reqs)-1].Messages
	if got := msgs[len(msgs)-1].Content; got != `accept {"color":"green","confirm":true}` {
		t.Fatalf("the server saw %q, want green and yes", got)
	}
	if e := h.rec.Records()[0].Elicitation; !strings.Contains(e, `"by":"Ann"`) || !strings.Contains(e, `"action":"accept"`) {
		t.Fatalf("audit row elicitation = %q, want Ann's accept", e)
	}
}

// Text and numbers are asked as a reply prompt: the asker's next messages are the answers (a
// value that is not a number is asked for again); they start no turn of their own.
func TestToolQuestionAnsweredWithText(t *testing.T) {
	h, _ := mcpHarness(t, tools.ManagerOptions{})
	h.llm.Push(llm.ToolCalls(llm.Call{ID: "c1", Name: "ask", Args: []string{`{"form":"text"}`}}), llm.Text("hello Ann"))
	out := &askResponder{recResponder: &recResponder{stream: true}}
	done := h.handle(privateMsg("7", "1", "ask me"), out)
	notices := func() []string {
		out.recResponder.mu.Lock()
		defer out.recResponder.mu.Unlock()
		return append([]string(nil), out.recResponder.notices...)
	}
	// The kit's schema lists age before name (its properties are a Go map, encoded sorted).
	wait.For(t, "the age prompt", func() bool { n := notices(); return len(n) == 1 && strings.Contains(n[0], "age") })
	<-h.handle(privateMsg("7", "2", "thirty"), out)
	wait.For(t, "the age asked again", func() bool { n := notices(); return len(n) == 2 && strings.Contains(n[1], "must be a number") })
	<-h.handle(privateMsg("7", "3", "33"), out)
	wait.For(t, "the name prompt", func() bool { n := notices(); return len(n) == 3 && strings.Contains(n[2], "Name") })
	<-h.handle(privateMsg("7", "4", "Ann"), out)
	<-done
	reqs := h.llm.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model calls, want 2: the answers must not start turns", len(reqs))
	}
	msgs := reqs[1].Messages
	if got := msgs[len(msgs)-1].Content; got != `accept {"age":33,"name":"Ann"}` {
		t.Fatalf("the server saw %q", got)
	}
}

// Defaults asked field by field: a typed field says its default and takes the word "default"
// for it; a boolean's and a single-select's default button says so.
func TestToolQuestionOffersItsDefaults(t *testing.T) {
	h, _ := mcpHarness(t, tools.ManagerOptions{})
	h.llm.Push(llm.ToolCalls(llm.Call{ID: "c1", Name: "ask", Args: []string{`{"form":"defaults"}`}}), llm.Text("ok"))
	var labels []string
	out := &askResponder{recResponder: &recResponder{stream: true}, pressFor: func(q adapters.Question) []adapters.Answer {
		choice := ""
		for _, c := range q.Choices {
			labels = append(labels, c.Label)
			if strings.HasSuffix(c.Label, " (default)") {
				choice = c.ID
			}
		}
		return []adapters.Answer{{Choice: choice, UserID: "7", UserName: "Ann"}}
	}}
	done := h.handle(privateMsg("7", "1", "ask me"), out)
	wait.For(t, "the greeting prompt", func() bool {
		out.recResponder.mu.Lock()
		defer out.recResponder.mu.Unlock()
		n := out.recResponder.notices
		if len(n) != 1 {
			return false
		}
		text := strings.ReplaceAll(n[0], `\`, "") // the prompt is escaped Markdown
		return strings.Contains(text, "default: hello") && strings.Contains(text, `"default" answers hello`)
	})
	<-h.handle(privateMsg("7", "2", "default"), out)
	<-done
	if !slices.Contains(labels, "No (default)") || !slices.Contains(labels, "m (default)") {
		t.Fatalf("buttons %q; want the defaults marked", labels)
	}
	reqs := h.llm.Requests()
	msgs := reqs[len(reqs)-1].Messages
	if got := msgs[len(msgs)-1].Content; got != `accept {"greeting":"hello","loud":false,"size":"m"}` {
		t.Fatalf("the server saw %q, want the defaults", got)
	}
}

// A question nobody answers in time is answered cancel to the server, and the audit row says
// it timed out.
func TestToolQuestionTimesOut(t *testing.T) {
	h, _ := mcpHarness(t, tools.ManagerOptions{ElicitationTimeout: 200 * time.Millisecond})
	h.llm.Push(llm.ToolCalls(llm.Call{ID: "c1", Name: "ask", Args: []string{`{"form":"choice"}`}}), llm.Text("nobody answered"))
	out := &askResponder{recResponder: &recResponder{stream: true}}
	<-h.handle(privateMsg("7", "1", "ask me"), out)
	reqs := h.llm.Requests()
	msgs := reqs[len(reqs)-1].Messages
	if got := msgs[len(msgs)-1].Content; got != "cancel null" {
		t.Fatalf("the server saw %q, want cancel", got)
	}
	if e := h.rec.Records()[0].Elicitation; !strings.Contains(e, `"note":"timeout"`) {
		t.Fatalf("audit row elicitation = %q, want a timeout", e)
	}
}

// formResponder is a Responder that shows forms (the web chat's capability): each form gets the
// submissions submitFor gives, handed to decide in turn.
type formResponder struct {
	*askResponder
	submitFor func(n int, f adapters.Form) []adapters.FormAnswer

	fmu   sync.Mutex
	forms []adapters.Form
	told  []string
}

func (r *formResponder) AskForm(ctx context.Context, f adapters.Form, decide func(adapters.FormAnswer) (bool, string)) (adapters.FormAnswer, error) {
	r.fmu.Lock()
	r.forms = append(r.forms, f)
	n := len(r.forms)
	r.fmu.Unlock()
	for _, s := range r.submitFor(n, f) {
		ok, text := decide(s)
		r.fmu.Lock()
		r.told = append(r.told, text)
		r.fmu.Unlock()
		if ok {
			return s, nil
		}
	}
	<-ctx.Done()
	return adapters.FormAnswer{}, ctx.Err()
}

// Where the platform shows forms, a tool's question is one form with every field: a
// bystander's submission is refused, the asker's values reach the server typed; a value that
// breaks the schema asks the form again once (saying what was wrong), and a second bad answer
// is declined. No field is asked on its own.
func TestToolQuestionAnsweredWithAForm(t *testing.T) {
	ann := func(vals map[string]string) adapters.FormAnswer {
		return adapters.FormAnswer{Values: vals, UserID: "7", UserName: "Ann"}
	}
	bob := adapters.FormAnswer{Values: map[string]string{"name": "Bob", "age": "40"}, UserID: "8", UserName: "Bob"}
	for _, tc := range []struct {
		name    string
		answers [][]adapters.FormAnswer // per form asked
		server  string
		forms   int
	}{
		{"accepted", [][]adapters.FormAnswer{{bob, ann(map[string]string{"name": "Ann", "age": "33"})}}, `accept {"age":33,"name":"Ann"}`, 1},
		{"fixed on the second form", [][]adapters.FormAnswer{{ann(map[string]string{"name": "Ann", "age": "300"})},
			{ann(map[string]string{"name": "Ann", "age": "30"})}}, `accept {"age":30,"name":"Ann"}`, 2},
		{"bad twice", [][]adapters.FormAnswer{{ann(map[string]string{"name": "Ann", "age": "thirty"})},
			{ann(map[string]string{"name": "Ann"})}}, "decline null", 2},
		{"declined", [][]adapters.FormAnswer{{{Decline: true, UserID: "7", UserName: "Ann"}}}, "decline null", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, _ := mcpHarness(t, tools.ManagerOptions{})
			h.llm.Push(llm.ToolCalls(llm.Call{ID: "c1", Name: "ask", Args: []string{`{"form":"text"}`}}), llm.Text("ok"))
			out := &formResponder{askResponder: &askResponder{recResponder: &recResponder{stream: true}},
				submitFor: func(n int, f adapters.Form) []adapters.FormAnswer { return tc.answers[n-1] }}
			in := adapters.Inbound{Chat: chat.Ref{Platform: chat.Web, ChatID: "w1"}, Kind: adapters.Private,
				MessageID: "1", UserID: "7", UserName: "Ann", Text: "ask me"}
			<-h.handle(in, out)
			reqs := h.llm.Requests()
			msgs := reqs[len(reqs)-1].Messages
			if got := msgs[len(msgs)-1].Content; got != tc.server {
				t.Fatalf("the server saw %q, want %q", got, tc.server)
			}
			if len(out.forms) != tc.forms || len(out.questions) != 0 || len(out.notices) != 0 {
				t.Fatalf("%d forms, %d questions, %d prompts; want %d forms and nothing asked field by field",
					len(out.forms), len(out.questions), len(out.notices), tc.forms)
			}
			f := out.forms[0]
			if len(f.Fields) != 2 || f.Fields[0].Name != "age" || f.Fields[0].Kind != adapters.FieldInteger ||
				*f.Fields[0].Min != 1 || *f.Fields[0].Max != 150 || f.Fields[1].Kind != adapters.FieldText || !f.Fields[1].Required {
				t.Fatalf("form fields %+v", f.Fields)
			}
			if tc.forms == 2 && !strings.Contains(out.forms[1].Text, "The last answer did not fit") {
				t.Fatalf("the second form does not say what was wrong: %q", out.forms[1].Text)
			}
			if tc.name == "accepted" && (!strings.HasPrefix(out.told[0], "You may not answer this") || !strings.Contains(out.told[1], "Name: Ann")) {
				t.Fatalf("told %q; want Bob refused and Ann's values shown", out.told)
			}
		})
	}
}
