package adapters

import (
	"slices"
	"testing"

	"relaybot/chat"
)

func TestRuleChatsNameTheThreadItsChatAndItsParent(t *testing.T) {
	tests := []struct {
		name string
		in   Inbound
		want []string
	}{
		{"plain chat", Inbound{Chat: chat.Ref{Platform: chat.Telegram, ChatID: "-100"}}, []string{"telegram:-100"}},
		{"telegram forum topic", Inbound{Chat: chat.Ref{Platform: chat.Telegram, ChatID: "-100", ThreadID: "7"}},
			[]string{"telegram:-100#7", "telegram:-100"}},
		{"discord thread", Inbound{Chat: chat.Ref{Platform: chat.Discord, ChatID: "3"}, ParentChatID: "1"},
			[]string{"discord:3", "discord:1"}},
	}
	for _, tc := range tests {
		var got []string
		for _, r := range tc.in.RuleChats() {
			got = append(got, r.String())
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: rule chats %v, want %v", tc.name, got, tc.want)
		}
	}
}
