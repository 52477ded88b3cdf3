package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"relaybot/audit"
	"relaybot/chat"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// How an approval question ended, as the audit row keeps it (audit.Record.Decision): the values
// of audit.Decisions, named here for the tools that answer approvals.
const (
	DecisionApproved  = audit.DecisionApproved
	DecisionDenied    = audit.DecisionDenied
	DecisionAlways    = audit.DecisionAlways
	DecisionTimeout   = audit.DecisionTimeout
	DecisionCancelled = audit.DecisionCancelled
)

// ApprovalRequest is the question an ask rule puts to the chat before a call runs.
type ApprovalRequest struct {
	Tool   string
	Server string
	// Summary is a readable, redacted rendering of the arguments (Summarize).
	Summary string
	// Approvers are who may answer (ApproverAsker, ApproverChatAdmins, ApproverAdmins).
	Approvers []string
	// Rule names the policy rule that asks.
	Rule string
}

// Approval is the chat's answer to an ApprovalRequest.
type Approval struct {
	// Decision is DecisionApproved, DecisionAlways, DecisionDenied or DecisionTimeout.
	Decision audit.Decision
	// By names who decided (their name or id as the platform gives it); empty on a timeout.
	By string
	At time.Time
}

func (a Approval) approved() bool {
	return a.Decision.Approved()
}

// Approver asks the chat whether a call may run. Approve blocks until someone allowed to answer
// did, or its own deadline passed (Decision DecisionTimeout), or ctx ended (it then returns the
// context's error, and the call is denied as cancelled). It is called from the turn's goroutine,
// one question at a time.
type Approver interface {
	Approve(ctx context.Context, req ApprovalRequest) (Approval, error)
}

// SetApprover gives the turn the way to ask its chat about calls an ask rule covers. Without one,
// such calls are denied ("nobody can approve it here"). Call it before Execute.
func (t *Turn) SetApprover(a Approver) {
	t.approver = a
}

// alwaysKey keys the "always allow in this chat" answers of a Manager: the chat and the tool.
type alwaysKey struct {
	chat chat.Ref
	tool string
}

func alwaysKeyOf(info TurnInfo, tool string) alwaysKey {
	return alwaysKey{chat: chat.Ref{Platform: chat.Platform(strings.ToLower(info.Platform)), ChatID: info.ChatID}, tool: tool}
}

// allowedAlways returns who answered "always allow" for tool in the turn's chat.
func (m *Manager) allowedAlways(info TurnInfo, tool string) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	by, ok := m.always[alwaysKeyOf(info, tool)]
	return by, ok
}

func (m *Manager) allowAlways(info TurnInfo, tool, by string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.always[alwaysKeyOf(info, tool)] = by
}

// approve runs the approval of a call the policy asks about and fills the audit record's approval
// fields; it returns nil when the call may run, else the reason it may not.
func (t *Turn) approve(ctx context.Context, rec *audit.Record, name, args string, d Decision, server string) error {
	if by, ok := t.m.allowedAlways(t.info, name); ok {
		rec.Decision, rec.Approver, rec.DecidedAt = DecisionAlways, by, time.Now().UTC()
		return nil
	}
	if t.approver == nil {
		rec.Decision, rec.DecidedAt = DecisionDenied, time.Now().UTC()
		return fmt.Errorf("denied by %s: nobody can approve it in this chat", d.Rule)
	}
	a, err := t.approver.Approve(ctx, ApprovalRequest{
		Tool: name, Server: server, Summary: Summarize(args), Approvers: slices.Clone(d.Approvers), Rule: d.Rule,
	})
	if err != nil {
		rec.Decision, rec.DecidedAt = DecisionCancelled, time.Now().UTC()
		return fmt.Errorf("denied: %w", err)
	}
	if a.At.IsZero() {
		a.At = time.Now()
	}
	rec.Decision, rec.Approver, rec.DecidedAt = a.Decision, a.By, a.At.UTC()
	switch {
	case a.Decision == DecisionAlways:
		t.m.allowAlways(t.info, name, a.By)
		return nil
	case a.approved():
		return nil
	case a.Decision == DecisionTimeout:
		return fmt.Errorf("denied by timeout: nobody answered the approval question")
	default:
		return fmt.Errorf("denied by %s", a.By)
	}
}

// Summary limits.
const (
	summaryMaxChars = 600
	summaryValueMax = 160
)

// Summarize renders a call's JSON arguments for people: one "key: value" line per field, in the
// model's order, secrets redacted (RedactJSONText), long values cut. Arguments that are not an
// object are shown as redacted text.
func Summarize(args string) string {
	red := RedactJSONText(args)
	dec := json.NewDecoder(strings.NewReader(red))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return Truncate(red, summaryMaxChars)
	}
	var lines []string
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return Truncate(red, summaryMaxChars)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return Truncate(red, summaryMaxChars)
		}
		val := string(v)
		var s string
		if json.Unmarshal(v, &s) == nil {
			val = s
		}
		val = strings.Join(strings.Fields(val), " ")
		if utf8.RuneCountInString(val) > summaryValueMax {
			val = string([]rune(val)[:summaryValueMax-1]) + "…"
		}
		lines = append(lines, fmt.Sprintf("%v: %s", k, val))
	}
	if len(lines) == 0 {
		return "(no arguments)"
	}
	return Truncate(strings.Join(lines, "\n"), summaryMaxChars)
}
