package telegram

import (
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
	"testing"
)

// The server refuses topics as the Bot API does: none in a private chat until the bot has
// topics there (getMe's has_topics_enabled, set by setMySettings), names of 1-128 characters,
// renames of topics that exist, and sends to a topic that does not.
func TestTopicsAreRefusedAsTheBotAPIRefusesThem(t *testing.T) {
	s, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tok := s.Token()
	s.Send(Inbound{Chat: Chat{ID: 42, Type: "private"}, From: User{ID: 42, FirstName: "Ann"}, Text: "hi"})
	v := func(kv ...string) url.Values {
		out := url.Values{}
		for i := 0; i < len(kv); i += 2 {
			out.Set(kv[i], kv[i+1])
		}
		return out
	}
	refused := func(what string, a answer, desc string) {
		t.Helper()
		if a.OK || a.ErrorCode != 400 || !strings.Contains(a.Description, desc) {
			t.Errorf("%s: %+v, want 400 %q", what, a, desc)
		}
	}
	var me struct {
		HasTopicsEnabled bool `json:"has_topics_enabled"`
	}
	_ = json.Unmarshal(post(t, s, tok, "getMe", nil).Result, &me)
	if me.HasTopicsEnabled {
		t.Fatal("getMe says the bot has topics in private chats before any were turned on")
	}
	refused("a topic in a private chat without topics", post(t, s, tok, "createForumTopic", v("chat_id", "42", "name", "q")), "not a forum")
	refused("an unknown setting", post(t, s, tok, "setMySettings", v("has_topics", "true")), "unknown parameter")
	if a := post(t, s, tok, "setMySettings", v("has_topics_enabled", "true")); !a.OK {
		t.Fatalf("setMySettings: %+v", a)
	}
	_ = json.Unmarshal(post(t, s, tok, "getMe", nil).Result, &me)
	if !me.HasTopicsEnabled {
		t.Fatal("getMe does not report the topics setMySettings turned on")
	}
	refused("a name too long", post(t, s, tok, "createForumTopic", v("chat_id", "42", "name", strings.Repeat("é", 129))), "TOPIC_NAME_INVALID")
	refused("no name", post(t, s, tok, "createForumTopic", v("chat_id", "42")), "TOPIC_NAME_INVALID")
	a := post(t, s, tok, "createForumTopic", v("chat_id", "42", "name", strings.Repeat("é", 128)))
	var ft struct {
		ID int `json:"message_thread_id"`
	}
	if err := json.Unmarshal(a.Result, &ft); !a.OK || err != nil || ft.ID == 0 {
		t.Fatalf("createForumTopic: %+v", a)
	}
	id := strconv.Itoa(ft.ID)
	refused("a rename of a topic that does not exist", post(t, s, tok, "editForumTopic", v("chat_id", "42", "message_thread_id", "999", "name", "x")), "TOPIC_ID_INVALID")
	if a := post(t, s, tok, "editForumTopic", v("chat_id", "42", "message_thread_id", id, "name", "Tides")); !a.OK {
		t.Fatalf("editForumTopic: %+v", a)
	}
	if s.Topics(42)[ft.ID] != "Tides" {
		t.Errorf("topics = %v", s.Topics(42))
	}
	refused("a message to a topic that does not exist", post(t, s, tok, "sendMessage", v("chat_id", "42", "message_thread_id", "999", "text", "x")), "message thread not found")
	if a := post(t, s, tok, "sendMessage", v("chat_id", "42", "message_thread_id", id, "text", "x")); !a.OK {
		t.Fatalf("a message in the topic: %+v", a)
	}
	if m := s.BotMessages(42); len(m) != 1 || m[0].ThreadID != ft.ID {
		t.Errorf("bot messages = %+v", m)
	}
}
