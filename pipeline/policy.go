package pipeline

// Scope says who shares a group conversation (Options.Scope).
type Scope string

// The conversation scopes.
const (
	// ScopeChat: all members of a group chat (or of one forum topic or thread) share one
	// conversation; the default.
	ScopeChat Scope = "chat"
	// ScopeUser: each member of a group chat has a conversation of their own there.
	ScopeUser Scope = "user"
)

// Busy is what a message does while its conversation's turn runs (QueueOptions.Busy).
type Busy string

// The busy policies.
const (
	BusyQueue     Busy = "queue"     // it waits its turn (the default)
	BusyInterrupt Busy = "interrupt" // it cancels the running turn and drops the waiting ones
)

// Reasoning is how the model's reasoning is shown (OutputOptions.Reasoning).
type Reasoning string

// The ways of showing reasoning.
const (
	ReasoningCollapsed Reasoning = "collapsed" // folded under "Thinking" (the default)
	ReasoningHidden    Reasoning = "hidden"    // not shown at all
	ReasoningInline    Reasoning = "inline"    // shown as a quote above the answer
)

// ExceptionHandling is what a user sees of a failure (OutputOptions.ExceptionHandling).
type ExceptionHandling string

// The ways of showing a failure.
const (
	ShowHint  ExceptionHandling = "show-hint"  // the failure hint (the default)
	ShowError ExceptionHandling = "show-error" // the error itself
	Hide      ExceptionHandling = "hide"       // nothing
)
