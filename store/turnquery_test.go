package store

import (
	"context"
	"errors"
	"reflect"
	"relaybot/chat"
	"testing"
)

func TestTurnMessages(t *testing.T) {
	forEachDriver(t, func(t *testing.T, driver string) {
		ctx := context.Background()
		s := newStore(t, driver)
		c, err := s.Conversations.Conversation(ctx, chat.Key{Platform: "web", ChatID: "tm"})
		if err != nil {
			t.Fatal(err)
		}
		start := func(text string) int64 {
			t.Helper()
			id, err := s.Turns.StartTurn(ctx, TurnStart{ConversationID: c.ID, UserMessage: chat.Message{Content: text, Name: "ann"}})
			if err != nil {
				t.Fatal(err)
			}
			return id
		}
		// An earlier turn of the same conversation must not leak into the one asked for.
		before := start("hello")
		if err := s.Turns.FinishTurn(ctx, TurnEnd{TurnID: before, Status: TurnOK,
			Messages: []chat.Message{{Role: RoleAssistant, Content: "hi"}}}); err != nil {
			t.Fatal(err)
		}
		id := start("weather in Paris and Rome?")
		if got, err := s.Messages.TurnMessages(ctx, id); err != nil || len(got) != 1 || got[0].Content != "weather in Paris and Rome?" {
			t.Fatalf("running turn: messages %+v, %v; want only the user message", got, err)
		}
		added := []chat.Message{
			{Role: RoleAssistant, Reasoning: "two cities", ToolCalls: []chat.ToolCall{
				{ID: "c1", Name: "weather", Arguments: `{"city":"Paris"}`},
				{ID: "c2", Name: "weather", Arguments: `{"city":"Rome"}`}}},
			{Role: RoleTool, ToolCallID: "c1", Name: "weather", Content: "sunny"},
			// c2 never answered (the turn was cut): kept, unlike History.
			{Role: RoleAssistant, Content: "Paris is sunny; Rome did not answer."},
		}
		if err := s.Turns.FinishTurn(ctx, TurnEnd{TurnID: id, Status: TurnOK, Messages: added}); err != nil {
			t.Fatal(err)
		}
		got, err := s.Messages.TurnMessages(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		want := append([]chat.Message{{Role: RoleUser, Content: "weather in Paris and Rome?", Name: "ann"}}, added...)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("TurnMessages =\n%+v\nwant\n%+v", got, want)
		}
		if _, err := s.Messages.TurnMessages(ctx, id+100); !errors.Is(err, ErrNotFound) {
			t.Errorf("missing turn: err = %v, want ErrNotFound", err)
		}
	})
}
