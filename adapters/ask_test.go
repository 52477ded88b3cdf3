package adapters

import (
	"context"
	"relaybot/chat"
	"testing"
)

func approveOnly(a Answer) (bool, string) {
	if a.UserID != "admin" {
		return false, "Only an admin may answer."
	}
	return true, "Approved by " + a.UserID
}

var yesNo = Question{Text: "Run fetch_url?", Choices: []Choice{{ID: "approve", Label: "Approve"}, {ID: "deny", Label: "Deny"}}}

// A press that reaches the bot before the platform answered the post is taken: the question is
// open from before it is posted, and the pressed message becomes its message.
func TestAPressBeforeThePostIsAnsweredCounts(t *testing.T) {
	var qs Questions
	id, oq := qs.Open(chat.Ref{Platform: chat.Telegram, ChatID: "5"}, yesNo, approveOnly)
	if got, accepted, _ := qs.Press(id, "approve", "77", Answer{UserID: "admin"}); got == nil || !accepted {
		t.Fatalf("a press before the post's answer was refused")
	}
	qs.Posted(oq, "77")
	ans, closed, err := qs.Wait(context.Background(), id, oq)
	if err != nil || closed || ans.Choice != "approve" || ans.UserID != "admin" {
		t.Fatalf("Wait = %+v closed=%v err=%v, want admin's approval", ans, closed, err)
	}
	if qs.MessageOf(oq) != "77" {
		t.Errorf("message id = %q, want the pressed message 77", qs.MessageOf(oq))
	}
}

func TestPressesAreRefusedOrClosedAsTheUserWouldSee(t *testing.T) {
	for _, tc := range []struct {
		name         string
		choice, user string
		cancelFirst  bool
		wantOpen     bool
		wantAccepted bool
		wantText     string
	}{
		{"a bystander is told why", "approve", "bob", false, true, false, "Only an admin may answer."},
		{"a choice the question lacks is closed", "always", "admin", false, false, false, ""},
		{"a press after the question closed", "approve", "admin", true, false, false, ""},
		{"the admin settles it", "deny", "admin", false, true, true, "Approved by admin"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var qs Questions
			id, oq := qs.Open(chat.Ref{Platform: chat.Discord, ChatID: "9"}, yesNo, approveOnly)
			qs.Posted(oq, "m1")
			if tc.cancelFirst {
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				if _, closed, err := qs.Wait(ctx, id, oq); !closed || err == nil {
					t.Fatalf("Wait after the end of the turn: closed=%v err=%v, want closed with the context's error", closed, err)
				}
			}
			got, accepted, text := qs.Press(id, tc.choice, "m1", Answer{UserID: tc.user})
			if (got != nil) != tc.wantOpen || accepted != tc.wantAccepted || text != tc.wantText {
				t.Fatalf("Press = open %v, accepted %v, %q; want open %v, accepted %v, %q", got != nil, accepted, text, tc.wantOpen, tc.wantAccepted, tc.wantText)
			}
		})
	}
}
