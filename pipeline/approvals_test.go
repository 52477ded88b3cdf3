package pipeline

import (
	"context"
	"relaybot/audit"
	"relaybot/chat"
	"relaybot/internal/testkit/wait"
	"relaybot/policy"
	"strings"
	"sync"
	"testing"

	"relaybot/adapters"
	"relaybot/internal/testkit/llm"
	"relaybot/pipeline/asking"
	"relaybot/tools"
)

// askResponder is a recResponder whose platform has buttons: each question gets the scripted
// presses in order (pressFor's for it, when set), and it keeps what each press was told.
type askResponder struct {
	*recResponder
	presses  []adapters.Answer
	pressFor func(q adapters.Question) []adapters.Answer

	mu        sync.Mutex
	questions []string
	told      []string
}

func (a *askResponder) Ask(ctx context.Context, q adapters.Question, decide func(adapters.Answer) (bool, string)) (adapters.Answer, error) {
	a.mu.Lock()
	a.questions = append(a.questions, q.Text)
	a.mu.Unlock()
	presses := a.presses
	if a.pressFor != nil {
		presses = a.pressFor(q)
	}
	for _, p := range presses {
		ok, text := decide(p)
		a.mu.Lock()
		a.told = append(a.told, text)
		a.mu.Unlock()
		if ok {
			return p, nil
		}
	}
	<-ctx.Done()
	return adapters.Answer{}, ctx.Err()
}

// In a group, only the approvers the rule names may answer: a bystander's press is refused and
// told why, and the question waits for the asker.
func TestApprovalRefusesABystander(t *testing.T) {
	policy, err := tools.NewPolicy([]policy.Rule{{Tool: "echo", Action: policy.ActionAsk, Approvers: []string{tools.ApproverAsker}}})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarnessTools(t, Options{}, tools.ManagerOptions{Policy: policy}, nil)
	h.llm.Push(llm.ToolCalls(llm.Call{ID: "c1", Name: "echo", Args: []string{`{"text":"hi"}`}}), llm.Text("done"))
	out := &askResponder{recResponder: &recResponder{stream: true}, presses: []adapters.Answer{
		{Choice: asking.ChoiceApprove, UserID: "bystander", UserName: "Bob", ChatAdmin: true},
		{Choice: asking.ChoiceApprove, UserID: "7", UserName: "Ann"},
	}}
	in := adapters.Inbound{Chat: chat.Ref{Platform: chat.Telegram, ChatID: "-100"}, Kind: adapters.Group,
		MessageID: "1", UserID: "7", UserName: "Ann", Text: "echo hi"}
	<-h.handle(in, out)
	if len(out.told) != 2 || !strings.Contains(out.told[0], "You may not answer this: only the person who asked can answer") ||
		!strings.Contains(out.told[1], "Approved by Ann") {
		t.Fatalf("presses were told %q; want Bob refused and Ann's approval shown", out.told)
	}
	if final, _ := out.Reply(0).Final(); final != "done" {
		t.Fatalf("final answer %q", final)
	}
	reqs := h.llm.Requests()
	if got := reqs[len(reqs)-1].Messages; !strings.HasPrefix(got[len(got)-1].Content, "echo: hi") {
		t.Fatalf("the model got %q for the approved call, want the tool's result", got[len(got)-1].Content)
	}
	r := h.rec.Records()[0]
	if !r.ApprovalRequired || r.Decision != tools.DecisionApproved || r.Approver != "Ann" {
		t.Fatalf("audit row: approval %v, decision %q by %q; want approved by Ann", r.ApprovalRequired, r.Decision, r.Approver)
	}
}

// A platform without buttons cannot approve: the call is denied and the model is told so.
func TestAskWithoutButtonsIsDenied(t *testing.T) {
	policy, err := tools.NewPolicy([]policy.Rule{{Tool: "echo", Action: policy.ActionAsk}})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarnessTools(t, Options{}, tools.ManagerOptions{Policy: policy}, nil)
	h.llm.Push(llm.ToolCalls(llm.Call{ID: "c1", Name: "echo", Args: []string{`{"text":"hi"}`}}), llm.Text("ok"))
	<-h.handle(privateMsg("7", "1", "echo hi"), &recResponder{stream: true})
	reqs := h.llm.Requests()
	got := reqs[len(reqs)-1].Messages
	if c := got[len(got)-1].Content; !strings.HasPrefix(c, "err: denied by tools.policy[0]") {
		t.Fatalf("the model got %q, want a denial naming the rule", c)
	}
}

// /stop while a question waits ends the turn: the call is denied as cancelled, the tool never runs.
func TestStopWhileWaitingForApproval(t *testing.T) {
	policy, err := tools.NewPolicy([]policy.Rule{{Tool: "echo", Action: policy.ActionAsk}})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarnessTools(t, Options{}, tools.ManagerOptions{Policy: policy}, nil)
	h.llm.Push(llm.ToolCalls(llm.Call{ID: "c1", Name: "echo", Args: []string{`{"text":"hi"}`}}), llm.Text("after"))
	out := &askResponder{recResponder: &recResponder{stream: true}}
	done := h.handle(privateMsg("7", "1", "echo hi"), out)
	wait.For(t, "the question", func() bool {
		out.mu.Lock()
		defer out.mu.Unlock()
		return len(out.questions) == 1
	})
	<-h.handle(privateMsg("7", "2", "/stop"), &recResponder{})
	<-done
	// The call's audit row ends as the cancelled question returns, which may be just after the
	// turn's reply: wait for its final status.
	wait.For(t, "the call's audit row to end", func() bool {
		recs := h.rec.Records()
		return len(recs) == 1 && recs[0].Status != audit.StatusRunning
	})
	recs := h.rec.Records()
	if len(recs) != 1 || recs[0].Status != audit.StatusDenied || recs[0].Decision != tools.DecisionCancelled {
		t.Fatalf("audit rows = %+v, want the call denied as cancelled", recs)
	}
	if strings.Contains(recs[0].Result, "echo: hi") {
		t.Fatalf("the tool ran after /stop")
	}
}
