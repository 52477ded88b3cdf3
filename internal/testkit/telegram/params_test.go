package telegram

import (
	"net/url"
	"strconv"
	"strings"
	"testing"
)

// TestPaidBroadcastIsRefusedWhereTheBotAPIDoesNotTakeIt: allow_paid_broadcast is a parameter of
// the methods that send a message; editMessageText and sendMessageDraft refuse it, as any
// parameter they do not document, and such a request draws on no budget.
func TestPaidBroadcastIsRefusedWhereTheBotAPIDoesNotTakeIt(t *testing.T) {
	s, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tok := s.Token()
	s.Send(Inbound{Chat: Chat{ID: 31}, From: User{ID: 31, FirstName: "U"}, Text: "hi"})
	sent := post(t, s, tok, "sendMessage", url.Values{"chat_id": {"31"}, "text": {"one"}, "allow_paid_broadcast": {"true"}})
	if !sent.OK {
		t.Fatalf("sendMessage with allow_paid_broadcast refused: %+v", sent)
	}
	msgID := "1"
	if m := s.BotMessages(31); len(m) == 1 {
		msgID = strconv.Itoa(m[0].ID)
	}
	tests := []struct {
		name    string
		method  string
		form    url.Values
		refused string // "" when the call must pass
	}{
		{"an edit as documented", "editMessageText", url.Values{"chat_id": {"31"}, "message_id": {msgID}, "text": {"two"},
			"link_preview_options": {`{"is_disabled":true}`}, "disable_web_page_preview": {"true"}}, ""},
		{"an edit marked as paid", "editMessageText", url.Values{"chat_id": {"31"}, "message_id": {msgID}, "text": {"three"},
			"allow_paid_broadcast": {"true"}}, "allow_paid_broadcast"},
		{"an edit naming a topic", "editMessageText", url.Values{"chat_id": {"31"}, "message_id": {msgID}, "text": {"four"},
			"message_thread_id": {"5"}}, "message_thread_id"},
		{"a draft as documented", "sendMessageDraft", url.Values{"chat_id": {"31"}, "draft_id": {"7"}, "text": {"thinking"},
			"can_stop": {"true"}, "keep_on_stop": {"true"}}, ""},
		{"a draft marked as paid", "sendMessageDraft", url.Values{"chat_id": {"31"}, "draft_id": {"7"}, "text": {"more"},
			"allow_paid_broadcast": {"true"}}, "allow_paid_broadcast"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := post(t, s, tok, tt.method, tt.form)
			switch {
			case tt.refused == "" && !a.OK:
				t.Fatalf("%s refused: %+v", tt.method, a)
			case tt.refused != "" && (a.OK || a.ErrorCode != 400 || !strings.Contains(a.Description, tt.refused)):
				t.Fatalf("%s with %s: %+v, want 400 naming the parameter", tt.method, tt.refused, a)
			}
		})
	}
	if got := s.BotMessages(31)[0].Text; got != "two" {
		t.Errorf("the message shows %q, want %q: a refused edit was applied", got, "two")
	}
}
