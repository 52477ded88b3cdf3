package store

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"relaybot/audit"
	"relaybot/chat"
)

// convTurn is one turn a transcript test writes: who asked what, and how it ended.
type convTurn struct {
	key      chat.Key
	user     string
	name     string
	ask      string
	answer   string
	status   chat.Status
	failure  chat.Failure
	startsAt time.Time
}

// writeTurns writes turns in order and returns their ids and their conversations' ids.
func writeTurns(t *testing.T, s *Database, turns []convTurn) (ids, convs []int64) {
	t.Helper()
	ctx := context.Background()
	for _, ct := range turns {
		c, err := s.Conversations.Conversation(ctx, ct.key)
		if err != nil {
			t.Fatal(err)
		}
		id, err := s.Turns.StartTurn(ctx, TurnStart{ConversationID: c.ID, UserID: ct.user, UserName: ct.name,
			UserMessage: chat.Message{Role: chat.RoleUser, Content: ct.ask}, StartedAt: ct.startsAt})
		if err != nil {
			t.Fatal(err)
		}
		end := TurnEnd{TurnID: id, Status: ct.status, Failure: ct.failure}
		if ct.answer != "" {
			end.Messages = []chat.Message{
				{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: "c1", Name: "lookup", Arguments: `{"q":"x"}`}}},
				{Role: chat.RoleTool, ToolCallID: "c1", Name: "lookup", Content: "toolresult zebrafish"},
				{Role: chat.RoleAssistant, Content: ct.answer, Reasoning: "thinking quietly"},
			}
		}
		if err := s.Turns.FinishTurn(ctx, end); err != nil {
			t.Fatal(err)
		}
		ids, convs = append(ids, id), append(convs, c.ID)
	}
	return ids, convs
}

// TestConversationsAcrossChatsNewestFirstFilteredAndPagedBothWays: the list names each
// conversation once, the one spoken in last first, filters by platform, chat, thread, person
// (id or name), time and outcome, and pages older and back newer, on both databases.
func TestConversationsAcrossChatsNewestFirstFilteredAndPagedBothWays(t *testing.T) {
	forEachDriver(t, func(t *testing.T, driver string) {
		ctx := context.Background()
		s := newStore(t, driver)
		day := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
		tg := chat.Key{Platform: chat.Telegram, ChatID: "-100", ThreadID: "7"}
		web := chat.Key{Platform: chat.Web, ChatID: "w1"}
		dc := chat.Key{Platform: chat.Discord, ChatID: "55"}
		ids, convs := writeTurns(t, s, []convTurn{
			{key: tg, user: "1", name: "Ann", ask: "first question", answer: "first answer", status: chat.StatusOK, startsAt: day},
			{key: web, user: "w", name: "Web user", ask: "hello web", answer: "hi", status: chat.StatusOK, startsAt: day.Add(time.Hour)},
			{key: dc, user: "9", name: "Bob", ask: "will fail", status: chat.StatusError, failure: chat.FailureUnavailable, startsAt: day.Add(2 * time.Hour)},
			{key: tg, user: "2", name: "Cid", ask: "stop this", status: chat.StatusCancelled, startsAt: day.Add(3 * time.Hour)},
		})
		tgConv, webConv, dcConv := convs[0], convs[1], convs[2]
		list := func(f ConversationFilter, p Paging) Page[ListedConversation] {
			t.Helper()
			page, err := s.Transcripts.Conversations(ctx, f, p)
			if err != nil {
				t.Fatal(err)
			}
			return page
		}
		idsOf := func(p Page[ListedConversation]) []int64 {
			var out []int64
			for _, c := range p.Items {
				out = append(out, c.ID)
			}
			return out
		}
		all := list(ConversationFilter{}, Paging{})
		if got, want := idsOf(all), []int64{tgConv, dcConv, webConv}; !slices.Equal(got, want) {
			t.Fatalf("conversations = %v, want %v (the one spoken in last first)", got, want)
		}
		first := all.Items[0]
		if first.Chat != tg.Ref() || first.Turns != 2 || first.Answered != 1 || first.Stopped != 1 || first.Failed != 0 ||
			first.Opening != "first question" || !slices.Equal(first.People, []string{"Ann", "Cid"}) ||
			first.FirstTurnID != ids[0] || first.LastTurnID != ids[3] || !first.LastAt.Equal(day.Add(3*time.Hour)) {
			t.Errorf("the Telegram thread's conversation is listed as %+v", first)
		}
		for _, tc := range []struct {
			name string
			f    ConversationFilter
			want []int64
		}{
			{"a platform", ConversationFilter{Chat: chat.Ref{Platform: chat.Web}}, []int64{webConv}},
			{"a chat", ConversationFilter{Chat: chat.Ref{Platform: chat.Telegram, ChatID: "-100"}}, []int64{tgConv}},
			{"another thread", ConversationFilter{Chat: chat.Ref{Platform: chat.Telegram, ChatID: "-100", ThreadID: "8"}}, nil},
			{"a person's id", ConversationFilter{Person: "9"}, []int64{dcConv}},
			{"a person's name", ConversationFilter{Person: "Ann"}, []int64{tgConv}},
			{"since", ConversationFilter{Since: day.Add(90 * time.Minute)}, []int64{tgConv, dcConv}},
			{"until", ConversationFilter{Until: day.Add(90 * time.Minute)}, []int64{webConv, tgConv}},
			{"answered", ConversationFilter{Outcome: OutcomeAnswered}, []int64{webConv, tgConv}},
			{"stopped", ConversationFilter{Outcome: OutcomeStopped}, []int64{tgConv}},
			{"failed", ConversationFilter{Outcome: OutcomeFailed}, []int64{dcConv}},
		} {
			if got := idsOf(list(tc.f, Paging{})); !slices.Equal(got, tc.want) {
				t.Errorf("%s: conversations = %v, want %v", tc.name, got, tc.want)
			}
		}
		p1 := list(ConversationFilter{}, Paging{Limit: 1})
		if got := idsOf(p1); !slices.Equal(got, []int64{tgConv}) || p1.Older == 0 || p1.Newer != 0 {
			t.Fatalf("first page = %v (older %d, newer %d), want the Telegram one and an older page only", got, p1.Older, p1.Newer)
		}
		p2 := list(ConversationFilter{}, Paging{Before: p1.Older, Limit: 1})
		if got := idsOf(p2); !slices.Equal(got, []int64{dcConv}) || p2.Older == 0 || p2.Newer == 0 {
			t.Fatalf("second page = %v (older %d, newer %d), want the Discord one with pages both ways", got, p2.Older, p2.Newer)
		}
		p3 := list(ConversationFilter{}, Paging{Before: p2.Older, Limit: 1})
		if got := idsOf(p3); !slices.Equal(got, []int64{webConv}) || p3.Older != 0 || p3.Newer == 0 {
			t.Fatalf("last page = %v (older %d, newer %d), want the web one and a newer page only", got, p3.Older, p3.Newer)
		}
		back := list(ConversationFilter{}, Paging{After: p3.Newer, Limit: 1})
		if got := idsOf(back); !slices.Equal(got, []int64{dcConv}) || back.Newer == 0 || back.Older == 0 {
			t.Fatalf("newer page from the last = %v (older %d, newer %d), want the Discord one", got, back.Older, back.Newer)
		}
		if _, err := s.Transcripts.Conversations(ctx, ConversationFilter{Outcome: "lost"}, Paging{}); err == nil {
			t.Error("an unknown outcome was taken")
		}
	})
}

// TestSearchFindsWhatMembersAskedAndTheBotAnswered: every word must be in the message (a word
// of three letters or more as a word's start), tool results are not searched, the filters
// apply, and the hits page newest first, on both databases.
func TestSearchFindsWhatMembersAskedAndTheBotAnswered(t *testing.T) {
	forEachDriver(t, func(t *testing.T, driver string) {
		ctx := context.Background()
		s := newStore(t, driver)
		day := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
		tg := chat.Key{Platform: chat.Telegram, ChatID: "-100"}
		web := chat.Key{Platform: chat.Web, ChatID: "w1"}
		ids, _ := writeTurns(t, s, []convTurn{
			{key: tg, user: "1", name: "Ann", ask: "How do I deploy the Kubernetes cluster?", answer: "Use the deployment guide, Ann.", status: chat.StatusOK, startsAt: day},
			{key: web, user: "w", name: "Wes", ask: "kubernetes pricing please", answer: "It is free.", status: chat.StatusOK, startsAt: day.Add(time.Hour)},
			{key: tg, user: "2", name: "Bob", ask: "Où est la gare?", status: chat.StatusError, failure: chat.FailureRefused, startsAt: day.Add(2 * time.Hour)},
		})
		search := func(q string, f ConversationFilter, p Paging) Page[MessageHit] {
			t.Helper()
			page, err := s.Transcripts.SearchMessages(ctx, q, f, p)
			if err != nil {
				t.Fatalf("search %q: %v", q, err)
			}
			return page
		}
		texts := func(p Page[MessageHit]) []string {
			var out []string
			for _, h := range p.Items {
				out = append(out, h.Text)
			}
			return out
		}
		for _, tc := range []struct {
			name, q string
			f       ConversationFilter
			want    []string
		}{
			{"a word in any case", "KUBERNETES", ConversationFilter{}, []string{"kubernetes pricing please", "How do I deploy the Kubernetes cluster?"}},
			{"every word", "kubernetes cluster", ConversationFilter{}, []string{"How do I deploy the Kubernetes cluster?"}},
			{"a word's start", "deploy", ConversationFilter{}, []string{"Use the deployment guide, Ann.", "How do I deploy the Kubernetes cluster?"}},
			{"the bot's answer", "free", ConversationFilter{}, []string{"It is free."}},
			{"punctuation is no syntax", `"free" OR -guide*`, ConversationFilter{}, nil},
			{"not a tool's result", "zebrafish", ConversationFilter{}, nil},
			{"not the reasoning", "quietly", ConversationFilter{}, nil},
			{"a failed turn's question", "gare", ConversationFilter{}, []string{"Où est la gare?"}},
			{"a platform", "kubernetes", ConversationFilter{Chat: chat.Ref{Platform: chat.Web}}, []string{"kubernetes pricing please"}},
			{"a person", "kubernetes", ConversationFilter{Person: "Ann"}, []string{"How do I deploy the Kubernetes cluster?"}},
			{"failed turns", "gare", ConversationFilter{Outcome: OutcomeFailed}, []string{"Où est la gare?"}},
			{"answered turns", "gare", ConversationFilter{Outcome: OutcomeAnswered}, nil},
			{"since", "kubernetes", ConversationFilter{Since: day.Add(30 * time.Minute)}, []string{"kubernetes pricing please"}},
		} {
			if got := texts(search(tc.q, tc.f, Paging{})); !slices.Equal(got, tc.want) {
				t.Errorf("%s: search %q = %q, want %q", tc.name, tc.q, got, tc.want)
			}
		}
		hit := search("pricing", ConversationFilter{}, Paging{}).Items[0]
		if hit.TurnID != ids[1] || hit.Chat != web.Ref() || hit.Role != chat.RoleUser || hit.UserName != "Wes" || hit.TurnStatus != chat.StatusOK {
			t.Errorf("the hit is %+v, want Wes's message of turn %d in %s", hit, ids[1], web.Ref())
		}
		p1 := search("kubernetes", ConversationFilter{}, Paging{Limit: 1})
		p2 := search("kubernetes", ConversationFilter{}, Paging{Before: p1.Older, Limit: 1})
		back := search("kubernetes", ConversationFilter{}, Paging{After: p2.Newer, Limit: 1})
		if p1.Older == 0 || p1.Newer != 0 || p2.Older != 0 || p2.Newer == 0 || len(back.Items) != 1 || back.Items[0].ID != p1.Items[0].ID {
			t.Errorf("paging: %+v / %+v / back %+v", p1, p2, back)
		}
		if _, err := s.Transcripts.SearchMessages(ctx, " ?! ", ConversationFilter{}, Paging{}); !errors.Is(err, ErrNoSearchWords) {
			t.Errorf("a search without words: err = %v, want ErrNoSearchWords", err)
		}
	})
}

// TestSearchNoLongerFindsDeletedOrRedactedText: text replaced in place (a redaction) is found
// by its new words only, and a turn deleted by retention, or a conversation deleted with its
// turns, takes its messages out of the index, on both databases.
func TestSearchNoLongerFindsDeletedOrRedactedText(t *testing.T) {
	forEachDriver(t, func(t *testing.T, driver string) {
		ctx := context.Background()
		s := newStore(t, driver)
		old := time.Now().Add(-48 * time.Hour)
		ids, convs := writeTurns(t, s, []convTurn{
			{key: chat.Key{Platform: chat.Telegram, ChatID: "1"}, user: "1", ask: "my secret codename bluebird", answer: "Noted bluebird.", status: chat.StatusOK, startsAt: old},
			{key: chat.Key{Platform: chat.Telegram, ChatID: "2"}, user: "2", ask: "remember marigold", answer: "Marigold it is.", status: chat.StatusOK},
			{key: chat.Key{Platform: chat.Telegram, ChatID: "3"}, user: "3", ask: "about saffron", answer: "Saffron.", status: chat.StatusOK},
		})
		found := func(q string) int {
			t.Helper()
			p, err := s.Transcripts.SearchMessages(ctx, q, ConversationFilter{}, Paging{})
			if err != nil {
				t.Fatal(err)
			}
			return len(p.Items)
		}
		if found("bluebird") != 2 || found("marigold") != 2 || found("saffron") != 2 {
			t.Fatal("the messages are not found before anything is deleted")
		}
		if err := s.w.Exec(`UPDATE messages SET content = ? WHERE turn_id = ? AND role = 'assistant' AND content <> ''`,
			Forgotten, ids[1]).Error; err != nil {
			t.Fatal(err)
		}
		if n := found("marigold"); n != 1 {
			t.Errorf("after the answer was redacted, marigold is found %d times, want once (the question)", n)
		}
		if n := found("forgotten"); n != 1 {
			t.Errorf("the redacted answer is found %d times by its new text, want once", n)
		}
		if _, err := s.Retention.Sweep(ctx, time.Now().Add(-24*time.Hour)); err != nil {
			t.Fatal(err)
		}
		if n := found("bluebird"); n != 0 {
			t.Errorf("after retention deleted the turn, bluebird is still found %d times", n)
		}
		if err := s.w.Exec(`DELETE FROM conversations WHERE id = ?`, convs[2]).Error; err != nil {
			t.Fatal(err)
		}
		if n := found("saffron"); n != 0 {
			t.Errorf("after its conversation was deleted, saffron is still found %d times", n)
		}
		if driver == DriverSQLite {
			// The index itself holds no posting of the deleted words any more.
			if n := count(t, s, "messages_fts", "messages_fts MATCH ?", "bluebird OR saffron"); n != 0 {
				t.Errorf("the FTS4 index still matches deleted words in %d rows", n)
			}
		}
	})
}

// TestTranscriptReadsTurnsWithTheirMessagesAndCalls: a conversation's page holds its turns
// oldest first with their messages and audit rows, pages back and forth, and an unknown
// conversation is ErrNotFound.
func TestTranscriptReadsTurnsWithTheirMessagesAndCalls(t *testing.T) {
	forEachDriver(t, func(t *testing.T, driver string) {
		ctx := context.Background()
		s := newStore(t, driver)
		key := chat.Key{Platform: chat.Web, ChatID: "w"}
		var turns []convTurn
		for _, q := range []string{"one", "two", "three"} {
			turns = append(turns, convTurn{key: key, user: "u", name: "Uma", ask: q, answer: "answer " + q, status: chat.StatusOK})
		}
		ids, convs := writeTurns(t, s, turns)
		rec := audit.Record{TurnID: ids[2], ConversationID: convs[2], Platform: "web", ChatID: "w", ToolName: "lookup",
			ToolCallID: "c1", Arguments: `{"q":"x"}`, StartedAt: time.Now()}
		if err := s.ToolCalls.StartToolCall(ctx, &rec); err != nil {
			t.Fatal(err)
		}
		tr, err := s.Transcripts.Transcript(ctx, convs[0], Paging{Limit: 2})
		if err != nil {
			t.Fatal(err)
		}
		if len(tr.Turns) != 2 || tr.Turns[0].ID != ids[1] || tr.Turns[1].ID != ids[2] || tr.Earlier == 0 || tr.Later != 0 {
			t.Fatalf("the newest page holds %d turns (earlier %d, later %d), want turns 2 and 3 and an earlier page", len(tr.Turns), tr.Earlier, tr.Later)
		}
		last := tr.Turns[1]
		if len(last.Messages) != 4 || last.Messages[0].Content != "three" || last.Messages[3].Content != "answer three" ||
			last.Messages[3].Reasoning != "thinking quietly" || len(last.Calls) != 1 || last.Calls[0].ToolName != "lookup" {
			t.Errorf("turn 3 reads as %+v", last)
		}
		earlier, err := s.Transcripts.Transcript(ctx, convs[0], Paging{Before: tr.Earlier, Limit: 2})
		if err != nil {
			t.Fatal(err)
		}
		if len(earlier.Turns) != 1 || earlier.Turns[0].ID != ids[0] || earlier.Earlier != 0 || earlier.Later == 0 {
			t.Errorf("the earlier page holds %+v (earlier %d, later %d), want turn 1 and a later page", earlier.Turns, earlier.Earlier, earlier.Later)
		}
		after, err := s.Transcripts.Transcript(ctx, convs[0], Paging{After: ids[0], Limit: 2})
		if err != nil {
			t.Fatal(err)
		}
		if len(after.Turns) != 2 || after.Turns[0].ID != ids[1] || after.Earlier == 0 || after.Later != 0 {
			t.Errorf("the page after turn 1 holds %d turns (earlier %d, later %d), want turns 2 and 3 and an earlier page",
				len(after.Turns), after.Earlier, after.Later)
		}
		from, err := s.Transcripts.Transcript(ctx, convs[0], Paging{From: ids[0], Limit: 2})
		if err != nil {
			t.Fatal(err)
		}
		if len(from.Turns) != 2 || from.Turns[0].ID != ids[0] || from.Earlier != 0 || from.Later == 0 {
			t.Errorf("the page from turn 1 holds %d turns (earlier %d, later %d), want turns 1 and 2 and a later page only",
				len(from.Turns), from.Earlier, from.Later)
		}
		if _, err := s.Transcripts.Transcript(ctx, convs[0]+100, Paging{}); !errors.Is(err, ErrNotFound) {
			t.Errorf("an unknown conversation: err = %v, want ErrNotFound", err)
		}
	})
}
