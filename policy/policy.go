// Package policy holds the admin's rules as one value each, written once in config.toml and
// obeyed by the part that enforces them: a tool policy rule (Rule, compiled by tools.NewPolicy)
// and a quota's limits (Limits and Override, enforced by pipeline/quota). config decodes the
// file into these types and names the key of a wrong value; the parts take them as they are.
// It imports nothing of the module but the nouns, so both config and the parts may import it.
package policy

import "relaybot/audit"

// Action is what a policy says about calling a tool.
type Action string

// Policy actions. Allow runs the call; Ask runs it once someone allowed to approve it said yes in
// the chat; Deny neither offers the tool to the model nor runs a call to it.
const (
	ActionAllow Action = "allow"
	ActionAsk   Action = "ask"
	ActionDeny  Action = "deny"
)

// Rule is one [[tools.policy]] entry. Empty selectors match everything.
type Rule struct {
	// Tool is a tool name as the model sees it, or a glob of them (path.Match syntax: "files__*").
	Tool string `toml:"tool"`
	// Source and Server narrow the rule to one loader (native, plugin, mcp, skill) or one MCP
	// server.
	Source audit.Source `toml:"source"`
	Server string       `toml:"server"`
	// Roles are the users the rule is for ("admins", "users", "chat_admins", Discord role ids
	// as "discord_role:ID"); empty: everyone.
	Roles []string `toml:"roles"`
	// Chats are "platform:chat_id" entries (the platform in any case); empty: every chat.
	Chats []string `toml:"chats"`
	// Action is allow, ask or deny.
	Action Action `toml:"action"`
	// Approvers are who may answer an ask ("asker", "chat_admins", "admins"); empty means the
	// tools package's default approvers.
	Approvers []string `toml:"approvers"`
}

// Limits caps tokens (prompt and completion together) and cost per UTC day and month; zero means
// no cap of that kind.
type Limits struct {
	TokensPerDay   int64   `toml:"tokens_per_day"`
	TokensPerMonth int64   `toml:"tokens_per_month"`
	CostPerDay     float64 `toml:"cost_per_day"`
	CostPerMonth   float64 `toml:"cost_per_month"`
}

// Override replaces the per-user limits for the users and roles it lists ([[quotas.overrides]]:
// its limits stand in the entry itself).
type Override struct {
	// Users are "platform:user_id" entries ("*:id" for any platform).
	Users []string `toml:"users"`
	// Roles are platform role ids ("discord_role:ID") or "chat_admins".
	Roles []string `toml:"roles"`
	Limits
}
