package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"relaybot/adapters"
	"relaybot/chat"
	"relaybot/tools"
)

// Choices of an approval question.
const (
	choiceApprove = "approve"
	choiceDeny    = "deny"
	// choiceAlways remembers the answer for the asker's later calls; choiceAlwaysChat for
	// everyone's in the chat (approvers who answer for others only).
	choiceAlways     = "always"
	choiceAlwaysChat = "always_chat"
)

// errApprovalTimeout ends an approval question nobody answered in time.
var errApprovalTimeout = errors.New("approval timed out")

// chatApprover asks the chat of one turn whether a tool call may run, and the questions its
// tools ask (elicit.go).
type chatApprover struct {
	in      adapters.Inbound
	out     adapters.Responder // posts the whole call of a question that cuts it
	asker   adapters.Asker
	reply   adapters.Reply
	admins  idSet // the bot's admins
	timeout time.Duration
	now     func() time.Time
	// slot is the turn's place among the turns in flight, given back while a question waits;
	// open counts the asker's questions waiting, against Tools.MaxOpenQuestions.
	slot *turnSlot
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
// with Tools.MaxOpenQuestions questions waiting already is not asked: the call is denied.
func (a *chatApprover) Approve(ctx context.Context, req tools.ApprovalRequest) (tools.Approval, error) {
	asker := chat.User{Platform: a.in.Chat.Platform, ID: a.in.UserID}.String()
	if !a.open.add(asker) {
		return tools.Approval{}, fmt.Errorf("%w: %s already has %d approval questions waiting (tools.max_open_questions)",
			tools.ErrNotAsked, nameOr(a.in.UserName, a.in.UserID), a.open.max)
	}
	defer a.open.done(asker)
	if req.Cut && !a.postWholeCall(ctx, req) {
		return tools.Approval{}, fmt.Errorf("%w: the call is too long for the question and its whole arguments could not be posted", tools.ErrNotAsked)
	}
	a.reply.Working(false)
	defer a.reply.Working(true)
	if a.slot != nil {
		a.slot.leave()
	}
	qctx, cancel := context.WithTimeoutCause(ctx, a.timeout, errApprovalTimeout)
	defer cancel()
	q := adapters.Question{Text: questionText(req), Choices: a.choices(req), Stray: a.strays.stray(req.Tool, req.Server)}
	ans, err := a.asker.Ask(qctx, q, func(ans adapters.Answer) (bool, string) {
		may, forOthers := a.mayAnswer(ans, req.Approvers)
		if !may {
			return false, "You may not answer this: " + approversText(req.Approvers) + "."
		}
		if ans.Choice == choiceAlwaysChat && !forOthers {
			return false, "Only bot admins or chat admins can allow this for everyone in the chat."
		}
		return true, q.Text + "\n\n" + a.decisionText(ans)
	})
	if a.slot != nil {
		if serr := a.slot.back(ctx); serr != nil && err == nil {
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
	case choiceApprove:
		d = tools.DecisionApproved
	case choiceAlways, choiceAlwaysChat:
		d = tools.DecisionAlways
	}
	return tools.Approval{Decision: d, By: who(ans), ByID: ans.UserID, ForEveryone: ans.Choice == choiceAlwaysChat, At: a.now()}, nil
}

// choices are the buttons of a question: approve and deny, and when an "always" answer is kept,
// "always" for the asker; where approvers may answer for others (a group whose rule names more
// than the asker), also "always" for everyone in the chat.
func (a *chatApprover) choices(req tools.ApprovalRequest) []adapters.Choice {
	cs := []adapters.Choice{{ID: choiceApprove, Label: "Approve"}, {ID: choiceDeny, Label: "Deny"}}
	switch {
	case !req.Remember:
	case a.in.Kind == adapters.Private:
		cs = append(cs, adapters.Choice{ID: choiceAlways, Label: "Always allow"})
	case slices.Equal(req.Approvers, []string{tools.ApproverAsker}):
		cs = append(cs, adapters.Choice{ID: choiceAlways, Label: "Always allow for " + a.askerName()})
	default:
		cs = append(cs, adapters.Choice{ID: choiceAlways, Label: "Always, for " + a.askerName()},
			adapters.Choice{ID: choiceAlwaysChat, Label: "Always, for everyone in this chat"})
	}
	return cs
}

func (a *chatApprover) askerName() string { return nameOr(a.in.UserName, a.in.UserID) }

// mayAnswer reports whether the presser is one of the approvers, and whether they answer for
// others too: the asker (the user whose message started the turn) answers for themself only; a
// chat admin (as the platform reports it; in a private chat its one user) or a bot admin answers
// for everyone.
func (a *chatApprover) mayAnswer(ans adapters.Answer, approvers []string) (may, forOthers bool) {
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
			if a.admins.has(a.in.Chat.Platform, ans.UserID) {
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
func (a *chatApprover) postWholeCall(ctx context.Context, req tools.ApprovalRequest) bool {
	if a.out == nil {
		return false
	}
	r := a.out.NewReply(ctx)
	err := r.Finish(ctx, "The whole call to "+tools.Visible(req.Tool)+", for the question below:",
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

func (a *chatApprover) decisionText(ans adapters.Answer) string {
	switch ans.Choice {
	case choiceApprove:
		return "Approved by " + who(ans) + "."
	case choiceAlways:
		if a.in.Kind == adapters.Private {
			return "Approved by " + who(ans) + ", and always allowed here."
		}
		return "Approved by " + who(ans) + ", and always allowed for " + a.askerName() + " in this chat."
	case choiceAlwaysChat:
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
