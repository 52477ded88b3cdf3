package knowledge

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"relaybot/audit"
	"relaybot/chat"
	"relaybot/tools"
)

// ToolSearch is the knowledge tool's name.
const ToolSearch = "search_knowledge"

// toolResults is how many chunks search_knowledge returns.
const toolResults = 5

// Tools is the tools.Loader of search_knowledge: offered in a turn only where a base serves the
// chat (tools.TurnScoped), described with those bases, and refusing any other base even when
// called by name.
type Tools struct{ k *Knowledge }

// Tools returns the knowledge tool's loader.
func (k *Knowledge) Tools() *Tools { return &Tools{k: k} }

var (
	_ tools.Loader     = (*Tools)(nil)
	_ tools.TurnScoped = (*Tools)(nil)
)

// Source reports audit.SourceNative: it is the bot's own tool.
func (t *Tools) Source() audit.Source { return audit.SourceNative }

var searchSpec = tools.Spec{Name: ToolSearch, ReadOnly: true,
	Description: "Search the knowledge bases of this chat (documents the admins added). Returns numbered passages, " +
		"each with its document and page or section; cite the passages you use as [1], [2].",
	Parameters: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string","description":"what to look for, in words the documents would use"},` +
		`"base":{"type":"string","description":"one base's name; empty searches every base of this chat"}},"required":["query"],"additionalProperties":false}`)}

// Tools lists search_knowledge when there is a base at all.
func (t *Tools) Tools(context.Context) []tools.Spec {
	if len(t.k.opts.Bases) == 0 {
		return nil
	}
	return []tools.Spec{searchSpec}
}

// ForTurn offers search_knowledge only in chats some "tool" base serves, naming those bases.
func (t *Tools) ForTurn(spec tools.Spec, info tools.TurnInfo) (tools.Spec, bool) {
	bases := t.basesOf(info)
	if len(bases) == 0 {
		return spec, false
	}
	var b strings.Builder
	b.WriteString(spec.Description + " Bases:")
	for _, base := range bases {
		fmt.Fprintf(&b, " %q", base.Name)
		if base.Description != "" {
			fmt.Fprintf(&b, " (%s)", base.Description)
		}
		b.WriteString(";")
	}
	spec.Description = strings.TrimSuffix(b.String(), ";") + "."
	return spec, true
}

// basesOf are the "tool" bases a turn may search ("auto" ones come into the turn by
// themselves).
func (t *Tools) basesOf(info tools.TurnInfo) []Base {
	refs := info.RuleChats
	if len(refs) == 0 {
		refs = []chat.Ref{{Platform: chat.Platform(info.Platform), ChatID: info.ChatID}}
	}
	var out []Base
	for _, b := range t.k.BasesFor(refs) {
		if b.Mode == ModeTool {
			out = append(out, b)
		}
	}
	return out
}

// Call searches the bases of the turn's chat (or the one named, when the chat may use it).
func (t *Tools) Call(ctx context.Context, inv tools.Invocation) (tools.Result, error) {
	if inv.Name != ToolSearch {
		return tools.Result{}, fmt.Errorf("knowledge: %s: %w", inv.Name, tools.ErrNotFound)
	}
	var a struct {
		Query string `json:"query"`
		Base  string `json:"base"`
	}
	if err := json.Unmarshal(inv.Arguments, &a); err != nil {
		return tools.Result{}, fmt.Errorf("%s: bad arguments: %w", inv.Name, err)
	}
	var names []string
	for _, b := range t.basesOf(inv.Turn) {
		if a.Base == "" || a.Base == b.Name {
			names = append(names, b.Name)
		}
	}
	if len(names) == 0 {
		if a.Base != "" {
			return tools.Result{}, fmt.Errorf("%s: this chat has no knowledge base %q", inv.Name, a.Base)
		}
		return tools.Result{}, fmt.Errorf("%s: this chat has no knowledge base", inv.Name)
	}
	var meter Meter
	if inv.Meter != nil {
		meter = inv.Meter
	}
	hits, err := t.k.Search(ctx, names, a.Query, toolResults, meter)
	if err != nil {
		return tools.Result{}, err
	}
	if len(hits) == 0 {
		return tools.Result{Text: "Nothing in the knowledge bases matches."}, nil
	}
	return tools.Result{Text: Numbered(hits), Sources: Sources(hits)}, nil
}
