package pipeline

import (
	"context"
	"errors"
	"strings"
	"testing"

	"relaybot/adapters"
	"relaybot/audit"
	"relaybot/chat"
	"relaybot/config"
	"relaybot/internal/testkit/llm"
	"relaybot/store"
	"relaybot/tools"
	"slices"
)

// dbDown is a usage log and an audit log whose database cannot be reached: its errors name the
// user, the database and the host, as a driver's do.
type dbDown struct{}

var errDBDown = errors.New(`failed to connect to user=relay database=relaybot host=10.1.2.3: password authentication failed`)

func (dbDown) Usage(context.Context, store.UsageFilter) ([]store.UsageRow, error) {
	return nil, errDBDown
}
func (dbDown) ToolCalls(context.Context, audit.Filter) ([]audit.Record, string, error) {
	return nil, "", errDBDown
}
func (dbDown) ToolCall(context.Context, int64) (audit.Record, error) {
	return audit.Record{}, errDBDown
}
func (dbDown) ToolStats(context.Context, audit.Filter) ([]audit.Stat, error) { return nil, errDBDown }

// A command whose store query fails tells the member what a failed turn tells them (the
// failure hint, or nothing with "hide"), never the driver's error naming the database.
func TestCommandFailuresShowTheHintNotTheDatabase(t *testing.T) {
	for _, tt := range []struct {
		mode config.ExceptionHandling
		want []string
	}{
		{config.ShowHint, []string{"Request failed."}},
		{config.Hide, nil},
	} {
		t.Run(string(tt.mode), func(t *testing.T) {
			h := newHarness(t, Options{Access: Access{Admins: []string{"telegram:1"}},
				Output: OutputOptions{ExceptionHandling: tt.mode}})
			h.p.opts.Usage = dbDown{}
			h.p.opts.Audit = dbDown{}
			for i, cmd := range []string{"/usage", "/usage all", "/audit"} {
				out := &recResponder{}
				<-h.handle(privateMsg("1", string(rune('a'+i)), cmd), out)
				n := out.Notices()
				if strings.Join(n, "|") != strings.Join(tt.want, "|") {
					t.Errorf("%s with the database down told the admin %q, want %q", cmd, n, tt.want)
				}
			}
		})
	}
}

// /retry answers the sender's own last message, whoever spoke after it; an admin's /retry last
// answers another member's message with that member's rights: a tool denied to members is not
// offered, though the admin may use it.
func TestRetryAnswersYourOwnMessageAndAnothersWithTheirRights(t *testing.T) {
	policy, err := tools.NewPolicy([]tools.Rule{{Tool: "echo", Roles: []string{tools.RoleUsers}, Action: tools.ActionDeny}})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarnessTools(t, Options{Access: Access{Admins: []string{"telegram:99"}}}, tools.ManagerOptions{Policy: policy}, nil)
	group := func(user, id, text string) adapters.Inbound {
		in := adapters.Inbound{Chat: chat.Ref{Platform: chat.Telegram, ChatID: "-5"}, Kind: adapters.Group,
			MessageID: id, UserID: user, UserName: "u" + user, Text: text}
		if c, ok := adapters.ParseCommand(text); ok {
			in.Command, in.Args, in.Text = c.Name, c.Args, ""
		}
		return in
	}
	h.llm.Push(llm.Text("a1"), llm.Text("a2"), llm.Text("a3"), llm.Text("a4"))
	<-h.handle(group("7", "1", "please echo the secret"), &recResponder{stream: true})
	<-h.handle(group("99", "2", "admin question"), &recResponder{stream: true})

	<-h.handle(group("7", "3", "/retry"), &recResponder{stream: true})
	reqs := h.llm.Requests()
	if got := lastUserContent(reqs[len(reqs)-1]); got != "[u7] please echo the secret" {
		t.Fatalf("a member's /retry answered %q again, want their own last message", got)
	}

	refused := &recResponder{stream: true}
	<-h.handle(group("7", "4", "/retry last"), refused)
	if n := refused.Notices(); len(n) != 1 || !strings.Contains(n[0], "Only bot admins can use /retry last") {
		t.Fatalf("a member's /retry last was told %q", n)
	}

	admin := &recResponder{stream: true}
	<-h.handle(group("99", "5", "/retry last"), admin)
	reqs = h.llm.Requests()
	last := reqs[len(reqs)-1]
	if got := lastUserContent(last); got != "[u7] please echo the secret" {
		t.Fatalf("the admin's /retry last answered %q again, want the member's last message", got)
	}
	if slices.Contains(last.Tools, "echo") {
		t.Fatalf("the admin's retry of a member's message offered %v: it ran with the admin's rights", last.Tools)
	}
	if n := admin.Notices(); len(n) != 1 || !strings.Contains(n[0], "Answering u7's message again, with their rights.") {
		t.Fatalf("the admin was told %q", n)
	}
}
