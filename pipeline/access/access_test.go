package access

import (
	"testing"

	"relaybot/adapters"
	"relaybot/chat"
)

func inbound(platform chat.Platform, kind adapters.ChatKind, chatID, thread, user string) adapters.Inbound {
	return adapters.Inbound{Chat: chat.Ref{Platform: platform, ChatID: chatID, ThreadID: thread}, Kind: kind, UserID: user}
}

func TestAccess(t *testing.T) {
	tg := func(chatID, user string) adapters.Inbound {
		return inbound(chat.Telegram, adapters.Group, chatID, "", user)
	}
	tests := []struct {
		name   string
		access Lists
		in     adapters.Inbound
		want   bool
	}{
		{"empty lists allow all", Lists{}, tg("1", "2"), true},
		{"denied user", Lists{DenyUsers: []string{"telegram:2"}}, tg("1", "2"), false},
		{"denied user on any platform", Lists{DenyUsers: []string{"*:2"}}, tg("1", "2"), false},
		{"deny on another platform does not apply", Lists{DenyUsers: []string{"discord:2"}}, tg("1", "2"), true},
		{"denied chat", Lists{DenyChats: []string{"telegram:1"}}, tg("1", "2"), false},
		{"allow list misses user", Lists{AllowUsers: []string{"telegram:3"}}, tg("1", "2"), false},
		{"allow list has user", Lists{AllowUsers: []string{"telegram:2"}}, tg("1", "2"), true},
		{"allowed user in a chat not allowed", Lists{AllowUsers: []string{"telegram:2"}, AllowChats: []string{"telegram:9"}}, tg("1", "2"), false},
		{"allowed chat", Lists{AllowChats: []string{"*:1"}}, tg("1", "2"), true},
		{"admin passes allow lists", Lists{AllowUsers: []string{"telegram:3"}, Admins: []string{"telegram:2"}}, tg("1", "2"), true},
		{"deny beats admin", Lists{DenyUsers: []string{"telegram:2"}, Admins: []string{"telegram:2"}}, tg("1", "2"), false},
		// The platform is a name, not case-sensitive, and blanks around either part are not part of
		// it: a deny entry an admin wrote "Telegram: 2" must not silently let the user through.
		{"deny entry with a capitalised platform", Lists{DenyUsers: []string{"Telegram:2"}}, tg("1", "2"), false},
		{"deny entry with blanks", Lists{DenyUsers: []string{"telegram: 2 "}}, tg("1", "2"), false},
		{"deny chat entry with a capitalised platform", Lists{DenyChats: []string{"TELEGRAM:1"}}, tg("1", "2"), false},
		{"admin entry with a capitalised platform", Lists{AllowUsers: []string{"telegram:3"}, Admins: []string{"Telegram:2"}}, tg("1", "2"), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, why := Compile(tt.access).Allowed(tt.in)
			if got != tt.want {
				t.Errorf("allowed = %v (%s), want %v", got, why, tt.want)
			}
			if !got && why == "" {
				t.Error("a refusal must say why")
			}
		})
	}
}
