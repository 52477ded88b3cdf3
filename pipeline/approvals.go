package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"relaybot/adapters"
	"relaybot/tools"
)

// Choices of an approval question.
const (
	choiceApprove = "approve"
	choiceDeny    = "deny"
	choiceAlways  = "always"
)

// errApprovalTimeout ends an approval question nobody answered in time.
var errApprovalTimeout = errors.New("approval timed out")

// chatApprover asks the chat of one turn whether a tool call may run.
type chatApprover struct {
	in      adapters.Inbound
	asker   adapters.Asker
	reply   adapters.Reply
	admins  idSet // the bot's admins
	timeout time.Duration
	now     func() time.Time
}

// Approve posts the question and waits for an allowed press, the approval timeout, or the end of
// the turn (/stop, shutdown). The typing indicator is off while it waits: the bot is not working.
func (a *chatApprover) Approve(ctx context.Context, req tools.ApprovalRequest) (tools.Approval, error) {
	a.reply.Working(false)
	defer a.reply.Working(true)
	qctx, cancel := context.WithTimeoutCause(ctx, a.timeout, errApprovalTimeout)
	defer cancel()
	q := adapters.Question{
		Text: questionText(req),
		Choices: []adapters.Choice{
			{ID: choiceApprove, Label: "Approve"},
			{ID: choiceDeny, Label: "Deny"},
			{ID: choiceAlways, Label: "Always allow in this chat"},
		},
	}
	ans, err := a.asker.Ask(qctx, q, func(ans adapters.Answer) (bool, string) {
		if !a.mayAnswer(ans, req.Approvers) {
			return false, "You may not answer this: " + approversText(req.Approvers) + "."
		}
		return true, q.Text + "\n\n" + decisionText(ans)
	})
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
	case choiceAlways:
		d = tools.DecisionAlways
	}
	return tools.Approval{Decision: d, By: who(ans), At: a.now()}, nil
}

// mayAnswer reports whether the presser is one of the approvers: the asker (the user whose
// message started the turn), a chat admin (as the platform reports it; in a private chat its one
// user), or a bot admin.
func (a *chatApprover) mayAnswer(ans adapters.Answer, approvers []string) bool {
	if ans.UserID == "" {
		return false
	}
	for _, ap := range approvers {
		switch ap {
		case tools.ApproverAsker:
			if ans.UserID == a.in.UserID {
				return true
			}
		case tools.ApproverChatAdmins:
			if ans.ChatAdmin || a.in.Kind == adapters.Private && ans.UserID == a.in.UserID {
				return true
			}
		case tools.ApproverAdmins:
			if a.admins.has(a.in.Chat.Platform, ans.UserID) {
				return true
			}
		}
	}
	return false
}

func who(ans adapters.Answer) string {
	if ans.UserName != "" {
		return ans.UserName
	}
	return ans.UserID
}

func questionText(req tools.ApprovalRequest) string {
	name := req.Tool
	if req.Server != "" {
		name += " (MCP server " + req.Server + ")"
	}
	return fmt.Sprintf("The assistant wants to run %s with:\n%s\n\nApprove? (%s)", name, req.Summary, approversText(req.Approvers))
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

func decisionText(ans adapters.Answer) string {
	switch ans.Choice {
	case choiceApprove:
		return "Approved by " + who(ans) + "."
	case choiceAlways:
		return "Approved by " + who(ans) + ", and always allowed in this chat."
	default:
		return "Denied by " + who(ans) + "."
	}
}
