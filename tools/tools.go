// Package tools runs the tools the agent may call. A Loader offers tools from one source (native,
// plugin, MCP, skill); the Manager asks loaders in that order, refuses tools that were not offered
// in the turn, and reports every call to a Recorder for the audit log.
package tools

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// Source names where a tool comes from. Dispatch asks sources in the order of Sources.
type Source string

// The four tool sources, in dispatch order.
const (
	SourceNative Source = "native"
	SourcePlugin Source = "plugin"
	SourceMCP    Source = "mcp"
	SourceSkill  Source = "skill"
)

// Sources lists the sources in dispatch order.
var Sources = [...]Source{SourceNative, SourcePlugin, SourceMCP, SourceSkill}

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
}

// File is a file or image a tool produced; it goes out with the final reply.
type File struct {
	Name string
	MIME string
	Data []byte
}

// Result is what a tool returned.
type Result struct {
	// Text is the result for the model: plain text or JSON.
	Text string
	// Files are kept for the final reply; the model gets a short note about them.
	Files []File
}

// Loader offers the tools of one source and runs them.
type Loader interface {
	// Source names the loader's source.
	Source() Source
	// Tools lists the tools available now.
	Tools(ctx context.Context) []Spec
	// Call runs the tool name with its arguments (a JSON object). It returns ErrNotFound (wrapped)
	// when the loader does not have the tool, and an error wrapping ErrTimeout when it timed out.
	Call(ctx context.Context, call Invocation) (Result, error)
}

// Invocation is one call as a loader sees it.
type Invocation struct {
	Name      string
	Arguments json.RawMessage // a JSON object; "{}" when the model sent none
	// Turn carries who asked, for tools that care (admin-only tools, the audit_query plugin).
	Turn TurnInfo
}

// Errors loaders report.
var (
	ErrNotFound = errors.New("tool not found")
	ErrTimeout  = errors.New("tool call timed out")
)

// Status is the outcome of one tool call in the audit log.
type Status string

// Audit statuses of the DESIGN contract.
const (
	StatusRunning     Status = "running"
	StatusOK          Status = "ok"
	StatusError       Status = "error"
	StatusTimeout     Status = "timeout"
	StatusNotFound    Status = "not_found"
	StatusBadArgs     Status = "bad_args"
	StatusCancelled   Status = "cancelled"
	StatusDenied      Status = "denied"
	StatusInterrupted Status = "interrupted"
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
	// Private is true in a chat of one user with the bot (a Telegram private chat, a Discord DM,
	// the web chat); tools that show other chats' data (audit_query) show it only there.
	Private bool
}

// Call is one tool call the model asked for in a round.
type Call struct {
	Round     int
	ID        string // the model's tool_call_id
	Name      string
	Arguments string // raw JSON text as the model sent it; empty means {}
}

// Outcome is what a call produced. Status and Err say how it ended and are what callers branch
// on; Content is the tool message for the model, made by this package (ErrorText on a failure,
// the result capped with Truncate on success); Files go out with the final reply.
type Outcome struct {
	// Content is sent to the model verbatim as the tool message.
	Content string
	Files   []File
	Status  Status
	// Err is why the call failed; nil when Status is ok.
	Err error
	// NotRun is set on a call that never reached its tool (Turn.Skip, NotRun).
	NotRun   bool
	Duration time.Duration
}

// Record is one audit row. The Manager fills it and hands it to the Recorder twice: at start
// (Status running, FinishedAt zero) and at the end.
type Record struct {
	ID             int64 // set by the Recorder on Start
	TurnID         int64
	ConversationID int64
	Platform       string
	ChatID         string
	UserID         string
	Round          int
	ToolCallID     string
	ToolName       string
	Source         Source // empty when no loader has the tool
	Server         string
	// ServerTool is the MCP server's own name of the tool when a tool_prefix renamed it for the
	// model; empty otherwise.
	ServerTool    string
	Status        Status
	Arguments     string // redacted JSON, capped
	Result        string // redacted, capped
	Error         string
	ArgumentsSize int // size before capping
	ResultSize    int
	StartedAt     time.Time
	FinishedAt    time.Time
	Duration      time.Duration
	// ApprovalRequired is set on a call a policy said to ask about; Decision is how that ended
	// (DecisionApproved, DecisionDenied, DecisionAlways, DecisionTimeout, DecisionCancelled),
	// Approver who decided, DecidedAt when. Empty until decided.
	ApprovalRequired bool
	Decision         string
	Approver         string
	DecidedAt        time.Time
}

// Recorder keeps audit records. Start must make the row durable before it returns; Finish
// completes it.
type Recorder interface {
	Start(ctx context.Context, r *Record) error
	Finish(ctx context.Context, r *Record) error
}
