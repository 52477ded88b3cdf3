package main

import (
	"context"
	"strings"
	"testing"

	"relaybot/adapters"
	"relaybot/audit"
	tgkit "relaybot/internal/testkit/telegram"
	"relaybot/internal/testkit/wait"
	"relaybot/policy"
)

// A member of group A who administers group B replays A's "always, for everyone in this chat"
// button from a bot message in B: the press is refused with an alert, the tool does not run,
// no consent is stored for A, and the audit log shows who tried from where. A's own chat admin
// then approves in A as before.
func TestAnAdminOfAnotherGroupCannotAnswerAGroupsQuestion(t *testing.T) {
	t.Parallel() // mostly waiting, on little CPU (main_test.go)
	e := newEnv(t)
	cfg := e.config()
	cfg.Tools.Policy = []policy.Rule{{Tool: "echo", Action: "ask"}}
	e.llm.SetHandler(toolModel)
	e.start(cfg)
	groupA := tgkit.Chat{ID: -500, Type: "group", Title: "team"}
	groupB := tgkit.Chat{ID: -600, Type: "group", Title: "elsewhere"}
	e.tg.SetChatAdmin(groupA.ID, 9)
	e.tg.SetChatAdmin(groupB.ID, 12) // user 12: a member of A, an admin of B only
	defer func() {
		if t.Failed() {
			t.Logf("bot texts in A: %q\nlogs:\n%s", e.botTexts(groupA.ID), e.logs.String())
		}
	}()

	e.tg.Send(tgkit.Inbound{Chat: groupB, From: user(12), Text: "@relay_test_bot in B"})
	var inB tgkit.Message
	wait.For(t, "a bot message in group B", func() bool {
		ms := e.tg.BotMessages(groupB.ID)
		if len(ms) > 0 {
			inB = ms[0]
		}
		return len(ms) > 0
	})
	e.tg.Send(tgkit.Inbound{Chat: groupA, From: user(7), Text: "@relay_test_bot in A"})
	var q tgkit.Message
	wait.For(t, "the question in A", func() bool {
		for _, m := range e.tg.BotMessages(groupA.ID) {
			if strings.Contains(m.Text, "echo (MCP server kit)") && m.ReplyMarkup != "" {
				q = m
				return true
			}
		}
		return false
	})

	id := e.tg.Press(groupB, user(12), inB.ID, pressData(t, q, "always_chat"))
	wait.For(t, "the answer to the replayed press", func() bool { _, ok := e.tg.Answer(id); return ok })
	if a, _ := e.tg.Answer(id); !a.ShowAlert || a.Text != adapters.StrayPress {
		t.Fatalf("the press from group B was answered %+v, want an alert: %q", a, adapters.StrayPress)
	}
	var refused audit.Record
	wait.For(t, "the refused press in the audit log", func() bool {
		rows, _, err := e.openStore().ToolCalls.ToolCalls(context.Background(), audit.Filter{Tool: "echo", Statuses: []audit.Status{audit.StatusDenied}})
		if err == nil && len(rows) == 1 {
			refused = rows[0]
		}
		return err == nil && len(rows) == 1
	})
	if refused.ChatID != "-500" || refused.ApproverID != "12" || !strings.Contains(refused.Error, "telegram:-600") {
		t.Errorf("audit row of the refused press: chat %q, by %q, error %q; want chat -500, by 12, naming telegram:-600", refused.ChatID, refused.ApproverID, refused.Error)
	}
	if n := e.kit.Calls("echo"); n != 0 {
		t.Fatalf("the tool ran %d times after a press from another group", n)
	}
	consents, err := e.openStore().Consents.ListConsents(context.Background(), audit.ConsentFilter{})
	if err != nil || len(consents) != 0 {
		t.Fatalf("consents after a press from another group = %+v, %v; want none", consents, err)
	}

	e.tg.Press(groupA, user(9), q.ID, pressData(t, q, "approve"))
	e.waitBotText(groupA.ID, "the approved result", contains("tool said: [user7] in A"))
	// B's own question is answered in B by its asker, so its turn ends before shutdown.
	var qB tgkit.Message
	wait.For(t, "the question in B", func() bool {
		for _, m := range e.tg.BotMessages(groupB.ID) {
			if strings.Contains(m.Text, "echo (MCP server kit)") && m.ReplyMarkup != "" {
				qB = m
				return true
			}
		}
		return false
	})
	e.tg.Press(groupB, user(12), qB.ID, pressData(t, qB, "deny"))
	e.waitBotText(groupB.ID, "B's denial", contains("tool said: err: denied by user12"))
}
