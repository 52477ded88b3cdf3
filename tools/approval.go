package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"relaybot/audit"
	"slices"
	"strings"
	"time"
	"unicode"
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
	// Summary is a readable, redacted rendering of the arguments (Summarize); Cut says it had
	// to be cut, and Arguments is then the whole call (redacted JSON) for the approver to read.
	Summary   string
	Cut       bool
	Arguments string
	// Hidden are the keys whose values are redacted (HiddenKeys): the approver is told.
	Hidden []string
	// Approvers are who may answer (ApproverAsker, ApproverChatAdmins, ApproverAdmins).
	Approvers []string
	// Rule names the policy rule that asks.
	Rule string
	// Remember says an "always" answer is kept (the Manager has a consent store); without it
	// the question offers approve and deny only.
	Remember bool
}

// Approval is the chat's answer to an ApprovalRequest.
type Approval struct {
	// Decision is DecisionApproved, DecisionAlways, DecisionDenied or DecisionTimeout.
	Decision audit.Decision
	// By names who decided (their display name); ByID is their platform id. Both are empty on
	// a timeout.
	By   string
	ByID string
	// ForEveryone, with DecisionAlways, makes the consent cover every member of the chat, not
	// only the asker: for approvers who answer for others (admins, chat admins).
	ForEveryone bool
	At          time.Time
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

// ErrNotAsked is wrapped by an Approver's error when it did not put the question at all (the
// asker has too many waiting): the call is denied (DecisionDenied), the reason going to the
// model and the audit row.
var ErrNotAsked = errors.New("the approval question was not asked")

// SetApprover gives the turn the way to ask its chat about calls an ask rule covers. Without one,
// such calls are denied ("nobody can approve it here"). Call it before Execute.
func (t *Turn) SetApprover(a Approver) {
	t.approver = a
}

// DefaultAlwaysAllowFor is how long an "always allow" answer holds when
// ManagerOptions.AlwaysAllowFor is 0 (tools.always_allow_days = 30).
const DefaultAlwaysAllowFor = 30 * 24 * time.Hour

// consented returns the live consent that covers this call, if any. A failed lookup asks.
func (t *Turn) consented(ctx context.Context, name, server, rule string) (audit.Consent, bool) {
	if t.m.consents == nil {
		return audit.Consent{}, false
	}
	c, ok, err := t.m.consents.FindConsent(ctx, strings.ToLower(t.info.Platform), t.info.ChatID, t.info.UserID, name, server, rule, time.Now())
	if err != nil {
		t.m.log.Warn("tools: consents not read; asking", "tool", name, "err", err)
		return audit.Consent{}, false
	}
	return c, ok
}

// remember keeps an "always" answer: for the asker, or for everyone in the chat.
func (t *Turn) remember(ctx context.Context, name, server, rule string, a Approval) {
	c := audit.Consent{Platform: strings.ToLower(t.info.Platform), ChatID: t.info.ChatID, UserID: t.info.UserID,
		Tool: name, Server: server, Rule: rule, GivenBy: a.By, GivenByID: a.ByID, CreatedAt: a.At,
		ExpiresAt: a.At.Add(t.m.alwaysFor)}
	if a.ForEveryone {
		c.UserID = ""
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recorderTimeout)
	defer cancel()
	if _, err := t.m.consents.SaveConsent(sctx, c); err != nil {
		t.m.log.Error("tools: always-allow answer not kept; the next call asks again", "tool", name, "err", err)
	}
}

// approve runs the approval of a call the policy asks about and fills the audit record's approval
// fields; it returns nil when the call may run, else the reason it may not.
func (t *Turn) approve(ctx context.Context, rec *audit.Record, name, args string, d Decision, server string) error {
	if c, ok := t.consented(ctx, name, server, d.Rule); ok {
		rec.Decision, rec.Approver, rec.ApproverID, rec.DecidedAt = DecisionAlways, c.GivenBy, c.GivenByID, time.Now().UTC()
		return nil
	}
	if t.approver == nil {
		rec.Decision, rec.DecidedAt = DecisionDenied, time.Now().UTC()
		return fmt.Errorf("denied by %s: nobody can approve it in this chat", d.Rule)
	}
	summary, cut := Summarize(args)
	var whole string
	if cut {
		whole = wholeCall(args)
	}
	a, err := t.approver.Approve(ctx, ApprovalRequest{
		Tool: name, Server: server, Summary: summary, Cut: cut, Arguments: whole, Hidden: HiddenKeys(args),
		Approvers: slices.Clone(d.Approvers), Rule: d.Rule, Remember: t.m.consents != nil,
	})
	if errors.Is(err, ErrNotAsked) {
		rec.Decision, rec.DecidedAt = DecisionDenied, time.Now().UTC()
		return fmt.Errorf("denied by %s: %w", d.Rule, err)
	}
	if err != nil {
		rec.Decision, rec.DecidedAt = DecisionCancelled, time.Now().UTC()
		return fmt.Errorf("denied: %w", err)
	}
	if a.At.IsZero() {
		a.At = time.Now()
	}
	rec.Decision, rec.Approver, rec.ApproverID, rec.DecidedAt = a.Decision, a.By, a.ByID, a.At.UTC()
	switch {
	case a.Decision == DecisionAlways:
		if t.m.consents != nil {
			t.remember(ctx, name, server, d.Rule, a)
		}
		return nil
	case a.approved():
		return nil
	case a.Decision == DecisionTimeout:
		return fmt.Errorf("denied by timeout: nobody answered the approval question")
	default:
		return fmt.Errorf("denied by %s", a.By)
	}
}

// SummaryMaxChars caps the summary of a call's arguments in an approval question, so the
// question fits one message on every platform (Discord's 2,000 characters with the rest of the
// question, and each of its Markdown characters escaped there); a longer one is cut and the question says so (ApprovalRequest.Cut), the whole call
// going along as a file (ApprovalRequest.Arguments).
const SummaryMaxChars = 900

// Summarize renders a call's JSON arguments for people: one "key: value" line per field, in the
// model's order, whole values (no value is cut on its own: a path's tail is what matters),
// secrets redacted (RedactJSONText), control, format and bidirectional-override characters
// shown as their code ("\u202e") so the text reads as it is. Arguments that are not an object
// are shown as redacted text. It returns whether the rendering had to be cut at SummaryMaxChars.
func Summarize(args string) (string, bool) {
	red := RedactJSONText(args)
	whole := func() (string, bool) {
		v := Visible(red)
		return Truncate(v, SummaryMaxChars), utf8.RuneCountInString(v) > SummaryMaxChars
	}
	dec := json.NewDecoder(strings.NewReader(red))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return whole()
	}
	var lines []string
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return whole()
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return whole()
		}
		val := string(v)
		var s string
		if json.Unmarshal(v, &s) == nil {
			val = s
		}
		lines = append(lines, fmt.Sprintf("%s: %s", Visible(fmt.Sprint(k)), Visible(val)))
	}
	if len(lines) == 0 {
		return "(no arguments)", false
	}
	text := strings.Join(lines, "\n")
	return Truncate(text, SummaryMaxChars), utf8.RuneCountInString(text) > SummaryMaxChars
}

// wholeCall is a call's arguments for the approver to read in full: redacted, indented JSON,
// format characters written as JSON escapes (still valid JSON, and readable as what they are).
func wholeCall(args string) string {
	red := RedactJSONText(args)
	var buf bytes.Buffer
	if json.Indent(&buf, []byte(red), "", "  ") == nil {
		red = buf.String()
	}
	var b strings.Builder
	for _, r := range red {
		if unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029' {
			fmt.Fprintf(&b, "\\u%04x", r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Visible shows the characters of s that would hide or disguise text as their code: control
// characters (a newline in a value too: it could fake a line of the question), Unicode format
// characters (zero-width ones, bidirectional overrides and isolates that make "txt.exe" read
// "exe.txt") and the line and paragraph separators.
func Visible(s string) string {
	var b strings.Builder
	for _, r := range s {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029' {
			fmt.Fprintf(&b, "\\u%04x", r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// HiddenKeys lists the keys of a call's JSON arguments (as dotted paths) whose values the
// approval question and the audit log show as Redacted, in order.
func HiddenKeys(args string) []string {
	var v any
	if json.Unmarshal([]byte(args), &v) != nil {
		return nil
	}
	var out []string
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch x := v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				if IsSecretKey(k) {
					out = append(out, prefix+k)
					continue
				}
				walk(prefix+k+".", x[k])
			}
		case []any:
			for i, e := range x {
				walk(fmt.Sprintf("%s%d.", prefix, i), e)
			}
		}
	}
	walk("", v)
	return out
}
