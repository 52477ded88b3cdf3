// Package asking is the part of the pipeline that asks people in the chat: whether a tool call
// may run (approvals), a tool's questions (elicitation, as buttons, a form or a typed reply
// prompt, carried across replicas), and the "always allow" answers kept as consents (/allowed).
// A turn takes an Approver for its tools; the pipeline hands each message to the open prompts
// first (Questions.Take). It knows nothing of the turn or the queue: the turn's place among the
// turns in flight is a Slot it gives back while a question waits.
package asking

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"relaybot/adapters"
	"relaybot/adapters/markdown"
	"relaybot/chat"
	"relaybot/pipeline/access"
	"relaybot/tools"
)

// Choices of an approval question: the ids of its buttons, which a press names.
const (
	ChoiceApprove = "approve"
	ChoiceDeny    = "deny"
	// ChoiceAlways remembers the answer for the asker's later calls; ChoiceAlwaysChat for
	// everyone's in the chat (approvers who answer for others only).
	ChoiceAlways     = "always"
	ChoiceAlwaysChat = "always_chat"
)

// errApprovalTimeout ends an approval question nobody answered in time.
var errApprovalTimeout = errors.New("approval timed out")

// Options say how questions are asked.
type Options struct {
	// Timeout is how long an approval question waits for an answer before the call is denied.
	Timeout time.Duration
	// MaxOpen is how many approval questions of one user may wait at once (on this replica); a
	// call past them is denied without a question.
	MaxOpen int
	// Admins are the bot's admins, who may answer for anyone.
	Admins access.IDSet
	// Relay carries typed answers to the replica whose prompt is open in their chat; nil: this
	// process alone.
	Relay PromptRelay
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// Recorder keeps a press of a question's button made outside the question's chat in the
	// audit log (nil: only refused); Logger tells of a row it could not write (nil: discarded).
	Recorder tools.Recorder
	Logger   *slog.Logger
}

// Questions are the questions open on this replica: each user's approval questions waiting,
// and the reply prompts open in chats. It is safe for concurrent use.
type Questions struct {
	opts    Options
	open    *openQuestions
	prompts *prompts
}

// New returns the Questions of o.
func New(o Options) *Questions {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Questions{opts: o, open: &openQuestions{max: o.MaxOpen, n: map[string]int{}}, prompts: &prompts{relay: o.Relay}}
}

// Take hands in to the prompt open in its chat, on this replica or, carried, on another, when
// its sender may answer it; false when no prompt takes it (the message goes on as usual).
func (qs *Questions) Take(ctx context.Context, in adapters.Inbound) bool {
	return qs.prompts.take(in) || qs.prompts.carried(ctx, in)
}

// Slot is a turn's place among the turns in flight: Leave gives it back while a question waits,
// Back takes one again once the last is answered (waiting as long as ctx lives).
type Slot interface {
	Leave()
	Back(ctx context.Context) error
}

// Turn is what the questions of one turn are asked with.
type Turn struct {
	// In is the message the turn answers: its asker and chat.
	In adapters.Inbound
	// Out posts the whole call of a question that cuts it; Asker posts the questions.
	Out   adapters.Responder
	Asker adapters.Asker
	// Reply is the turn's answer, whose typing indicator is off while a question waits.
	Reply adapters.Reply
	// Slot is given back while a question waits; nil: none.
	Slot Slot
	// Notice posts a message into the chat.
	Notice func(text string)
	// Admins are the bot's admins as the turn's configuration lists them, who may answer for
	// anyone; nil: Options.Admins.
	Admins *access.IDSet
}

// Approver returns the tools.Approver and tools.Elicitor of one turn.
func (qs *Questions) Approver(t Turn) *Approver {
	admins := qs.opts.Admins
	if t.Admins != nil {
		admins = *t.Admins
	}
	return &Approver{in: t.In, out: t.Out, asker: t.Asker, reply: t.Reply, admins: admins,
		timeout: qs.opts.Timeout, now: qs.opts.Now, slot: t.Slot, open: qs.open, prompts: qs.prompts, notice: t.Notice,
		strays: strayRecorder{rec: qs.opts.Recorder, in: t.In, now: qs.opts.Now, log: qs.opts.Logger}}
}

// Approver asks the chat of one turn whether a tool call may run, and the questions its
// tools ask (elicit.go).
type Approver struct {
	in      adapters.Inbound
	out     adapters.Responder // posts the whole call of a question that cuts it
	asker   adapters.Asker
	reply   adapters.Reply
	admins  access.IDSet // the bot's admins
	timeout time.Duration
	now     func() time.Time
	// slot is the turn's place among the turns in flight, given back while a question waits;
	// open counts the asker's questions waiting, against Options.MaxOpen.
	slot Slot
	open *openQuestions
	// prompts take typed answers to a tool's question (elicit.go); notice posts a message.
	prompts *prompts
	notice  func(text string)
	// strays records the presses of its questions' buttons made in other chats.
	strays strayRecorder
}

// Approve posts the question and waits for an allowed press, the approval timeout, or the end of
// the turn (/stop, shutdown). The typing indicator is off while it waits: the bot is not working,
// and its place among the turns in flight goes to another chat until the answer comes. A user
// with Options.MaxOpen questions waiting already is not asked: the call is denied.
func (a *Approver) Approve(ctx context.Context, req tools.ApprovalRequest) (tools.Approval, error) {
	asker := chat.User{Platform: a.in.Chat.Platform, ID: a.in.UserID}.String()
	if !a.open.add(asker) {
		return tools.Approval{}, fmt.Errorf("%w: %s already has %d approval questions waiting (tools.max_open_questions)",
			tools.ErrNotAsked, cmp.Or(a.in.UserName, a.in.UserID), a.open.max)
	}
	defer a.open.done(asker)
	if req.Cut && !a.postWholeCall(ctx, req) {
		return tools.Approval{}, fmt.Errorf("%w: the call is too long for the question and its whole arguments could not be posted", tools.ErrNotAsked)
	}
	a.reply.Working(false)
	defer a.reply.Working(true)
	if a.slot != nil {
		a.slot.Leave()
	}
	qctx, cancel := context.WithTimeoutCause(ctx, a.timeout, errApprovalTimeout)
	defer cancel()
	q := adapters.Question{Text: questionText(req), Choices: a.choices(req), Stray: a.strays.stray(req.Tool, req.Server)}
	ans, err := a.asker.Ask(qctx, q, func(ans adapters.Answer) (bool, string) {
		may, forOthers := a.mayAnswer(ans, req.Approvers)
		if !may {
			return false, "You may not answer this: " + approversText(req.Approvers) + "."
		}
		if ans.Choice == ChoiceAlwaysChat && !forOthers {
			return false, "Only bot admins or chat admins can allow this for everyone in the chat."
		}
		return true, q.Text + "\n\n" + a.decisionText(ans)
	})
	if a.slot != nil {
		if serr := a.slot.Back(ctx); serr != nil && err == nil {
			err = serr
		}
	}
	switch {
	case err == nil:
	case ctx.Err() == nil && errors.Is(context.Cause(qctx), errApprovalTimeout):
		return tools.Approval{Decision: tools.DecisionTimeout, At: a.now()}, nil
	case ctx.Err() != nil:
		return tools.Approval{}, fmt.Errorf("the turn ended before anyone answered: %w", context.Cause(ctx))
	default:
		return tools.Approval{}, fmt.Errorf("the approval question could not be posted: %w", err)
	}
	d := tools.DecisionDenied
	switch ans.Choice {
	case ChoiceApprove:
		d = tools.DecisionApproved
	case ChoiceAlways, ChoiceAlwaysChat:
		d = tools.DecisionAlways
	}
	return tools.Approval{Decision: d, By: who(ans), ByID: ans.UserID, ForEveryone: ans.Choice == ChoiceAlwaysChat, At: a.now()}, nil
}

// choices are the buttons of a question: approve and deny, and when an "always" answer is kept,
// "always" for the asker; where approvers may answer for others (a group whose rule names more
// than the asker), also "always" for everyone in the chat.
func (a *Approver) choices(req tools.ApprovalRequest) []adapters.Choice {
	cs := []adapters.Choice{{ID: ChoiceApprove, Label: "Approve"}, {ID: ChoiceDeny, Label: "Deny"}}
	switch {
	case !req.Remember:
	case a.in.Kind == adapters.Private:
		cs = append(cs, adapters.Choice{ID: ChoiceAlways, Label: "Always allow"})
	case slices.Equal(req.Approvers, []string{tools.ApproverAsker}):
		cs = append(cs, adapters.Choice{ID: ChoiceAlways, Label: "Always allow for " + a.askerName()})
	default:
		cs = append(cs, adapters.Choice{ID: ChoiceAlways, Label: "Always, for " + a.askerName()},
			adapters.Choice{ID: ChoiceAlwaysChat, Label: "Always, for everyone in this chat"})
	}
	return cs
}

func (a *Approver) askerName() string { return cmp.Or(a.in.UserName, a.in.UserID) }

// mayAnswer reports whether the presser is one of the approvers, and whether they answer for
// others too: the asker (the user whose message started the turn) answers for themself only; a
// chat admin (as the platform reports it; in a private chat its one user) or a bot admin answers
// for everyone.
func (a *Approver) mayAnswer(ans adapters.Answer, approvers []string) (may, forOthers bool) {
	if ans.UserID == "" {
		return false, false
	}
	for _, ap := range approvers {
		switch ap {
		case tools.ApproverAsker:
			may = may || ans.UserID == a.in.UserID
		case tools.ApproverChatAdmins:
			if ans.ChatAdmin || a.in.Kind == adapters.Private && ans.UserID == a.in.UserID {
				may, forOthers = true, true
			}
		case tools.ApproverAdmins:
			if a.admins.Has(a.in.Chat.Platform, ans.UserID) {
				may, forOthers = true, true
			}
		}
	}
	return may, forOthers
}

func who(ans adapters.Answer) string {
	if ans.UserName != "" {
		return ans.UserName
	}
	return ans.UserID
}

// questionText is the question about a call: the tool, its arguments, what of them the
// question does not show (a cut, the values that look like secrets), and who may answer.
func questionText(req tools.ApprovalRequest) string {
	name := tools.Visible(req.Tool)
	if req.Server != "" {
		name += " (MCP server " + tools.Visible(req.Server) + ")"
	}
	var notes []string
	if req.Cut {
		notes = append(notes, "The arguments are longer than this question shows: the whole call is in the file "+wholeCallName(req)+" posted above.")
	}
	if n := len(req.Hidden); n == 1 {
		notes = append(notes, "1 value that looks like a secret is hidden: "+tools.Visible(req.Hidden[0])+".")
	} else if n > 1 {
		notes = append(notes, fmt.Sprintf("%d values that look like secrets are hidden: %s.", n, tools.Visible(strings.Join(req.Hidden, ", "))))
	}
	text := fmt.Sprintf("The assistant wants to run %s with:\n%s", name, req.Summary)
	if len(notes) > 0 {
		text += "\n\n" + strings.Join(notes, "\n")
	}
	return text + "\n\nApprove? (" + approversText(req.Approvers) + ")"
}

// wholeCallName is the name of the file that carries a call's whole arguments.
func wholeCallName(req tools.ApprovalRequest) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r < ' ' {
			return '_'
		}
		return r
	}, req.Tool) + "-arguments.json"
}

// postWholeCall posts the whole arguments of a call whose question had to cut them, as a file,
// before the question: the approver reads everything they approve. It reports whether it did.
func (a *Approver) postWholeCall(ctx context.Context, req tools.ApprovalRequest) bool {
	if a.out == nil {
		return false
	}
	r := a.out.NewReply(ctx)
	err := r.Finish(ctx, "The whole call to "+markdown.Escape(tools.Visible(req.Tool))+", for the question below:",
		[]chat.File{{Name: wholeCallName(req), MIME: "application/json", Data: []byte(req.Arguments)}})
	return err == nil
}

func approversText(approvers []string) string {
	var names []string
	for _, a := range []struct{ id, name string }{
		{tools.ApproverAsker, "the person who asked"},
		{tools.ApproverChatAdmins, "chat admins"},
		{tools.ApproverAdmins, "bot admins"},
	} {
		if slices.Contains(approvers, a.id) {
			names = append(names, a.name)
		}
	}
	return "only " + strings.Join(names, ", ") + " can answer"
}

func (a *Approver) decisionText(ans adapters.Answer) string {
	switch ans.Choice {
	case ChoiceApprove:
		return "Approved by " + who(ans) + "."
	case ChoiceAlways:
		if a.in.Kind == adapters.Private {
			return "Approved by " + who(ans) + ", and always allowed here."
		}
		return "Approved by " + who(ans) + ", and always allowed for " + a.askerName() + " in this chat."
	case ChoiceAlwaysChat:
		return "Approved by " + who(ans) + ", and always allowed for everyone in this chat."
	default:
		return "Denied by " + who(ans) + "."
	}
}

// openQuestions counts each user's approval questions waiting on this replica.
type openQuestions struct {
	max int
	mu  sync.Mutex
	n   map[string]int
}

// add counts a question of user; false, without counting it, when they have max waiting.
func (o *openQuestions) add(user string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.n[user] >= o.max {
		return false
	}
	o.n[user]++
	return true
}

func (o *openQuestions) done(user string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.n[user]--; o.n[user] <= 0 {
		delete(o.n, user)
	}
}
