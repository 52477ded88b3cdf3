package store

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"relaybot/chat"
)

// What the web chat keeps comes back as kept: a line written again replaces the one before (its
// text, state and place), lines come back in the order of their place, the newest limit of them,
// files with their bytes; another chat's lines stay its own; retention deletes the old ones.
func TestWebChatMessagesAreKeptAsShownAndSweptWithTheirAge(t *testing.T) {
	forEachDriver(t, func(t *testing.T, driver string) {
		ctx := context.Background()
		s := newStore(t, driver)
		old := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
		now := time.Now().UnixMicro()
		keep := func(chatID string, lines ...chat.Line) {
			t.Helper()
			if err := s.WebChat.KeepWebMessages(ctx, chatID, lines); err != nil {
				t.Fatal(err)
			}
		}
		keep("c1",
			chat.Line{ID: "m1", Pos: old, FromUser: true, Text: "hello\n📎 a.txt"},
			chat.Line{ID: "m2", Pos: now, Text: "Run echo?", Question: true, Asking: true},
			chat.Line{ID: "m3", Pos: now + 1, Text: "⏳ echo"},
		)
		keep("c2", chat.Line{ID: "m1", Pos: now, FromUser: true, Text: "another chat"})
		// The question is answered; the streaming reply is final and goes below it.
		keep("c1",
			chat.Line{ID: "m2", Pos: now, Text: "Run echo?\n\nApproved.", Question: true},
			chat.Line{ID: "m3", Pos: now + 2, Text: "tool said: hi"},
			chat.Line{ID: "m4", Pos: now + 3, Files: []chat.File{{Name: "dot.png", MIME: "image/png", Data: []byte{0x89, 'P', 0}}}},
		)
		got, err := s.WebChat.WebMessages(ctx, "c1", 0)
		if err != nil {
			t.Fatal(err)
		}
		want := []chat.Line{
			{ID: "m1", Pos: old, FromUser: true, Text: "hello\n📎 a.txt"},
			{ID: "m2", Pos: now, Text: "Run echo?\n\nApproved.", Question: true},
			{ID: "m3", Pos: now + 2, Text: "tool said: hi"},
			{ID: "m4", Pos: now + 3, Files: []chat.File{{Name: "dot.png", MIME: "image/png", Data: []byte{0x89, 'P', 0}}}},
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("kept lines:\n%+v\nwant:\n%+v", got, want)
		}
		if newest, err := s.WebChat.WebMessages(ctx, "c1", 2); err != nil || len(newest) != 2 || newest[0].ID != "m3" || newest[1].ID != "m4" {
			t.Fatalf("the newest two: %+v, %v", newest, err)
		}
		if _, err := s.Retention.Sweep(ctx, time.UnixMicro(old+1)); err != nil {
			t.Fatal(err)
		}
		if left, err := s.WebChat.WebMessages(ctx, "c1", 0); err != nil || len(left) != 3 || left[0].ID != "m2" {
			t.Fatalf("after the sweep: %+v, %v; want the old message gone", left, err)
		}
		if other, err := s.WebChat.WebMessages(ctx, "c2", 0); err != nil || len(other) != 1 || other[0].Text != "another chat" {
			t.Fatalf("the other chat: %+v, %v", other, err)
		}
	})
}

// An earlier conversation of a web chat reads back as the page showed it: from the message that
// started its first turn up to the one that started the next conversation's, commands and
// their answers in between included; a conversation of which nothing was kept has none.
func TestAWebChatConversationReadsBackWhatThePageShowed(t *testing.T) {
	forEachDriver(t, func(t *testing.T, driver string) {
		ctx := context.Background()
		s := newStore(t, driver)
		key := chat.Key{Platform: chat.Web, ChatID: "c1", UserID: "c1"}
		turn := func(inbound string) int64 {
			t.Helper()
			conv, err := s.Conversations.Conversation(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Turns.StartTurn(ctx, TurnStart{ConversationID: conv.ID, InboundMessageID: inbound,
				UserMessage: chat.Message{Role: RoleUser, Content: inbound}}); err != nil {
				t.Fatal(err)
			}
			return conv.ID
		}
		pos := time.Now().UnixMicro()
		var lines []chat.Line
		for i, text := range []string{"hello", "Hi!", "/reset", "Started a new conversation.", "again", "Hi again!"} {
			lines = append(lines, chat.Line{ID: fmt.Sprintf("m%d", i+1), Pos: pos + int64(i), FromUser: i%2 == 0, Text: text})
		}
		if err := s.WebChat.KeepWebMessages(ctx, "c1", lines); err != nil {
			t.Fatal(err)
		}
		first := turn("m1")
		if _, err := s.Conversations.ResetConversation(ctx, key); err != nil {
			t.Fatal(err)
		}
		second := turn("m5")
		texts := func(id int64) []string {
			t.Helper()
			got, err := s.WebChat.WebConversationMessages(ctx, "c1", id, 0)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, l := range got {
				out = append(out, l.Text)
			}
			return out
		}
		if got, want := texts(first), []string{"hello", "Hi!", "/reset", "Started a new conversation."}; !reflect.DeepEqual(got, want) {
			t.Errorf("the first conversation reads %q, want %q", got, want)
		}
		if got, want := texts(second), []string{"again", "Hi again!"}; !reflect.DeepEqual(got, want) {
			t.Errorf("the second conversation reads %q, want %q", got, want)
		}
		if got := texts(second + 100); got != nil {
			t.Errorf("a conversation with nothing kept reads %q, want nothing", got)
		}
	})
}
