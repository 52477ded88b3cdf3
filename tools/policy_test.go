package tools_test

import (
	"context"
	"relaybot/audit"
	"relaybot/chat"
	"relaybot/policy"
	"relaybot/tools/toolstest"
	"slices"
	"strconv"
	"strings"
	"testing"

	"relaybot/tools"
)

func TestPolicyMostSpecificRuleDecides(t *testing.T) {
	rules := []policy.Rule{
		/*0*/ {Source: audit.SourceMCP, Action: policy.ActionAsk},
		/*1*/ {Server: "files", Action: policy.ActionDeny},
		/*2*/ {Tool: "files__*", Roles: []string{tools.RoleAdmins}, Action: policy.ActionAllow},
		/*3*/ {Tool: "files__read", Action: policy.ActionAllow},
		/*4*/ {Tool: "files__re*", Action: policy.ActionAsk},
		/*5*/ {Tool: "send_mail", Chats: []string{"Discord:42"}, Action: policy.ActionAllow},
		/*6*/ {Tool: "send_mail", Action: policy.ActionDeny},
		/*7*/ {Tool: "shell", Roles: []string{"discord_role:777"}, Action: policy.ActionAsk, Approvers: []string{tools.ApproverAsker}},
		/*8*/ {Tool: "shell", Action: policy.ActionDeny},
		/*9*/ {Tool: "topic", Roles: []string{tools.RoleChatAdmins}, Action: policy.ActionAllow},
		/*10*/ {Tool: "topic", Action: policy.ActionAsk},
		/*11*/ {Tool: "topic", Action: policy.ActionAllow},
		/*12*/ {Tool: "wiki", Roles: []string{tools.RoleUsers}, Action: policy.ActionDeny},
	}
	p, err := tools.NewPolicy(rules)
	if err != nil {
		t.Fatal(err)
	}
	user := tools.TurnInfo{Platform: "discord", ChatID: "1", UserID: "u"}
	admin := user
	admin.Admin = true
	inChat42 := user
	inChat42.ChatID = "42"
	withRole := user
	withRole.Roles = []string{"777"}
	telegramWithRole := withRole
	telegramWithRole.Platform = "telegram"
	chatAdmin := user
	chatAdmin.ChatAdmin = true
	tests := []struct {
		name     string
		spec     tools.Spec
		src      audit.Source
		info     tools.TurnInfo
		want     policy.Action
		wantRule int // -1: no rule, the default
	}{
		{"no rule names a native tool: allowed as before", tools.Spec{Name: "fetch_url"}, audit.SourceNative, user, policy.ActionAllow, -1},
		{"source rule covers any MCP tool", tools.Spec{Name: "search", Server: "web"}, audit.SourceMCP, user, policy.ActionAsk, 0},
		{"server beats source", tools.Spec{Name: "files__write", Server: "files"}, audit.SourceMCP, user, policy.ActionDeny, 1},
		{"glob with roles beats server for admins", tools.Spec{Name: "files__write", Server: "files"}, audit.SourceMCP, admin, policy.ActionAllow, 2},
		{"exact name beats every glob", tools.Spec{Name: "files__read", Server: "files"}, audit.SourceMCP, user, policy.ActionAllow, 3},
		{"longer glob beats shorter glob", tools.Spec{Name: "files__rename", Server: "files"}, audit.SourceMCP, admin, policy.ActionAsk, 4},
		{"chat rule beats the same tool without chats", tools.Spec{Name: "send_mail"}, audit.SourceNative, inChat42, policy.ActionAllow, 5},
		{"chat rule does not reach other chats", tools.Spec{Name: "send_mail"}, audit.SourceNative, user, policy.ActionDeny, 6},
		{"discord role matches", tools.Spec{Name: "shell"}, audit.SourcePlugin, withRole, policy.ActionAsk, 7},
		{"discord role means nothing on telegram", tools.Spec{Name: "shell"}, audit.SourcePlugin, telegramWithRole, policy.ActionDeny, 8},
		{"chat admins role", tools.Spec{Name: "topic"}, audit.SourceNative, chatAdmin, policy.ActionAllow, 9},
		{"equally specific: the stricter wins", tools.Spec{Name: "topic"}, audit.SourceNative, user, policy.ActionAsk, 10},
		{"users role is everyone but bot admins", tools.Spec{Name: "wiki"}, audit.SourceNative, user, policy.ActionDeny, 12},
		{"users role skips bot admins", tools.Spec{Name: "wiki"}, audit.SourceNative, admin, policy.ActionAllow, -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := p.Decide(tc.spec, tc.src, tc.info)
			wantRule := ""
			if tc.wantRule >= 0 {
				wantRule = "tools.policy[" + strconv.Itoa(tc.wantRule) + "]"
			}
			if d.Action != tc.want || !strings.HasPrefix(d.Rule, wantRule) || (wantRule == "") != (d.Rule == "") {
				t.Fatalf("decision = %s by %q, want %s by %q", d.Action, d.Rule, tc.want, wantRule)
			}
		})
	}
	if d := p.Decide(tools.Spec{Name: "shell"}, audit.SourcePlugin, withRole); !slices.Equal(d.Approvers, []string{tools.ApproverAsker}) {
		t.Errorf("approvers = %v, want the rule's own", d.Approvers)
	}
	if d := p.Decide(tools.Spec{Name: "search", Server: "web"}, audit.SourceMCP, user); !slices.Equal(d.Approvers, tools.DefaultApprovers) {
		t.Errorf("approvers of a rule naming none = %v, want %v", d.Approvers, tools.DefaultApprovers)
	}
}

func TestPolicyRejectsBadRules(t *testing.T) {
	tests := []struct {
		rule policy.Rule
		want string
	}{
		{policy.Rule{Tool: "x", Action: "maybe"}, `tools.policy[0]: action must be allow, ask or deny, got "maybe"`},
		{policy.Rule{Tool: "[x", Action: policy.ActionDeny}, "not a valid glob"},
		{policy.Rule{Source: "cloud", Action: policy.ActionDeny}, "source must be"},
		{policy.Rule{Server: "files", Source: audit.SourceNative, Action: policy.ActionDeny}, "names an MCP server"},
		{policy.Rule{Chats: []string{"42"}, Action: policy.ActionDeny}, `chat "42" must be platform:chat_id`},
		{policy.Rule{Roles: []string{"mods"}, Action: policy.ActionDeny}, `role "mods" must be`},
		{policy.Rule{Tool: "x", Action: policy.ActionAllow, Approvers: []string{"admins"}}, "only for action"},
		{policy.Rule{Tool: "x", Action: policy.ActionAsk, Approvers: []string{"anyone"}}, `approver "anyone"`},
	}
	for _, tc := range tests {
		_, err := tools.NewPolicy([]policy.Rule{tc.rule})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewPolicy(%+v) = %v, want an error containing %q", tc.rule, err, tc.want)
		}
	}
}

// A denied tool is not offered to the model; a call to it anyway is refused without running, and
// its audit row says denied and names the rule.
func TestDeniedToolIsNotOfferedAndACallIsAuditedWithTheRule(t *testing.T) {
	ran := false
	l := newStub(audit.SourceMCP, "files").
		add("files__delete", func(context.Context, tools.Invocation) (tools.Result, error) {
			ran = true
			return tools.Result{Text: "gone"}, nil
		}).
		add("files__read", func(context.Context, tools.Invocation) (tools.Result, error) { return tools.Result{Text: "data"}, nil })
	p, err := tools.NewPolicy([]policy.Rule{{Tool: "files__delete", Roles: []string{tools.RoleUsers}, Action: policy.ActionDeny}})
	if err != nil {
		t.Fatal(err)
	}
	rec := toolstest.NewRecorder()
	m, err := tools.NewManager([]tools.Loader{l}, rec, tools.ManagerOptions{Policy: p})
	if err != nil {
		t.Fatal(err)
	}
	turn := m.ForTurn(tools.TurnInfo{Platform: "discord", ChatID: "1", UserID: "u"}, nil)
	var names []string
	for _, s := range turn.Specs() {
		names = append(names, s.Name)
	}
	if !slices.Equal(names, []string{"files__read"}) {
		t.Fatalf("offered %v, want only files__read", names)
	}
	out := turn.Execute(context.Background(), tools.Call{ToolCall: chat.ToolCall{ID: "c1", Name: "files__delete", Arguments: `{"path":"/"}`}})
	if ran || out.Status != audit.StatusDenied || !strings.Contains(out.Content, "denied by tools.policy[0]") {
		t.Fatalf("call to a denied tool: ran=%v status=%s content=%q", ran, out.Status, out.Content)
	}
	r := rec.Records()[0]
	if r.Status != audit.StatusDenied || !strings.Contains(r.Error, "tools.policy[0] (tool files__delete, roles users)") {
		t.Fatalf("audit row = %+v, want denied naming the rule", r)
	}
	admin := m.ForTurn(tools.TurnInfo{Platform: "discord", ChatID: "1", UserID: "a", Admin: true}, nil)
	if len(admin.Specs()) != 2 {
		t.Fatalf("an admin is offered %v, want both tools", admin.Specs())
	}
}

// TestATollToolAsksInGroupsUnlessARuleSaysOtherwise: generate_image (Spec.AskInGroups) asks
// for approval in a group where no rule names it, runs in a private chat, and any matching
// rule decides instead.
func TestATollToolAsksInGroupsUnlessARuleSaysOtherwise(t *testing.T) {
	img := tools.Spec{Name: "generate_image", AskInGroups: true}
	group := tools.TurnInfo{Platform: "telegram", ChatID: "-100", UserID: "1"}
	private := group
	private.Private = true
	none, err := tools.NewPolicy(nil)
	if err != nil {
		t.Fatal(err)
	}
	allowHere, err := tools.NewPolicy([]policy.Rule{{Tool: "generate_image", Chats: []string{"telegram:-100"}, Action: policy.ActionAllow}})
	if err != nil {
		t.Fatal(err)
	}
	denyAll, err := tools.NewPolicy([]policy.Rule{{Source: audit.SourceNative, Action: policy.ActionDeny}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		p    *tools.Policy
		info tools.TurnInfo
		want policy.Action
	}{
		{"group, no rules", none, group, policy.ActionAsk},
		{"group, nil policy", nil, group, policy.ActionAsk},
		{"private, no rules", none, private, policy.ActionAllow},
		{"group, a rule allows it there", allowHere, group, policy.ActionAllow},
		{"private, a rule denies native tools", denyAll, private, policy.ActionDeny},
	} {
		d := c.p.Decide(img, audit.SourceNative, c.info)
		if d.Action != c.want {
			t.Errorf("%s: %s, want %s", c.name, d.Action, c.want)
		}
		if d.Action == policy.ActionAsk && !slices.Equal(d.Approvers, tools.DefaultApprovers) {
			t.Errorf("%s: approvers %v, want the default ones", c.name, d.Approvers)
		}
	}
	if d := none.Decide(tools.Spec{Name: "web_search"}, audit.SourceNative, group); d.Action != policy.ActionAllow {
		t.Errorf("a tool without AskInGroups: %s in a group, want allow", d.Action)
	}
}
