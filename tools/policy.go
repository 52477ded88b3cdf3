package tools

import (
	"fmt"
	"path"
	"relaybot/audit"
	"relaybot/chat"
	"relaybot/policy"
	"slices"
	"strings"
)

// Roles a policy rule may name. A Discord role is "discord_role:ID"; anything else is a role id
// the platform reports for the user (TurnInfo.Roles).
const (
	RoleAdmins     = "admins"      // bot admins ([access] admins)
	RoleUsers      = "users"       // everyone who is not a bot admin
	RoleChatAdmins = "chat_admins" // admins of the chat itself (Telegram group administrators)
	// RoleDiscordPrefix starts a Discord role id: "discord_role:123456".
	RoleDiscordPrefix = "discord_role:"
)

// Who may answer an approval question.
const (
	ApproverAsker      = "asker"       // the user whose message started the turn
	ApproverChatAdmins = "chat_admins" // admins of the chat (Telegram group administrators)
	ApproverAdmins     = "admins"      // bot admins
)

// DefaultApprovers answer an ask rule that names none: bot admins and the chat's own admins.
var DefaultApprovers = []string{ApproverAdmins, ApproverChatAdmins}

// rule is one compiled policy.Rule: its chats normalised, its approvers filled in.
type rule struct{ policy.Rule }

// Decision is what the policy says about one tool in one turn.
type Decision struct {
	Action    policy.Action
	Approvers []string
	// Rule names the rule that decided, "tools.policy[2] (tool files__*)"; empty when no rule
	// matched (the default: allow).
	Rule string
}

// Policy decides, per tool and turn, whether a tool is offered and how a call to it runs. The
// most specific matching rule wins: first by how exactly it names the tool (an exact name, then
// the glob with the most literal characters, then a server, then a source, then nothing), then by
// naming chats, then by naming roles; among rules equally specific the strictest wins (deny, then
// ask, then allow). With no matching rule a tool is allowed, as without any policy. A nil *Policy
// allows everything.
type Policy struct {
	rules []rule
}

// NewPolicy checks rules and returns their Policy. Errors name the rule by its position.
func NewPolicy(rules []policy.Rule) (*Policy, error) {
	p := &Policy{rules: make([]rule, len(rules))}
	for i, r := range rules {
		if err := checkRule(r); err != nil {
			return nil, fmt.Errorf("tools.policy[%d]: %w", i, err)
		}
		r.Chats = slices.Clone(r.Chats)
		for j, c := range r.Chats {
			plat, id, _ := strings.Cut(c, ":")
			r.Chats[j] = chat.Ref{Platform: chat.Platform(strings.ToLower(strings.TrimSpace(plat))), ChatID: strings.TrimSpace(id)}.String()
		}
		if r.Action == policy.ActionAsk && len(r.Approvers) == 0 {
			r.Approvers = DefaultApprovers
		}
		p.rules[i] = rule{r}
	}
	return p, nil
}

func checkRule(r policy.Rule) error {
	switch r.Action {
	case policy.ActionAllow, policy.ActionAsk, policy.ActionDeny:
	default:
		return fmt.Errorf("action must be allow, ask or deny, got %q", r.Action)
	}
	if _, err := path.Match(r.Tool, ""); err != nil {
		return fmt.Errorf("tool %q is not a valid glob: %w", r.Tool, err)
	}
	if r.Source != "" && sourceRank(r.Source) < 0 {
		return fmt.Errorf("source must be native, plugin, mcp or skill, got %q", r.Source)
	}
	if r.Server != "" && r.Source != "" && r.Source != audit.SourceMCP {
		return fmt.Errorf("server %q names an MCP server, but source is %q", r.Server, r.Source)
	}
	for _, c := range r.Chats {
		plat, id, ok := strings.Cut(c, ":")
		if !ok || strings.TrimSpace(plat) == "" || strings.TrimSpace(id) == "" {
			return fmt.Errorf("chat %q must be platform:chat_id", c)
		}
	}
	for _, role := range r.Roles {
		switch {
		case role == RoleAdmins, role == RoleUsers, role == RoleChatAdmins:
		case strings.HasPrefix(role, RoleDiscordPrefix) && len(role) > len(RoleDiscordPrefix):
		default:
			return fmt.Errorf("role %q must be admins, users, chat_admins or discord_role:ID", role)
		}
	}
	if len(r.Approvers) > 0 && r.Action != policy.ActionAsk {
		return fmt.Errorf("approvers are only for action = \"ask\"")
	}
	for _, a := range r.Approvers {
		switch a {
		case ApproverAsker, ApproverChatAdmins, ApproverAdmins:
		default:
			return fmt.Errorf("approver %q must be asker, chat_admins or admins", a)
		}
	}
	return nil
}

// Decide returns the decision for the tool spec of source src in the turn described by info.
func (p *Policy) Decide(spec Spec, src audit.Source, info TurnInfo) Decision {
	if p == nil {
		return toolDefault(spec, info)
	}
	best, bestScore := -1, specificity{}
	for i, r := range p.rules {
		if !r.matches(spec, src, info) {
			continue
		}
		s := r.specificity()
		if best < 0 || bestScore.less(s) || bestScore == s && strictness(r.Action) > strictness(p.rules[best].Action) {
			best, bestScore = i, s
		}
	}
	if best < 0 {
		return toolDefault(spec, info)
	}
	r := p.rules[best]
	return Decision{Action: r.Action, Approvers: r.Approvers, Rule: r.label(best)}
}

// toolDefault is the decision where no rule matches: allow, except a tool that asks in groups
// (Spec.AskInGroups) in a chat that is not private.
func toolDefault(spec Spec, info TurnInfo) Decision {
	if spec.AskInGroups && !info.Private {
		return Decision{Action: policy.ActionAsk, Approvers: DefaultApprovers, Rule: "the default of " + spec.Name + " in groups"}
	}
	return Decision{Action: policy.ActionAllow}
}

func (r rule) matches(spec Spec, src audit.Source, info TurnInfo) bool {
	if r.Tool != "" {
		if ok, _ := path.Match(r.Tool, spec.Name); !ok {
			return false
		}
	}
	if r.Source != "" && r.Source != src {
		return false
	}
	if r.Server != "" && r.Server != spec.Server {
		return false
	}
	if len(r.Chats) > 0 && !slices.ContainsFunc(info.ruleChats(), func(c string) bool { return slices.Contains(r.Chats, c) }) {
		return false
	}
	if len(r.Roles) > 0 && !slices.ContainsFunc(r.Roles, info.hasRole) {
		return false
	}
	return true
}

// ruleChats are the chats whose rules apply to the turn, as "platform:chat_id" with the
// platform in lower case (the form a rule's Chats are normalised to).
func (info TurnInfo) ruleChats() []string {
	refs := info.RuleChats
	if len(refs) == 0 {
		refs = []chat.Ref{{Platform: chat.Platform(info.Platform), ChatID: info.ChatID}}
	}
	out := make([]string, len(refs))
	for i, r := range refs {
		r.Platform = chat.Platform(strings.ToLower(string(r.Platform)))
		out[i] = r.String()
	}
	return out
}

// hasRole reports whether the turn's user holds a policy role.
func (info TurnInfo) hasRole(role string) bool {
	switch role {
	case RoleAdmins:
		return info.Admin
	case RoleUsers:
		return !info.Admin
	case RoleChatAdmins:
		return info.ChatAdmin
	}
	id, ok := strings.CutPrefix(role, RoleDiscordPrefix)
	return ok && strings.EqualFold(info.Platform, "discord") && slices.Contains(info.Roles, id)
}

// specificity orders matching rules; a larger value is more specific.
type specificity struct {
	tool   int // 0 none, 1 source only, 2 server, 3+ glob by literal characters, 1<<20 exact name
	chats  bool
	roles  bool
	source bool
}

func (a specificity) less(b specificity) bool {
	switch {
	case a.tool != b.tool:
		return a.tool < b.tool
	case a.chats != b.chats:
		return b.chats
	case a.roles != b.roles:
		return b.roles
	default:
		return !a.source && b.source
	}
}

func (r rule) specificity() specificity {
	s := specificity{chats: len(r.Chats) > 0, roles: len(r.Roles) > 0, source: r.Source != ""}
	switch {
	case r.Tool != "" && !strings.ContainsAny(r.Tool, `*?[\`):
		s.tool = 1 << 20
	case r.Tool != "":
		s.tool = 3 + literalChars(r.Tool)
	case r.Server != "":
		s.tool = 2
	case r.Source != "":
		s.tool = 1
	}
	return s
}

// literalChars counts the characters of a glob that match only themselves.
func literalChars(glob string) int {
	n, inClass := 0, false
	for i := 0; i < len(glob); i++ {
		switch c := glob[i]; {
		case inClass:
			inClass = c != ']'
		case c == '[':
			inClass = true
		case c == '*' || c == '?':
		case c == '\\':
			i++
			n++
		default:
			n++
		}
	}
	return n
}

func strictness(a policy.Action) int {
	switch a {
	case policy.ActionDeny:
		return 2
	case policy.ActionAsk:
		return 1
	default:
		return 0
	}
}

func (r rule) label(i int) string {
	var what []string
	if r.Tool != "" {
		what = append(what, "tool "+r.Tool)
	}
	if r.Server != "" {
		what = append(what, "server "+r.Server)
	}
	if r.Source != "" {
		what = append(what, "source "+string(r.Source))
	}
	if len(r.Chats) > 0 {
		what = append(what, "chats "+strings.Join(r.Chats, ","))
	}
	if len(r.Roles) > 0 {
		what = append(what, "roles "+strings.Join(r.Roles, ","))
	}
	if len(what) == 0 {
		return fmt.Sprintf("tools.policy[%d]", i)
	}
	return fmt.Sprintf("tools.policy[%d] (%s)", i, strings.Join(what, ", "))
}
