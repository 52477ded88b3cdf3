package telegram

import (
	"slices"
	"testing"

	tk "relaybot/internal/testkit/telegram"
	"relaybot/internal/testkit/wait"
)

// A private chat is a chat: with allowed_chats set, it is answered when its id is listed or its
// user is in [access] allow_users or admins (AccessUsers); those users get no pass in groups.
func TestAllowedChatsRuleForPrivateChats(t *testing.T) {
	carol := tk.User{ID: 42, FirstName: "Carol", Username: "carol"}
	e := newEnv(t, tk.Options{}, func(o *Options) {
		o.AllowedChats = []string{"-100200", "42"}
		o.AccessUsers = []string{"8"}
	})
	col := newCollector()
	stop := startRun(t, e.ad, col)
	defer stop()
	bot := "@" + e.srv.BotUsername()
	other := tk.Chat{ID: -100999, Type: "supergroup", Title: "elsewhere"}
	tests := []struct {
		name string
		in   tk.Inbound
		want bool
	}{
		{"listed group", tk.Inbound{Chat: group, From: ann, Text: bot + " listed group"}, true},
		{"private chat whose id is listed", tk.Inbound{Chat: tk.Chat{ID: 42, Type: "private"}, From: carol, Text: "listed private"}, true},
		{"private chat of a user in [access]", tk.Inbound{Chat: tk.Chat{ID: 8, Type: "private"}, From: bob, Text: "access private"}, true},
		{"private chat neither listed nor in [access]", tk.Inbound{Chat: tk.Chat{ID: 7, Type: "private"}, From: ann, Text: "unlisted private"}, false},
		{"unlisted group, user in [access]", tk.Inbound{Chat: other, From: bob, Text: bot + " unlisted group"}, false},
	}
	var want []string
	for _, tt := range tests {
		e.srv.Send(tt.in)
		if tt.want {
			want = append(want, tt.in.Text)
		}
	}
	for range want {
		col.next(t)
	}
	wait.For(t, "every update taken", func() bool { return e.srv.PendingUpdates() == 0 })
	stop() // returns once every update handed over has been decided
	var got []string
	for _, in := range col.got {
		got = append(got, in.Text)
	}
	for _, tt := range tests {
		text := tt.in.Text
		if tt.in.Chat.Type != "private" {
			text = text[len(bot)+1:]
		}
		if slices.Contains(got, text) != tt.want {
			t.Errorf("%s: answered %v, want %v", tt.name, !tt.want, tt.want)
		}
	}
}

// TestSetAccessChangesWhoIsAnsweredWhileRunning: a reload's allow list (SetAccess) takes effect
// from the next update on, letting in a user it lists and keeping out one it no longer lists.
func TestSetAccessChangesWhoIsAnsweredWhileRunning(t *testing.T) {
	e := newEnv(t, tk.Options{}, func(o *Options) { o.AllowedUsers = []string{"@Ann"} })
	col := newCollector()
	stop := startRun(t, e.ad, col)
	defer stop()
	e.srv.Send(tk.Inbound{Chat: tk.Chat{ID: 8}, From: bob, Text: "bob before"})
	e.srv.Send(tk.Inbound{Chat: tk.Chat{ID: 7}, From: ann, Text: "ann before"})
	col.next(t)
	wait.For(t, "both updates taken", func() bool { return e.srv.PendingUpdates() == 0 })

	e.ad.SetAccess(Access{AllowedUsers: []string{"8"}})
	e.srv.Send(tk.Inbound{Chat: tk.Chat{ID: 7}, From: ann, Text: "ann after"})
	e.srv.Send(tk.Inbound{Chat: tk.Chat{ID: 8}, From: bob, Text: "bob after"})
	col.next(t)
	wait.For(t, "both updates taken", func() bool { return e.srv.PendingUpdates() == 0 })
	stop() // returns once every update handed over has been decided
	var got []string
	for _, in := range col.got {
		got = append(got, in.Text)
	}
	if !slices.Equal(got, []string{"ann before", "bob after"}) {
		t.Fatalf("answered %q, want ann before the change and bob after it", got)
	}
}
