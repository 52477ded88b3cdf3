package history

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

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

// benchRound is a stored round: a question, a tool call with a result of result characters when
// result > 0, and an answer.
func benchRound(id int64, user string, result int) store.Round {
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

// The history's window only grows while it fits: rounds are appended, older tool results stay as
// they were sent. When it passes its room, a block of the oldest rounds is left out at once (down
// to half the room) and older tool results are elided then; from one turn to the next the rounds
// sent before are sent again byte for byte, except at those cuts.
func TestTheHistorysWindowMovesInBlocksAndElidesToolResultsOnce(t *testing.T) {
	h := &History{Key: chat.Key{Platform: chat.Telegram, ChatID: "1", UserID: "1"}}
	const room, share = 3000, 0.25
	var prev []chat.Message
	cuts := 0
	for i := range 80 {
		result := 0
		if i%2 == 1 {
			result = 1500
		}
		h.Rounds = append(h.Rounds, benchRound(int64(i+1), fmt.Sprint("question ", i), result))
		cs := h.costs(1)
		w := replay(cs, room, share)
		sel := h.sendWindow(cs, w, room)
		if sel.tokens > room {
			t.Fatalf("turn %d: %d tokens sent for a room of %d", i, sel.tokens, room)
		}
		if last := sel.messages[len(sel.messages)-1]; last.Content != "answer "+fmt.Sprint("question ", i) {
			t.Fatalf("turn %d: the newest round is not sent last: %+v", i, last)
		}
		if sel.messages[0].Role != chat.RoleUser {
			t.Fatalf("turn %d: the history does not start with a user message: %+v", i, sel.messages[0])
		}
		if prev != nil {
			if isPrefix(prev, sel.messages) {
				// Appended to what the turn before sent.
			} else {
				cuts++
				if sel.tokens > room*3/4 {
					t.Errorf("turn %d: a cut left %d tokens of %d: rounds are to be left out in a block, not one by one", i, sel.tokens, room)
				}
			}
		}
		prev = sel.messages
	}
	if cuts == 0 || cuts > 20 {
		t.Fatalf("%d cuts in 80 turns, want a few blocks", cuts)
	}
}

// isPrefix reports that a is b's beginning, message for message.
func isPrefix(a, b []chat.Message) bool {
	if len(a) > len(b) {
		return false
	}
	for i := range a {
		if a[i].Content != b[i].Content || a[i].Role != b[i].Role || a[i].ToolCallID != b[i].ToolCallID {
			return false
		}
	}
	return true
}

// A tool result elided at a cut stays elided at the next; one kept whole stays whole until a cut.
func TestAnElidedToolResultNeverComesBack(t *testing.T) {
	h := &History{Key: chat.Key{Platform: chat.Telegram, ChatID: "1", UserID: "1"}}
	state := map[string]bool{} // tool call id → elided
	for i := range 60 {
		h.Rounds = append(h.Rounds, benchRound(int64(i+1), fmt.Sprint("q", i), 1200))
		cs := h.costs(1)
		sel := h.sendWindow(cs, replay(cs, 4000, 0.2), 4000)
		for _, m := range sel.messages {
			if m.Role != chat.RoleTool {
				continue
			}
			elided := strings.HasPrefix(m.Content, "[earlier result of page")
			if was, seen := state[m.ToolCallID]; seen && was && !elided {
				t.Fatalf("turn %d: the result of %s came back whole after it was elided", i, m.ToolCallID)
			}
			state[m.ToolCallID] = elided
		}
	}
	elided := 0
	for _, e := range state {
		if e {
			elided++
		}
	}
	if elided == 0 {
		t.Fatal("no tool result was ever elided")
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

// The system prompt puts what changes least first, so that a provider's cache serves it: the
// configured prompt and the extra text, then the summary, then the date.
func TestTheSystemPromptsStablePartComesFirst(t *testing.T) {
	st := &memConversations{}
	day := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	k, err := New(nil, Store{Conversations: st, Messages: st}, Options{SystemPrompt: "You help.", SystemPromptExtra: func() string { return "Skills: none." }}, nil, func() time.Time { return day })
	if err != nil {
		t.Fatal(err)
	}
	got := k.systemMessage(store.Conversation{Summary: "They met."}).Content
	parts := []string{"You help.", "Skills: none.", "They met.", "Current date: 2026-12-07"}
	at := 0
	for _, p := range parts {
		i := strings.Index(got[at:], p)
		if i < 0 {
			t.Fatalf("system prompt %q: %q missing or out of order; want %q in this order", got, p, parts)
		}
		at += i + len(p)
	}
}

// With compaction, reaching the rounds cap summarises the older half at once, instead of the
// oldest round falling off the front every turn.
func TestTheRoundsCapSummarisesABlock(t *testing.T) {
	st := &memConversations{conv: store.Conversation{ID: 1}}
	for i := range 10 {
		st.rounds = append(st.rounds, benchRound(int64(i+1), fmt.Sprint("q", i), 0))
	}
	sum := &summariser{cache: &prefixCache{}, words: 10}
	k, err := New(sum, Store{Conversations: st, Messages: st}, Options{Rounds: 10}, []ModelBudget{{Name: "m", ContextWindow: 100_000, MaxOutputTokens: 1000}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	h, err := k.Read(t.Context(), chat.Key{Platform: chat.Telegram, ChatID: "1", UserID: "1"})
	if err != nil {
		t.Fatal(err)
	}
	k.Transcript(t.Context(), h, adapters.Inbound{Text: "next"}, nil, false, log)
	if !h.Compacted || len(h.Rounds) != 5 || st.conv.SummaryTurnID != 5 {
		t.Fatalf("compacted %v, %d rounds kept, summary through turn %d; want the older 5 summarised", h.Compacted, len(h.Rounds), st.conv.SummaryTurnID)
	}
}
