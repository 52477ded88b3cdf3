// Package tools runs the tools the agent may call. A Loader offers tools from one source (native,
// plugin, MCP, skill); the Manager asks loaders in that order, refuses tools that were not offered
// in the turn, and reports every call to a Recorder for the audit log.
package tools

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"relaybot/audit"
	"relaybot/chat"
)

// Spec describes a tool to the model.
type Spec struct {
	Name        string
	Description string
	// Parameters is the JSON Schema of the arguments object.
	Parameters json.RawMessage
	// Server is the MCP server offering the tool; empty for other sources.
	Server string
	// ServerTool is the server's own name of the tool when the loader offers it under another
	// name (an MCP server's tool_prefix); empty when Name is the server's name.
	ServerTool string
	// AdminOnly tools are offered only in turns of admins.
	AdminOnly bool
	// ReadOnly says the tool changes nothing (MCP's readOnlyHint, a native tool declared so):
	// calls to it may run side by side with other safe calls of their round.
	ReadOnly bool
	// AskInGroups is the tool's own default where no policy rule matches it: a call in a chat
	// that is not private asks for approval first (a tool that costs money, generate_image).
	// Any matching [[tools.policy]] rule decides instead.
	AskInGroups bool
	// Parallel says the configuration allows the tool to run side by side with other safe
	// calls of its round (an MCP server's parallel = true) whatever it declares.
	Parallel bool
}

// Result is what a tool returned.
type Result struct {
	// Text is the result for the model: plain text or JSON.
	Text string
	// Files are kept for the final reply; the model gets a short note about them.
	Files []chat.File
	// Sources are the places the result's numbered passages come from, [1] first ("guide.pdf,
	// page 3"): the final reply shows them as its Sources, which answers cite by number.
	Sources []string
}

// Loader offers the tools of one source and runs them.
type Loader interface {
	// Source names the loader's source.
	Source() audit.Source
	// Tools lists the tools available now.
	Tools(ctx context.Context) []Spec
	// Call runs the tool name with its arguments (a JSON object). It returns ErrNotFound (wrapped)
	// when the loader does not have the tool, and an error wrapping ErrTimeout when it timed out.
	Call(ctx context.Context, call Invocation) (Result, error)
}

// ErrUnavailable is matched (errors.Is) by the error of a call to a tool whose server is
// down, restarting or waiting for an admin's login: the call is recorded as
// audit.StatusUnavailable.
var ErrUnavailable = errors.New("tool server unavailable")

// UnavailableTeller is an optional capability of a Loader whose tools leave its list for a
// while (an MCP server down, restarting or waiting for an admin's login): for a tool name of
// its own that it does not list now, it names the server and says why the tool is unavailable,
// so that a call the model makes to it is answered with that reason instead of "not found".
// It reports nil for a name it does not know. It must not block.
type UnavailableTeller interface {
	Unavailable(name string) (server string, why error)
}

// UnknownToolTeller is an optional capability of a Loader whose servers may be unavailable
// before the bot ever learnt their tools (an MCP server never connected: before its first
// login, with no tool_prefix): it names those servers, each with why in a few words ("kit
// (needs an admin to log in)"), so that a call to a tool no loader knows is answered "not
// found" with them named. It must not block.
type UnknownToolTeller interface {
	UnknownServers() []string
}

// Invocation is one call as a loader sees it.
type Invocation struct {
	Name      string
	Arguments json.RawMessage // a JSON object; "{}" when the model sent none
	// Turn carries who asked, for tools that care (admin-only tools, the audit_query plugin).
	Turn TurnInfo
	// Running is what the call may do while it runs: report progress, ask the user. The
	// Manager always sets it; a loader called otherwise gets nil.
	Running Running
	// Server is the MCP server whose tool the turn offered and its policy judged (Spec.Server);
	// the call runs there or not at all. Empty for the other sources.
	Server string
	// Meter accounts for the model calls the tool makes for the turn (Turn.SetMeter); nil when
	// the turn has none.
	Meter Meter
}

// Meter accounts for a turn's model calls, attributed to the person of the turn (the turn's
// quota meter): Start refuses when a quota is used up; the function it returns settles the call.
type Meter interface {
	Start(ctx context.Context, call chat.ModelCall, prompt int) (func(chat.ModelCall), error)
}

// Errors loaders report.
var (
	ErrNotFound = errors.New("tool not found")
	ErrTimeout  = errors.New("tool call timed out")
	// ErrNotClaimed is the error of a call whose claim the deployment refused
	// (ManagerOptions.Claim): the turn it belongs to is no longer this replica's, and the call
	// never runs.
	ErrNotClaimed = errors.New("tool call not claimed: its turn was taken over by another replica")
)

// TurnInfo identifies the turn a call belongs to; it comes in with every call and goes into its
// audit record.
type TurnInfo struct {
	TurnID         int64
	ConversationID int64
	Platform       string
	ChatID         string
	UserID         string
	Admin          bool
	// Roles are the platform's role ids of the user in this chat (Discord guild roles);
	// ChatAdmin says the user administers the chat (a Telegram group administrator). Tool
	// policies match them.
	Roles     []string
	ChatAdmin bool
	// RuleChats are the chats whose rules apply, most specific first: a thread or forum topic
	// ("telegram:-100#7"), its chat, a Discord thread's parent channel. Policies' chats match
	// any of them; empty means Platform:ChatID alone.
	RuleChats []chat.Ref
	// Private is true in a chat of one user with the bot (a Telegram private chat, a Discord DM,
	// the web chat); tools that show other chats' data (audit_query) show it only there.
	Private bool
}

// Call is one tool call the model asked for, in the round it asked in. Its ID is the model's
// tool_call_id; its Arguments the JSON text as the model sent it, empty meaning {}.
type Call struct {
	chat.ToolCall
	Round int
}

// Outcome is what a call produced. Status and Err say how it ended and are what callers branch
// on; Content is the tool message for the model, made by this package (ErrorText on a failure,
// the result capped with Truncate on success); Files go out with the final reply.
type Outcome struct {
	// Content is sent to the model verbatim as the tool message.
	Content string
	Files   []chat.File
	// Sources are the result's numbered sources (Result.Sources), for the answer's Sources.
	Sources []string
	Status  audit.Status
	// Err is why the call failed; nil when Status is ok.
	Err error
	// NotRun is set on a call that never reached its tool (Turn.Skip, NotRun).
	NotRun   bool
	Duration time.Duration
	// FilesLeftOut says, in one sentence for the user, which files the call returned that do not
	// go out with the reply (over ManagerOptions.MaxFileBytes or MaxFilesPerTurn); empty when
	// none. The model's Content says it too.
	FilesLeftOut string
}

// Recorder keeps audit records. Start must make the row durable before it returns; Finish
// completes it.
type Recorder interface {
	Start(ctx context.Context, r *audit.Record) error
	Finish(ctx context.Context, r *audit.Record) error
}

// CallContexter is a Recorder that also gives each call the context it runs in: after Start,
// the Manager runs the tool (its approval, its loader) in CallContext(ctx, r), so what Start
// opened for r (a trace span) is the parent of what the tool does. It must not block.
type CallContexter interface {
	CallContext(ctx context.Context, r *audit.Record) context.Context
}
