package store

import (
	"context"
	"slices"
	"testing"
	"time"

	"relaybot/audit"
	"relaybot/chat"
)

// TestLatestTurnsAcrossChatsAndThreads: the turns list names each turn's chat and thread, pages
// newest first, and filters by platform, chat and thread; the audit log and the usage sums filter
// by thread through the conversation, on both databases.
func TestLatestTurnsAcrossChatsAndThreads(t *testing.T) {
	forEachDriver(t, func(t *testing.T, driver string) {
		ctx := context.Background()
		s := newStore(t, driver)
		refs := []chat.Ref{{Platform: chat.Telegram, ChatID: "-100", ThreadID: "7"}, {Platform: chat.Telegram, ChatID: "-100", ThreadID: "8"},
			{Platform: chat.Web, ChatID: "abc"}}
		var ids []int64
		for i, ref := range refs {
			c, err := s.Conversations.Conversation(ctx, chat.Key{Platform: ref.Platform, ChatID: ref.ChatID, ThreadID: ref.ThreadID})
			if err != nil {
				t.Fatal(err)
			}
			id, err := s.Turns.StartTurn(ctx, TurnStart{ConversationID: c.ID, UserID: "u", UserMessage: chat.Message{Content: "q"}})
			if err != nil {
				t.Fatal(err)
			}
			now := time.Now()
			if err := s.Turns.FinishTurn(ctx, TurnEnd{TurnID: id, Status: TurnOK, LLMCalls: []chat.ModelCall{
				{Model: "m", Status: chat.StatusOK, TokensIn: 10 << i, StartedAt: now}}}); err != nil {
				t.Fatal(err)
			}
			rec := audit.Record{TurnID: id, ConversationID: c.ID, Platform: string(ref.Platform), ChatID: ref.ChatID,
				ToolName: "t" + ref.ThreadID, StartedAt: now}
			if err := s.ToolCalls.StartToolCall(ctx, &rec); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		list := func(f TurnFilter, before int64, limit int) []int64 {
			t.Helper()
			turns, err := s.Turns.LatestTurns(ctx, f, before, limit)
			if err != nil {
				t.Fatal(err)
			}
			var out []int64
			for _, lt := range turns {
				out = append(out, lt.ID)
				if want := refs[slices.Index(ids, lt.ID)]; lt.Chat != want {
					t.Errorf("turn %d is listed in %s, want %s", lt.ID, lt.Chat, want)
				}
			}
			return out
		}
		for _, tc := range []struct {
			name   string
			f      TurnFilter
			before int64
			limit  int
			want   []int64
		}{
			{"all", TurnFilter{}, 0, 0, []int64{ids[2], ids[1], ids[0]}},
			{"a page", TurnFilter{}, ids[2], 1, []int64{ids[1]}},
			{"a platform", TurnFilter{Chat: chat.Ref{Platform: chat.Telegram}}, 0, 0, []int64{ids[1], ids[0]}},
			{"a chat's threads", TurnFilter{Chat: chat.Ref{Platform: chat.Telegram, ChatID: "-100"}}, 0, 0, []int64{ids[1], ids[0]}},
			{"a thread", TurnFilter{Chat: refs[0]}, 0, 0, []int64{ids[0]}},
			{"a bare id", TurnFilter{Chat: chat.Ref{ChatID: "abc"}}, 0, 0, []int64{ids[2]}},
			{"a status", TurnFilter{Status: TurnError}, 0, 0, nil},
		} {
			if got := list(tc.f, tc.before, tc.limit); !slices.Equal(got, tc.want) {
				t.Errorf("%s: LatestTurns = %v, want %v", tc.name, got, tc.want)
			}
		}
		calls, _, err := s.ToolCalls.ToolCalls(ctx, audit.Filter{Platform: "telegram", ChatID: "-100", ThreadID: "8"})
		if err != nil || len(calls) != 1 || calls[0].ToolName != "t8" {
			t.Errorf("tool calls of thread 8 = %+v, %v; want t8 only", calls, err)
		}
		rows, err := s.Usage.Usage(ctx, UsageFilter{Platform: "telegram", ChatID: "-100", ThreadID: "7"})
		if err != nil || len(rows) != 1 || rows[0].TokensIn != 10 {
			t.Errorf("usage of thread 7 = %+v, %v; want its 10 tokens", rows, err)
		}
	})
}
