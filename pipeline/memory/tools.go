package memory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"relaybot/audit"
	"relaybot/chat"
	"relaybot/tools"
)

// The memory tools' names.
const (
	ToolRemember = "remember"
	ToolSearch   = "search_memory"
	ToolForget   = "forget_memory"
)

// searchLimit is how many facts search_memory returns.
const searchLimit = 10

// Tools is the tools.Loader of remember, search_memory and forget_memory: the model serves a
// person's explicit requests ("remember that…", "forget my address") with them, on that
// person's facts only (the turn's speaker, never an argument).
type Tools struct{ m *Memory }

// Tools returns the memory tools' loader.
func (m *Memory) Tools() *Tools { return &Tools{m: m} }

var _ tools.Loader = (*Tools)(nil)

// Source reports audit.SourceNative: they are the bot's own tools.
func (t *Tools) Source() audit.Source { return audit.SourceNative }

var toolSpecs = []tools.Spec{
	{Name: ToolRemember, Description: "Remember a fact about the person you are talking to, when they ask you to remember it. " +
		"Write it as a short third-person sentence.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"fact":{"type":"string","description":"the fact, one sentence"}},"required":["fact"],"additionalProperties":false}`)},
	{Name: ToolSearch, Description: "Search what you remember about the person you are talking to, beyond the facts already given. " +
		"Returns numbered facts with their ids.", ReadOnly: true,
		Parameters: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string","description":"what to look for"}},"required":["query"],"additionalProperties":false}`)},
	{Name: ToolForget, Description: "Forget one fact about the person you are talking to, when they ask you to, by the id search_memory gave.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"id":{"type":"integer","description":"the fact's id"}},"required":["id"],"additionalProperties":false}`)},
}

// Tools lists the three tools.
func (t *Tools) Tools(context.Context) []tools.Spec { return append([]tools.Spec(nil), toolSpecs...) }

// Call runs one of them for the turn's speaker, where the turn happens.
func (t *Tools) Call(ctx context.Context, inv tools.Invocation) (tools.Result, error) {
	who := chat.User{Platform: chat.Platform(inv.Turn.Platform), ID: inv.Turn.UserID}
	at := Place{Chat: chat.Ref{Platform: who.Platform, ChatID: inv.Turn.ChatID}, Private: inv.Turn.Private}
	if who.ID == "" {
		return tools.Result{}, fmt.Errorf("%s: no person to remember for", inv.Name)
	}
	var a struct {
		Fact  string `json:"fact"`
		Query string `json:"query"`
		ID    int64  `json:"id"`
	}
	if err := json.Unmarshal(inv.Arguments, &a); err != nil {
		return tools.Result{}, fmt.Errorf("%s: bad arguments: %w", inv.Name, err)
	}
	switch inv.Name {
	case ToolRemember:
		f, err := t.m.Remember(ctx, who, at, a.Fact, Source{Turn: inv.Turn.TurnID, Actor: who.String()}, PathTool, meterOf(inv))
		if err != nil {
			return tools.Result{}, err
		}
		return tools.Result{Text: fmt.Sprintf("Remembered (id %d).", f.ID)}, nil
	case ToolSearch:
		found, err := t.m.Search(ctx, who, at, a.Query, searchLimit, meterOf(inv))
		if err != nil {
			return tools.Result{}, err
		}
		if len(found) == 0 {
			return tools.Result{Text: "Nothing remembered matches."}, nil
		}
		var b strings.Builder
		for _, f := range found {
			fmt.Fprintf(&b, "id %d: %s\n", f.ID, blockEscape.Replace(f.Text))
		}
		return tools.Result{Text: strings.TrimSpace(b.String())}, nil
	case ToolForget:
		err := t.m.Forget(ctx, who, a.ID, PathTool, who.String())
		if errors.Is(err, ErrNotFound) {
			return tools.Result{}, fmt.Errorf("forget_memory: no fact %d is remembered about this person", a.ID)
		}
		if err != nil {
			return tools.Result{}, err
		}
		return tools.Result{Text: fmt.Sprintf("Forgotten (id %d).", a.ID)}, nil
	}
	return tools.Result{}, fmt.Errorf("memory: %s: %w", inv.Name, tools.ErrNotFound)
}

// meterOf is the turn's meter of a call, or nil: the tools' embedding calls count for the person
// who asked, as recall's and extraction's do.
func meterOf(inv tools.Invocation) Meter {
	if inv.Meter == nil {
		return nil
	}
	return inv.Meter
}
