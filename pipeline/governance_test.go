package pipeline

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"fmt"
	"regexp"
	"relaybot/adapters"
	"relaybot/agent"
	"relaybot/audit"
	"relaybot/chat"
	"relaybot/internal/testkit/llm"
	"relaybot/pipeline/access"
	"relaybot/pipeline/asking"
	"relaybot/pipeline/history"
	"relaybot/policy"
	"relaybot/provider"
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
		mode ExceptionHandling
		want []string
	}{
		{ShowHint, []string{"Request failed."}},
		{Hide, nil},
	} {
		t.Run(string(tt.mode), func(t *testing.T) {
			h := newHarness(t, Options{Access: access.Lists{Admins: []string{"telegram:1"}},
				Output: OutputOptions{ExceptionHandling: tt.mode}, Usage: dbDown{}, Audit: dbDown{}})
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
	policy, err := tools.NewPolicy([]policy.Rule{{Tool: "echo", Roles: []string{tools.RoleUsers}, Action: policy.ActionDeny}})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarnessTools(t, Options{Access: access.Lists{Admins: []string{"telegram:99"}}}, tools.ManagerOptions{Policy: policy}, nil)
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

// pressAs is a press on an approval question by a user.
func pressAs(choice, user, name string, chatAdmin bool) adapters.Answer {
	return adapters.Answer{Choice: choice, UserID: user, UserName: name, ChatAdmin: chatAdmin}
}

// groupMsg is a message in Telegram group -100 by user.
func groupMsg(user, id, text string) adapters.Inbound {
	in := adapters.Inbound{Chat: chat.Ref{Platform: chat.Telegram, ChatID: "-100"}, Kind: adapters.Group,
		MessageID: id, UserID: user, UserName: "u" + user, Text: text}
	if c, ok := adapters.ParseCommand(text); ok {
		in.Command, in.Args, in.Text = c.Name, c.Args, ""
	}
	return in
}

// "Always allow" by the asker covers their own later calls only: another member is still asked.
// A chat admin's "Always, for everyone in this chat" covers every member, also after a restart
// (a new pipeline over the same database); the asker cannot give that one. /allowed lists the
// consents and /allowed revoke ends one, for those who may.
func TestAlwaysAllowBelongsToWhomItCovers(t *testing.T) {
	policy, err := tools.NewPolicy([]policy.Rule{{Tool: "echo", Action: policy.ActionAsk,
		Approvers: []string{tools.ApproverAsker, tools.ApproverChatAdmins}}})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarnessTools(t, Options{}, tools.ManagerOptions{Policy: policy}, nil)
	echo := func(n int) []llm.Reply {
		return []llm.Reply{llm.ToolCalls(llm.Call{ID: fmt.Sprint("c", n), Name: "echo", Args: []string{`{"text":"hi"}`}}), llm.Text("done")}
	}
	ask := func(user, id string, presses ...adapters.Answer) *askResponder {
		t.Helper()
		h.llm.Push(echo(len(h.llm.Requests()))...)
		out := &askResponder{recResponder: &recResponder{stream: true}, presses: presses}
		<-h.handle(groupMsg(user, id, "echo hi"), out)
		return out
	}

	out := ask("7", "1", pressAs(asking.ChoiceAlwaysChat, "7", "Ann", false), pressAs(asking.ChoiceAlways, "7", "Ann", false))
	if len(out.told) != 2 || !strings.Contains(out.told[0], "Only bot admins or chat admins can allow this for everyone") ||
		!strings.Contains(out.told[1], "always allowed for u7 in this chat") {
		t.Fatalf("Ann's presses were told %q; want \"for everyone\" refused and \"for me\" taken", out.told)
	}
	if out = ask("7", "2"); len(out.questions) != 0 {
		t.Fatalf("Ann was asked again after her own \"always\"")
	}
	out = ask("8", "3", pressAs(asking.ChoiceAlwaysChat, "9", "Chief", true))
	if len(out.questions) != 1 {
		t.Fatalf("Bob's call rode on Ann's consent: %d questions", len(out.questions))
	}

	// A new pipeline and tool manager over the same database: the consent for everyone holds.
	runner, err := agent.NewRunner([]agent.Model{{Endpoint: provider.Endpoint{Name: "primary", BaseURL: h.llm.URL, Model: "test-model"}, SupportsTools: true}}, agent.Options{})
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := tools.NewManager([]tools.Loader{echoLoader{}}, h.rec, tools.ManagerOptions{Policy: policy, Consents: h.store.Consents})
	if err != nil {
		t.Fatal(err)
	}
	p2, err := New(runner, storeOf(h.store), mgr, Options{History: history.Options{Rounds: 10}, Tools: ToolOptions{Consents: h.store.Consents}})
	if err != nil {
		t.Fatal(err)
	}
	h.p = p2
	if out = ask("10", "4"); len(out.questions) != 0 {
		t.Fatalf("after a restart, a member was asked despite \"always, for everyone\"")
	}
	rows := h.rec.Records()
	if r := rows[len(rows)-1]; r.Decision != tools.DecisionAlways || r.Approver != "Chief" || r.ApproverID != "9" {
		t.Fatalf("the unasked call's audit row: %q by %q (%q), want always by Chief (9)", r.Decision, r.Approver, r.ApproverID)
	}

	list := &recResponder{}
	<-h.handle(groupMsg("8", "5", "/allowed"), list)
	n := list.Notices()
	if len(n) != 1 || !strings.Contains(n[0], "echo for everyone, given by Chief") || !strings.Contains(n[0], "echo for user 7, given by Ann") {
		t.Fatalf("/allowed = %q", n)
	}
	id := regexp.MustCompile(`#(\d+) echo for everyone`).FindStringSubmatch(n[0])[1]
	refused := &recResponder{}
	<-h.handle(groupMsg("8", "6", "/allowed revoke "+id), refused)
	if n := refused.Notices(); len(n) != 1 || !strings.Contains(n[0], "Only the person it covers") {
		t.Fatalf("a member's revoke of the admin's consent: %q", n)
	}
	revoke := &recResponder{}
	chief := groupMsg("9", "7", "/allowed revoke "+id)
	chief.ChatAdmin = true
	<-h.handle(chief, revoke)
	if n := revoke.Notices(); len(n) != 1 || !strings.Contains(n[0], "Revoked #"+id) {
		t.Fatalf("the chat admin's revoke: %q", n)
	}
	if out = ask("10", "8", pressAs(asking.ChoiceDeny, "9", "Chief", true)); len(out.questions) != 1 {
		t.Fatalf("a member was not asked after the consent was revoked")
	}
}

// heldAsker is a platform with buttons whose questions wait until the test answers them.
type heldAsker struct {
	*recResponder
	asked   chan string
	answers chan adapters.Answer
}

func newHeldAsker() *heldAsker {
	return &heldAsker{recResponder: &recResponder{stream: true}, asked: make(chan string, 8), answers: make(chan adapters.Answer)}
}

func (a *heldAsker) Ask(ctx context.Context, q adapters.Question, decide func(adapters.Answer) (bool, string)) (adapters.Answer, error) {
	a.asked <- q.Text
	select {
	case ans := <-a.answers:
		decide(ans)
		return ans, nil
	case <-ctx.Done():
		return adapters.Answer{}, ctx.Err()
	}
}

// With one turn in flight at most, a turn waiting for an approval lets another chat be answered
// meanwhile, and goes on once approved; a user with tools.max_open_questions questions waiting
// is not asked another: the call is denied and the model told why.
func TestAWaitingQuestionGivesItsSlotBack(t *testing.T) {
	policy, err := tools.NewPolicy([]policy.Rule{{Tool: "echo", Action: policy.ActionAsk}})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarnessTools(t, Options{Queue: QueueOptions{MaxTurnsInFlight: 1, TurnWait: time.Minute},
		Tools: ToolOptions{MaxOpenQuestions: 1}}, tools.ManagerOptions{Policy: policy}, nil)
	h.llm.SetHandler(func(r llm.Request) llm.Reply {
		last := r.Messages[len(r.Messages)-1]
		switch {
		case last.Role == "tool":
			return llm.Text("tool said: " + last.Content)
		case strings.Contains(last.Content, "echo"):
			return llm.ToolCalls(llm.Call{ID: "c", Name: "echo", Args: []string{`{"text":"hi"}`}})
		}
		return llm.Text("plain answer")
	})
	waiting := newHeldAsker()
	first := h.handle(groupMsg("7", "1", "echo please"), waiting)
	select {
	case <-waiting.asked:
	case <-time.After(time.Minute):
		t.Fatal("no question was asked")
	}

	other := &recResponder{stream: true}
	<-h.handle(privateMsg("8", "2", "hello"), other)
	if final, _ := other.Reply(0).Final(); final != "plain answer" {
		t.Fatalf("another chat got %q (notices %q) while a question waited; want its answer", final, other.Notices())
	}

	second := newHeldAsker()
	<-h.handle(privateMsg("7", "3", "echo again"), second)
	if final, _ := second.Reply(0).Final(); !strings.Contains(final, "already has 1 approval questions waiting (tools.max_open_questions)") {
		t.Fatalf("the asker's second question: final %q; want the call denied for too many open questions", final)
	}

	waiting.answers <- adapters.Answer{Choice: asking.ChoiceApprove, UserID: "7", UserName: "u7", ChatAdmin: true}
	<-first
	if final, _ := waiting.Reply(0).Final(); !strings.HasPrefix(final, "tool said: echo: hi") {
		t.Fatalf("the approved turn ended with %q", final)
	}
}

// A per-chat tool list holds in the chat's threads: a Discord thread uses its parent channel's
// list, a Telegram forum topic its group's, unless a list names the thread or topic itself.
func TestPerChatToolsHoldInThreads(t *testing.T) {
	h := newHarness(t, Options{Tools: ToolOptions{PerChat: map[string][]string{
		"discord:6": {"fail"}, "telegram:-100": {"echo"}, "telegram:-100#7": {"page"}}}})
	tests := []struct {
		name string
		in   adapters.Inbound
		want string
	}{
		{"discord thread", adapters.Inbound{Chat: chat.Ref{Platform: chat.Discord, ChatID: "60"}, ParentChatID: "6"}, "fail"},
		{"telegram topic", adapters.Inbound{Chat: chat.Ref{Platform: chat.Telegram, ChatID: "-100", ThreadID: "3"}}, "echo"},
		{"telegram topic named", adapters.Inbound{Chat: chat.Ref{Platform: chat.Telegram, ChatID: "-100", ThreadID: "7"}}, "page"},
	}
	for _, tt := range tests {
		allowed := h.p.now().parts.allowedTools(tt.in)
		var got []string
		for _, name := range []string{"echo", "fail", "block", "page"} {
			if allowed == nil || allowed(name) {
				got = append(got, name)
			}
		}
		if strings.Join(got, ",") != tt.want {
			t.Errorf("%s: tools %v offered, want only %s", tt.name, got, tt.want)
		}
	}
}

// An approval question shows what it approves: a value is never cut on its own (a path's tail
// is where the harm hides), bidirectional overrides are shown as their code, the approver is
// told which values look like secrets and are hidden, and a call too long for the question goes
// along whole as a file posted before it.
func TestApprovalQuestionShowsTheWholeCall(t *testing.T) {
	policy, err := tools.NewPolicy([]policy.Rule{{Tool: "echo", Action: policy.ActionAsk}})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarnessTools(t, Options{}, tools.ManagerOptions{Policy: policy}, nil)
	path := "/home/ann/" + strings.Repeat("notes/", 40) + "../../.ssh/authorized_keys"
	short := `{"text":"report\u202etxt.exe","api_key":"sk-live-1234567890","path":"` + path + `"}`
	long := `{"text":"` + strings.Repeat("lorem ipsum ", 100) + `","tail":"rm -rf /"}`
	h.llm.Push(llm.ToolCalls(llm.Call{ID: "c1", Name: "echo", Args: []string{short}}), llm.Text("one"),
		llm.ToolCalls(llm.Call{ID: "c2", Name: "echo", Args: []string{long}}), llm.Text("two"))
	press := []adapters.Answer{pressAs(asking.ChoiceApprove, "7", "Ann", false)}

	out := &askResponder{recResponder: &recResponder{stream: true}, presses: press}
	<-h.handle(privateMsg("7", "1", "echo it"), out)
	q := out.questions[0]
	for _, want := range []string{"path: " + path, `report\u202etxt.exe`, "1 value that looks like a secret is hidden: api_key.", "api_key: [redacted]"} {
		if !strings.Contains(q, want) {
			t.Errorf("the question lacks %q:\n%s", want, q)
		}
	}
	if strings.Contains(q, "sk-live") || strings.ContainsRune(q, '\u202e') {
		t.Errorf("the question shows the secret or the raw override:\n%s", q)
	}

	out = &askResponder{recResponder: &recResponder{stream: true}, presses: press}
	<-h.handle(privateMsg("7", "2", "echo more"), out)
	if q := out.questions[0]; !strings.Contains(q, "the whole call is in the file echo-arguments.json posted above") {
		t.Errorf("the long call's question does not point to the whole call:\n%s", q)
	}
	whole := out.Reply(1)
	if whole == nil || len(whole.files) != 1 || !strings.Contains(string(whole.files[0].Data), `"tail": "rm -rf /"`) {
		t.Fatalf("the whole call was not posted as a file before the question: %+v", whole)
	}
}
