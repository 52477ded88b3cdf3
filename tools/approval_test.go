package tools_test

import (
	"context"
	"relaybot/audit"
	"relaybot/chat"
	"relaybot/policy"
	"relaybot/tools/toolstest"
	"strings"
	"testing"
	"time"

	"relaybot/tools"
)

// scriptedApprover answers every question with the next scripted answer and keeps the questions.
// With no answers left it ends the turn (cancel) and waits for that, as /stop does.
type scriptedApprover struct {
	answers []tools.Approval
	asked   []tools.ApprovalRequest
	cancel  context.CancelFunc
}

func (s *scriptedApprover) Approve(ctx context.Context, req tools.ApprovalRequest) (tools.Approval, error) {
	s.asked = append(s.asked, req)
	if len(s.answers) == 0 {
		s.cancel()
		<-ctx.Done()
		return tools.Approval{}, ctx.Err()
	}
	a := s.answers[0]
	s.answers = s.answers[1:]
	return a, nil
}

func askManager(t *testing.T) (*tools.Manager, *toolstest.Recorder, *int) {
	t.Helper()
	runs := 0
	l := newStub(audit.SourceMCP, "mail").add("send_mail", func(context.Context, tools.Invocation) (tools.Result, error) {
		runs++
		return tools.Result{Text: "sent"}, nil
	})
	p, err := tools.NewPolicy([]policy.Rule{{Tool: "send_mail", Action: policy.ActionAsk}})
	if err != nil {
		t.Fatal(err)
	}
	rec := toolstest.NewRecorder()
	m, err := tools.NewManager([]tools.Loader{l}, rec, tools.ManagerOptions{Policy: p})
	if err != nil {
		t.Fatal(err)
	}
	return m, rec, &runs
}

func TestAskRuleWaitsForTheChatsAnswer(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name         string
		answer       *tools.Approval // nil: nobody answers until the turn ends
		noApprover   bool
		wantRun      bool
		wantStatus   audit.Status
		wantContent  string
		wantDecision audit.Decision
		wantApprover string
	}{
		{"approved", &tools.Approval{Decision: tools.DecisionApproved, By: "alice", At: at}, false, true, audit.StatusOK, "sent", tools.DecisionApproved, "alice"},
		{"denied", &tools.Approval{Decision: tools.DecisionDenied, By: "bob", At: at}, false, false, audit.StatusDenied, "err: denied by bob", tools.DecisionDenied, "bob"},
		{"timed out", &tools.Approval{Decision: tools.DecisionTimeout, At: at}, false, false, audit.StatusDenied, "err: denied by timeout", tools.DecisionTimeout, ""},
		{"turn ended while waiting", nil, false, false, audit.StatusDenied, "err: denied: context canceled", tools.DecisionCancelled, ""},
		{"nobody can approve here", nil, true, false, audit.StatusDenied, "err: denied by tools.policy[0] (tool send_mail): nobody can approve", tools.DecisionDenied, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, rec, runs := askManager(t)
			turn := m.ForTurn(tools.TurnInfo{Platform: "telegram", ChatID: "-5", UserID: "u"}, nil)
			ap := &scriptedApprover{}
			if tc.answer != nil {
				ap.answers = []tools.Approval{*tc.answer}
			}
			if !tc.noApprover {
				turn.SetApprover(ap)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			ap.cancel = cancel
			out := turn.Execute(ctx, tools.Call{ToolCall: chat.ToolCall{ID: "c", Name: "send_mail", Arguments: `{"to":"x@example.com","api_key":"sk-secret-123456"}`}})
			if (*runs == 1) != tc.wantRun || out.Status != tc.wantStatus || !strings.HasPrefix(out.Content, tc.wantContent) {
				t.Fatalf("ran=%d status=%s content=%q; want run=%v %s %q", *runs, out.Status, out.Content, tc.wantRun, tc.wantStatus, tc.wantContent)
			}
			r := rec.Records()[0]
			if !r.ApprovalRequired || r.Decision != tc.wantDecision || r.Approver != tc.wantApprover || r.DecidedAt.IsZero() {
				t.Fatalf("audit row approval = required %v, decision %q by %q at %v; want %q by %q", r.ApprovalRequired, r.Decision, r.Approver, r.DecidedAt, tc.wantDecision, tc.wantApprover)
			}
			if len(ap.asked) == 1 && (strings.Contains(ap.asked[0].Summary, "sk-secret") || !strings.Contains(ap.asked[0].Summary, "to: x@example.com")) {
				t.Fatalf("question summary = %q: want the arguments readable and the key redacted", ap.asked[0].Summary)
			}
		})
	}
}

// "Always allow" holds for the person it was given for: their later calls in that chat run
// without a question, another member's call and another chat are still asked; given "for
// everyone", it covers every member of the chat. An expired consent asks again.
func TestAlwaysAllowCoversWhomItWasGivenFor(t *testing.T) {
	l := newStub(audit.SourceMCP, "mail").add("send_mail", func(context.Context, tools.Invocation) (tools.Result, error) {
		return tools.Result{Text: "sent"}, nil
	})
	p, err := tools.NewPolicy([]policy.Rule{{Tool: "send_mail", Action: policy.ActionAsk}})
	if err != nil {
		t.Fatal(err)
	}
	rec := toolstest.NewRecorder()
	m, err := tools.NewManager([]tools.Loader{l}, rec, tools.ManagerOptions{Policy: p, Consents: &toolstest.Consents{}, AlwaysAllowFor: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ap := &scriptedApprover{}
	call := func(chatID, user string) audit.Status {
		turn := m.ForTurn(tools.TurnInfo{Platform: "discord", ChatID: chatID, UserID: user}, nil)
		turn.SetApprover(ap)
		return turn.Execute(context.Background(), tools.Call{ToolCall: chat.ToolCall{ID: "c", Name: "send_mail", Arguments: `{}`}}).Status
	}
	now := time.Now()
	ap.answers = []tools.Approval{{Decision: tools.DecisionAlways, By: "alice", ByID: "1", At: now}}
	if st := call("9", "ann"); st != audit.StatusOK || len(ap.asked) != 1 || !ap.asked[0].Remember {
		t.Fatalf("first call: %s after %d questions", st, len(ap.asked))
	}
	if st := call("9", "ann"); st != audit.StatusOK || len(ap.asked) != 1 {
		t.Fatalf("ann's second call: %s after %d questions; want it run unasked", st, len(ap.asked))
	}
	if r := rec.Records()[1]; r.Decision != tools.DecisionAlways || r.Approver != "alice" || r.ApproverID != "1" {
		t.Fatalf("second call's row: decision %q by %q (%q), want always by alice (1)", r.Decision, r.Approver, r.ApproverID)
	}
	ap.answers = []tools.Approval{{Decision: tools.DecisionDenied, By: "alice", ByID: "1"}, {Decision: tools.DecisionDenied, By: "alice", ByID: "1"}}
	if st := call("9", "bob"); st != audit.StatusDenied || len(ap.asked) != 2 {
		t.Fatalf("bob's call rode on ann's consent: %s after %d questions", st, len(ap.asked))
	}
	if st := call("10", "ann"); st != audit.StatusDenied || len(ap.asked) != 3 {
		t.Fatalf("another chat rode on the consent: %s after %d questions", st, len(ap.asked))
	}
	ap.answers = []tools.Approval{{Decision: tools.DecisionAlways, By: "admin", ByID: "99", ForEveryone: true, At: now}}
	if st := call("10", "ann"); st != audit.StatusOK || len(ap.asked) != 4 {
		t.Fatalf("the admin's answer: %s after %d questions", st, len(ap.asked))
	}
	if st := call("10", "bob"); st != audit.StatusOK || len(ap.asked) != 4 {
		t.Fatalf("bob after \"always, for everyone\": %s after %d questions; want it run unasked", st, len(ap.asked))
	}
	ap.answers = []tools.Approval{{Decision: tools.DecisionAlways, By: "alice", ByID: "1", At: now.Add(-2 * time.Hour)}}
	call("11", "ann") // a consent given two hours ago, holding one hour
	ap.answers = []tools.Approval{{Decision: tools.DecisionDenied, By: "alice", ByID: "1"}}
	if st := call("11", "ann"); st != audit.StatusDenied || len(ap.asked) != 6 {
		t.Fatalf("an expired consent held: %s after %d questions", st, len(ap.asked))
	}
}

// Without a consent store the question offers no "always".
func TestNoConsentStoreOffersNoAlways(t *testing.T) {
	m, _, _ := askManager(t)
	ap := &scriptedApprover{answers: []tools.Approval{{Decision: tools.DecisionApproved, By: "alice"}}}
	turn := m.ForTurn(tools.TurnInfo{Platform: "discord", ChatID: "9", UserID: "u"}, nil)
	turn.SetApprover(ap)
	turn.Execute(context.Background(), tools.Call{ToolCall: chat.ToolCall{ID: "c", Name: "send_mail", Arguments: `{}`}})
	if len(ap.asked) != 1 || ap.asked[0].Remember {
		t.Fatalf("questions %+v; want one, without remembering", ap.asked)
	}
}

// What an approval question shows of arguments: whole values, disguising characters as their
// code, and the paths of the values it hides.
func TestSummarizeShowsWhatItHides(t *testing.T) {
	long := strings.Repeat("a", 300) + "/../../etc/passwd"
	tests := []struct {
		args       string
		want       []string
		hidden     string
		wantCut    bool
		notContain string
	}{
		{`{"path":"` + long + `"}`, []string{"path: " + long}, "", false, ""},
		{`{"name":"invoice\u202efdp.exe","note":"a\nApprove? yes"}`, []string{`invoice\u202efdp.exe`, `a\u000aApprove? yes`}, "", false, "\u202e"},
		{`{"auth":{"token":"x1","user":"ann"},"keys":[{"api_key":"k"}]}`, []string{`"token":"[redacted]"`}, "auth.token,keys.0.api_key", false, `"x1"`},
		{`{"text":"` + strings.Repeat("word ", 400) + `"}`, nil, "", true, ""},
	}
	for _, tc := range tests {
		got, cut := tools.Summarize(tc.args)
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("Summarize(%.60s…) = %q, want it to show %q", tc.args, got, w)
			}
		}
		if tc.notContain != "" && strings.Contains(got, tc.notContain) {
			t.Errorf("Summarize(%.60s…) = %q shows %q", tc.args, got, tc.notContain)
		}
		if cut != tc.wantCut {
			t.Errorf("Summarize(%.60s…) cut = %v, want %v", tc.args, cut, tc.wantCut)
		}
		if h := strings.Join(tools.HiddenKeys(tc.args), ","); h != tc.hidden {
			t.Errorf("HiddenKeys(%.60s…) = %q, want %q", tc.args, h, tc.hidden)
		}
	}
}
