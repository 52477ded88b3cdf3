package history

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"relaybot/adapters"
	"relaybot/chat"
	"relaybot/store"
)

func inbound(platform chat.Platform, kind adapters.ChatKind, chatID, thread, user string) adapters.Inbound {
	return adapters.Inbound{Chat: chat.Ref{Platform: platform, ChatID: chatID, ThreadID: thread}, Kind: kind, UserID: user}
}

func TestKeyOf(t *testing.T) {
	tests := []struct {
		name      string
		in        adapters.Inbound
		perMember bool
		want      string
	}{
		{"private chat is the user's", inbound(chat.Telegram, adapters.Private, "42", "", "42"), false, "telegram:42/u:42"},
		{"group shared", inbound(chat.Telegram, adapters.Group, "-100", "", "7"), false, "telegram:-100"},
		{"group per user", inbound(chat.Telegram, adapters.Group, "-100", "", "7"), true, "telegram:-100/u:7"},
		{"forum topic its own", inbound(chat.Telegram, adapters.Group, "-100", "3", "7"), false, "telegram:-100#3"},
		{"discord thread per user", inbound(chat.Discord, adapters.Group, "9", "11", "5"), true, "discord:9#11/u:5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := KeyOf(tt.in, tt.perMember).String(); got != tt.want {
				t.Errorf("KeyOf = %q, want %q", got, tt.want)
			}
		})
	}
	a := KeyOf(inbound(chat.Telegram, adapters.Group, "-100", "", "7"), false)
	b := KeyOf(inbound(chat.Telegram, adapters.Group, "-100", "", "8"), false)
	if a != b {
		t.Errorf("two members of a shared group got different conversations: %v, %v", a, b)
	}
}

func TestConvertKeepsSpeakersToolRoundsAndImageNotes(t *testing.T) {
	hist := []chat.Message{
		{Role: store.RoleUser, Content: "one", Name: "Ann"},
		{Role: store.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: "c1", Name: "t", Arguments: "{}"}}},
		{Role: store.RoleTool, ToolCallID: "c1", Content: "r", Name: "t"},
		{Role: store.RoleAssistant, Content: "a1"},
		{Role: store.RoleUser, Content: "two", Images: make([]chat.Image, 1)},
		{Role: store.RoleAssistant, Content: "a2"},
	}
	msgs := (&History{Key: chat.Key{Platform: chat.Telegram, ChatID: "-100"}}).toAgent(hist)
	if msgs[0].Content != "[Ann] one" {
		t.Errorf("shared conversation: user message = %q, want the speaker's name", msgs[0].Content)
	}
	if len(msgs[1].ToolCalls) != 1 || msgs[2].ToolCallID != "c1" {
		t.Errorf("tool round lost: %+v", msgs[1:3])
	}
	if !strings.Contains(msgs[4].Content, "image") {
		t.Errorf("a message that had an image must say so: %q", msgs[4].Content)
	}
}

func TestHistoryIsChosenNewestFirstInWholeRoundsWithOlderToolResultsElided(t *testing.T) {
	round := func(id int64, user string, result int) store.Round {
		r := store.Round{TurnID: id, Messages: []chat.Message{{Role: store.RoleUser, Content: user}}}
		if result > 0 {
			cid := fmt.Sprint("c", id)
			r.Messages = append(r.Messages,
				chat.Message{Role: store.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: cid, Name: "page", Arguments: "{}"}}},
				chat.Message{Role: store.RoleTool, ToolCallID: cid, Name: "page", Content: strings.Repeat("x", result)})
		}
		r.Messages = append(r.Messages, chat.Message{Role: store.RoleAssistant, Content: "answer " + user})
		return r
	}
	rounds := []store.Round{round(1, "one", 4000), round(2, "two", 0), round(3, "three", 400), round(4, "four", 0)}
	tests := []struct {
		name       string
		limit      int
		share      float64
		wantFrom   int
		wantElided int
	}{
		{"everything fits", 10_000, 1, 0, 0},
		{"the oldest big result elided, all rounds sent", 10_000, 0.05, 0, 1},
		{"both results elided past a tiny share", 10_000, 0.001, 0, 2},
		{"only the newest rounds fit, none cut in half", 150, 1, 2, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sel := (&History{Key: chat.Key{Platform: chat.Telegram, ChatID: "1", UserID: "1"}, Rounds: rounds}).choose(tt.limit, tt.share, 1, false)
			if sel.from != tt.wantFrom || sel.elided != tt.wantElided {
				t.Fatalf("from round %d with %d elided, want %d and %d", sel.from, sel.elided, tt.wantFrom, tt.wantElided)
			}
			if sel.tokens > tt.limit {
				t.Errorf("%d tokens chosen for a limit of %d", sel.tokens, tt.limit)
			}
			if sel.messages[0].Role != "user" || sel.messages[len(sel.messages)-1].Content != "answer four" {
				t.Errorf("history does not run from a user message to the newest answer: %+v", sel.messages)
			}
			for _, m := range sel.messages {
				if m.Role == "tool" && strings.HasPrefix(m.Content, "[earlier result") && !strings.Contains(m.Content, "page") {
					t.Errorf("the elision note does not name the tool: %q", m.Content)
				}
			}
		})
	}
}

func TestProviderFieldsOfAnswersGoBackWithHistory(t *testing.T) {
	sig := `{"extra_content":{"google":{"thought_signature":"CsQBAV"}}}`
	details := `{"reasoning_details":[{"type":"reasoning.encrypted","data":"abc"}]}`
	stored := []chat.Message{
		{Role: store.RoleAssistant, Extra: json.RawMessage(details), Reasoning: "run pwd", ReasoningField: "reasoning_content",
			ToolCalls: []chat.ToolCall{{ID: "c1", Name: "shell", Arguments: "{}", Extra: json.RawMessage(sig)}}},
		{Role: store.RoleTool, ToolCallID: "c1", Name: "shell", Content: "/work"},
		{Role: store.RoleAssistant, Content: "You are in /work."},
	}
	back := (&History{Key: chat.Key{Platform: chat.Telegram, ChatID: "1", UserID: "1"}}).toAgent(stored)
	if string(back[0].Extra) != details || string(back[0].ToolCalls[0].Extra) != sig || back[0].ReasoningField != "reasoning_content" {
		t.Fatalf("history = %+v; the provider's fields must go back as it sent them", back)
	}
	if back[2].Extra != nil {
		t.Errorf("a message without extra fields got %s", back[2].Extra)
	}
}
