package store

import (
	"context"
	"errors"
	"fmt"
	"relaybot/chat"
	"slices"
	"testing"
)

func TestConversationChoicesSummaryAndRetryAreStored(t *testing.T) {
	forEachDriver(t, func(t *testing.T, driver string) {
		ctx := context.Background()
		s := newStore(t, driver)
		key := chat.Key{Platform: "web", ChatID: "c"}
		c, err := s.Conversations.Conversation(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Turns.RetryLastTurn(ctx, c.ID, ""); !errors.Is(err, ErrNothingToRetry) {
			t.Fatalf("retry in an empty conversation: %v, want ErrNothingToRetry", err)
		}
		var ids []int64
		for i := range 5 {
			id, err := s.Turns.StartTurn(ctx, TurnStart{ConversationID: c.ID, UserMessage: chat.Message{Role: RoleUser, Content: fmt.Sprint("q", i)}})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Turns.FinishTurn(ctx, TurnEnd{TurnID: id, Status: TurnOK, Messages: []chat.Message{
				{Role: RoleAssistant, Content: "look", ToolCalls: []chat.ToolCall{call(fmt.Sprint("c", i))}},
				{Role: RoleTool, ToolCallID: fmt.Sprint("c", i), Content: "result"},
				{Role: RoleAssistant, Content: fmt.Sprint("a", i)},
			}}); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		if err := s.Conversations.SetConversationModel(ctx, c.ID, "fast"); err != nil {
			t.Fatal(err)
		}
		if err := s.Conversations.SetConversationSystemPrompt(ctx, c.ID, "Answer in French."); err != nil {
			t.Fatal(err)
		}
		if err := s.Conversations.SaveSummary(ctx, c.ID, "They asked q0 and q1.", ids[1]); err != nil {
			t.Fatal(err)
		}
		if err := s.Conversations.SaveSummary(ctx, c.ID, "an older summary", ids[0]); err != nil {
			t.Fatal(err)
		}
		got, err := s.Conversations.Conversation(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if got.Model != "fast" || got.SystemPrompt != "Answer in French." || got.Summary != "They asked q0 and q1." || got.SummaryTurnID != ids[1] {
			t.Fatalf("conversation after the choices: %+v", got)
		}

		user, err := s.Turns.RetryLastTurn(ctx, c.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		if user.Message.Content != "q4" {
			t.Errorf("retry returned %q, want the last user message q4", user.Message.Content)
		}
		rounds, err := s.Messages.Rounds(ctx, c.ID, got.SummaryTurnID, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(rounds) != 2 || rounds[0].TurnID != ids[2] || rounds[1].TurnID != ids[3] {
			t.Fatalf("rounds after the summary, without the retried one: %+v", rounds)
		}
		if m := rounds[0].Messages; len(m) != 4 || m[0].Content != "q2" || m[3].Content != "a2" {
			t.Errorf("round messages: %+v", m)
		}
		hist, err := s.Messages.History(ctx, c.ID, 10)
		if err != nil {
			t.Fatal(err)
		}
		if last := hist[len(hist)-1]; last.Content != "a3" {
			t.Errorf("history ends with %q, want a3: the retried turn left it", last.Content)
		}
		fresh, err := s.Conversations.ResetConversation(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if fresh.ID == c.ID || fresh.Model != "fast" || fresh.SystemPrompt != "Answer in French." || fresh.Summary != "" {
			t.Errorf("after a reset: %+v, want a new conversation with the chat's choices and no summary", fresh)
		}
		if again, err := s.Conversations.Conversation(ctx, key); err != nil || again.Model != "fast" {
			t.Errorf("the reset conversation read back: %+v, %v", again, err)
		}
		newest, err := s.Messages.Rounds(ctx, c.ID, 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(newest) != 1 || newest[0].TurnID != ids[3] {
			t.Errorf("the newest round: %+v", newest)
		}
	})
}

func TestWebSessionsAndTheConversationsOfAChat(t *testing.T) {
	forEachDriver(t, func(t *testing.T, driver string) {
		ctx := context.Background()
		s := newStore(t, driver)
		if _, ok, err := s.WebChat.WebSession(ctx, "h1"); err != nil || ok {
			t.Fatalf("unknown session: %v, %v", ok, err)
		}
		for range 2 {
			if err := s.WebChat.SaveWebSession(ctx, "h1", "chat1"); err != nil {
				t.Fatal(err)
			}
		}
		if id, ok, err := s.WebChat.WebSession(ctx, "h1"); err != nil || !ok || id != "chat1" {
			t.Fatalf("session h1: %q, %v, %v", id, ok, err)
		}
		key := chat.Key{Platform: "web", ChatID: "chat1", UserID: "chat1"}
		c1, err := s.Conversations.Conversation(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		id, err := s.Turns.StartTurn(ctx, TurnStart{ConversationID: c1.ID, UserMessage: chat.Message{Role: RoleUser, Content: "hello there"}})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Turns.FinishTurn(ctx, TurnEnd{TurnID: id, Status: TurnOK}); err != nil {
			t.Fatal(err)
		}
		c2, err := s.Conversations.ResetConversation(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Conversations.Conversation(ctx, chat.Key{Platform: "web", ChatID: "other"}); err != nil {
			t.Fatal(err)
		}
		list, err := s.WebChat.ChatConversations(ctx, chat.Ref{Platform: "web", ChatID: "chat1"}, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 2 || list[0].ID != c2.ID || !list[0].Active || list[1].ID != c1.ID || list[1].Active ||
			list[1].Preview != "hello there" || list[1].Turns != 1 || list[0].Turns != 0 {
			t.Errorf("conversations of chat1: %+v", list)
		}
	})
}

func TestATurnTheModelDidNotAnswerLeavesTheHistoryButNotTheAuditTrail(t *testing.T) {
	forEachDriver(t, func(t *testing.T, driver string) {
		ctx := context.Background()
		s := newStore(t, driver)
		c, err := s.Conversations.Conversation(ctx, chat.Key{Platform: "web", ChatID: "c"})
		if err != nil {
			t.Fatal(err)
		}
		turn := func(user string, end TurnEnd) int64 {
			t.Helper()
			id, err := s.Turns.StartTurn(ctx, TurnStart{ConversationID: c.ID, UserID: "u", UserMessage: chat.Message{Role: RoleUser, Content: user}})
			if err != nil {
				t.Fatal(err)
			}
			end.TurnID = id
			if err := s.Turns.FinishTurn(ctx, end); err != nil {
				t.Fatal(err)
			}
			return id
		}
		turn("hello", TurnEnd{Status: TurnOK, Messages: []chat.Message{{Role: RoleAssistant, Content: "hi"}}})
		refused := turn("forbidden words", TurnEnd{Status: TurnError, Failure: chat.FailureRefused,
			Error: "the model rejected the request as invalid: content_policy_violation"})
		turn("delivery failed", TurnEnd{Status: TurnError, Error: "delivery failed: 400",
			Messages: []chat.Message{{Role: RoleAssistant, Content: "an answer the platform refused"}}})

		rounds, err := s.Messages.Rounds(ctx, c.ID, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		hist, err := s.Messages.History(ctx, c.ID, 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rounds {
			if r.TurnID == refused {
				t.Errorf("Rounds holds the refused turn %d: its message would be sent to the model again", refused)
			}
		}
		if len(rounds) != 2 || len(hist) != 4 {
			t.Errorf("%d rounds, %d history messages, want 2 and 4 (the answered turns, the delivery failure kept): %+v", len(rounds), len(hist), hist)
		}
		got, err := s.Turns.Turn(ctx, refused)
		if err != nil {
			t.Fatal(err)
		}
		if got.Failure != chat.FailureRefused || got.Status != TurnError || got.Error == "" {
			t.Errorf("the refused turn reads back as %+v: the audit trail lost why it was not answered", got)
		}
		msgs, err := s.Messages.TurnMessages(ctx, refused)
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) != 1 || msgs[0].Content != "forbidden words" {
			t.Errorf("the refused turn's messages = %+v, want its user message kept", msgs)
		}
		lines, err := s.WebChat.Transcript(ctx, c.ID, 10)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(lines, func(l chat.Line) bool { return l.FromUser && l.Text == "forbidden words" }) {
			t.Errorf("the web chat's transcript lost the message the user sent and saw fail: %+v", lines)
		}
	})
}
