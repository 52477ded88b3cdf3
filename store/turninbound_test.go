package store

import (
	"context"
	"fmt"
	"relaybot/chat"
	"strings"
	"testing"

	"gorm.io/gorm"
)

// TestTurnByInbound finds the newest turn of a message in any conversation of its chat, and
// never a turn of another chat or platform with the same message id.
func TestTurnByInbound(t *testing.T) {
	forEachDriver(t, func(t *testing.T, driver string) {
		ctx := context.Background()
		s := newStore(t, driver)
		turn := func(key chat.Key, msgID string, status chat.Status) int64 {
			t.Helper()
			c, err := s.Conversations.Conversation(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			id, err := s.Turns.StartTurn(ctx, TurnStart{ConversationID: c.ID, UserID: "u", InboundMessageID: msgID,
				UserMessage: chat.Message{Role: RoleUser, Content: "message " + msgID}})
			if err != nil {
				t.Fatal(err)
			}
			if status != TurnRunning {
				if err := s.Turns.FinishTurn(ctx, TurnEnd{TurnID: id, Status: status}); err != nil {
					t.Fatal(err)
				}
			}
			return id
		}
		shared := chat.Key{Platform: "telegram", ChatID: "100"}
		turn(shared, "7", TurnOK)
		if _, err := s.Conversations.ResetConversation(ctx, shared); err != nil {
			t.Fatal(err)
		}
		// The same message again after /reset (a redelivery answered in the new conversation).
		newest := turn(shared, "7", TurnRunning)
		perUser := turn(chat.Key{Platform: "telegram", ChatID: "100", UserID: "u2"}, "8", TurnError)
		otherChat := turn(chat.Key{Platform: "telegram", ChatID: "200"}, "7", TurnCancelled)
		otherPlatform := turn(chat.Key{Platform: "discord", ChatID: "100"}, "9", TurnOK)

		for _, tc := range []struct {
			name             string
			platform, chat   string
			msgID            string
			wantID           int64 // 0: not found
			wantStatus       chat.Status
			wantFinishedZero bool
		}{
			{"newest wins across a reset", "telegram", "100", "7", newest, TurnRunning, true},
			{"another conversation of the chat", "telegram", "100", "8", perUser, TurnError, false},
			{"other chat, same message id", "telegram", "200", "7", otherChat, TurnCancelled, false},
			{"other platform", "discord", "100", "9", otherPlatform, TurnOK, false},
			{"message of another platform's chat", "telegram", "100", "9", 0, "", false},
			{"chat without turns", "telegram", "300", "7", 0, "", false},
			{"unknown message", "telegram", "100", "404", 0, "", false},
		} {
			t.Run(tc.name, func(t *testing.T) {
				got, found, err := s.Turns.TurnByInbound(ctx, chat.Ref{Platform: chat.Platform(tc.platform), ChatID: tc.chat}, tc.msgID)
				if err != nil {
					t.Fatal(err)
				}
				if tc.wantID == 0 {
					if found {
						t.Fatalf("found turn %+v, want none", got)
					}
					return
				}
				if !found || got.ID != tc.wantID {
					t.Fatalf("turn %d (found %v), want %d", got.ID, found, tc.wantID)
				}
				if got.Status != tc.wantStatus || got.InboundMessageID != tc.msgID || got.UserID != "u" ||
					got.FinishedAt.IsZero() != tc.wantFinishedZero || got.StartedAt.IsZero() {
					t.Fatalf("turn %+v: want status %s, message %s, user u, finished %v", got, tc.wantStatus, tc.msgID, !tc.wantFinishedZero)
				}
			})
		}

		// After a crash the running turn is interrupted, and that is what the lookup reports.
		if _, _, err := s.Turns.Recover(ctx); err != nil {
			t.Fatal(err)
		}
		got, found, err := s.Turns.TurnByInbound(ctx, chat.Ref{Platform: "telegram", ChatID: "100"}, "7")
		if err != nil || !found || got.ID != newest || got.Status != TurnInterrupted {
			t.Fatalf("after Recover: turn %+v found %v (%v), want %d interrupted", got, found, err, newest)
		}

		for _, args := range [][3]string{{"", "100", "7"}, {"telegram", "", "7"}, {"telegram", "100", ""}} {
			if _, _, err := s.Turns.TurnByInbound(ctx, chat.Ref{Platform: chat.Platform(args[0]), ChatID: args[1]}, args[2]); err == nil {
				t.Errorf("TurnByInbound%q succeeded, want an error", args)
			}
		}
	})
}

// TestTurnByInboundPlanUsesIndex checks that the lookup finds the chat's conversations, then
// their turns of the message, by index searches, and that PostgreSQL can answer it from the
// same indexes.
func TestTurnByInboundPlanUsesIndex(t *testing.T) {
	forEachDriver(t, func(t *testing.T, driver string) {
		ctx := context.Background()
		s := newStore(t, driver)
		for _, id := range []string{"1", "2", "3", "4"} {
			c, err := s.Conversations.Conversation(ctx, chat.Key{Platform: "telegram", ChatID: id})
			if err != nil {
				t.Fatal(err)
			}
			for m := range 10 {
				if _, err := s.Turns.StartTurn(ctx, TurnStart{ConversationID: c.ID, InboundMessageID: fmt.Sprintf("%s-%d", id, m),
					UserMessage: chat.Message{Role: RoleUser, Content: "q"}}); err != nil {
					t.Fatal(err)
				}
			}
		}
		plan := explain(t, s, s.turnByInboundQuery(ctx, chat.Ref{Platform: "telegram", ChatID: "1"}, "1-3"))
		switch driver {
		case DriverSQLite:
			// The sort that remains is of the message's turns in the chat: one per redelivery.
			if !strings.Contains(plan, "SEARCH conversations USING COVERING INDEX idx_conversations_chat (platform=? AND chat_id=?)") ||
				!strings.Contains(plan, "SEARCH turns USING INDEX idx_turns_inbound (inbound_message_id=? AND conversation_id=?)") ||
				strings.Contains(plan, "SCAN") {
				t.Errorf("plan does not search idx_conversations_chat then idx_turns_inbound:\n%s", plan)
			}
		case DriverPostgres:
			if !strings.Contains(plan, "idx_turns_inbound") || !strings.Contains(plan, "idx_conversations_chat") {
				t.Errorf("plan does not use idx_conversations_chat and idx_turns_inbound:\n%s", plan)
			}
		}
	})
}

// explain returns the database's plan of q. On PostgreSQL sequential scans are turned off for
// the statement's connection: a test table is small enough to scan, and the question is whether
// the index can answer the query.
func explain(t testing.TB, s *Database, q *gorm.DB) string {
	t.Helper()
	var rows []turnRow
	stmt := q.Session(&gorm.Session{DryRun: true}).Find(&rows).Statement
	ctx := context.Background()
	conn, err := s.rsql.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	prefix := "EXPLAIN QUERY PLAN "
	if s.driver == DriverPostgres {
		prefix = "EXPLAIN "
		if _, err := conn.ExecContext(ctx, "SET enable_seqscan = off"); err != nil {
			t.Fatal(err)
		}
		defer conn.ExecContext(ctx, "RESET enable_seqscan")
	}
	res, err := conn.QueryContext(ctx, prefix+stmt.SQL.String(), stmt.Vars...)
	if err != nil {
		t.Fatalf("%s%s: %v", prefix, stmt.SQL.String(), err)
	}
	defer res.Close()
	cols, err := res.Columns()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for res.Next() {
		vals := make([]any, len(cols))
		for i := range vals {
			vals[i] = new(any)
		}
		if err := res.Scan(vals...); err != nil {
			t.Fatal(err)
		}
		// SQLite: id, parent, notused, detail; PostgreSQL: one line of text.
		last := *(vals[len(vals)-1].(*any))
		if v, ok := last.([]byte); ok {
			last = string(v)
		}
		b.WriteString(fmt.Sprint(last))
		b.WriteByte('\n')
	}
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestTurnsInboundMigration applies and reverts migration 3 on its own: down removes only its
// indexes (the lookup still answers, by scans), up brings them back.
func TestTurnsInboundMigration(t *testing.T) {
	forEachDriver(t, func(t *testing.T, driver string) {
		ctx := context.Background()
		s := newStore(t, driver)
		c, err := s.Conversations.Conversation(ctx, chat.Key{Platform: "telegram", ChatID: "5"})
		if err != nil {
			t.Fatal(err)
		}
		id, err := s.Turns.StartTurn(ctx, TurnStart{ConversationID: c.ID, InboundMessageID: "77", UserMessage: chat.Message{Role: RoleUser, Content: "q"}})
		if err != nil {
			t.Fatal(err)
		}
		// hasIndex reports whether both indexes of migration 3 exist, and fails on one alone.
		hasIndex := func() bool {
			t.Helper()
			q := "SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND name IN (?, ?)"
			if driver == DriverPostgres {
				q = "SELECT COUNT(*) FROM pg_indexes WHERE schemaname = current_schema() AND indexname IN ($1, $2)"
			}
			var n int
			if err := s.rsql.QueryRowContext(ctx, q, "idx_turns_inbound", "idx_conversations_chat").Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n == 1 {
				t.Fatal("only one of idx_turns_inbound and idx_conversations_chat exists")
			}
			return n == 2
		}
		lookup := func() {
			t.Helper()
			got, found, err := s.Turns.TurnByInbound(ctx, chat.Ref{Platform: "telegram", ChatID: "5"}, "77")
			if err != nil || !found || got.ID != id {
				t.Fatalf("TurnByInbound = %d, %v, %v; want turn %d", got.ID, found, err, id)
			}
		}
		if cur, _, err := s.SchemaVersion(ctx); err != nil || cur < 3 || !hasIndex() {
			t.Fatalf("after Migrate: version %d (%v), index present %v; want >= 3 with its indexes", cur, err, hasIndex())
		}
		lookup()
		p, err := s.provider()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.DownTo(ctx, 2); err != nil {
			t.Fatalf("down to 2: %v", err)
		}
		if cur, _, _ := s.SchemaVersion(ctx); cur != 2 || hasIndex() {
			t.Fatalf("after down to 2: version %d, index present %v; want 2 without migration 3's indexes", cur, hasIndex())
		}
		lookup()
		if n := count(t, s, "turns", ""); n != 1 {
			t.Fatalf("turns after down = %d, want the 1 kept", n)
		}
		if err := s.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		if !hasIndex() {
			t.Fatal("migration 3's indexes missing after migrating up again")
		}
		lookup()
	})
}

// BenchmarkTurnByInbound looks up a message among 200,000 turns of 500 chats on SQLite (400
// turns a chat; Telegram message ids repeat across chats).
func BenchmarkTurnByInbound(b *testing.B) {
	ctx := context.Background()
	s := newStore(b, DriverSQLite)
	res := s.w.Exec(`WITH RECURSIVE n(x) AS (SELECT 0 UNION ALL SELECT x + 1 FROM n WHERE x < 999)
INSERT INTO conversations (platform, chat_id, thread_id, user_id, active, created_at)
SELECT 'telegram', 'chat' || (x % 500), '', 'user' || x, 1, '2026-01-01 00:00:00+00:00' FROM n`)
	if res.Error != nil || res.RowsAffected != 1000 {
		b.Fatalf("seed conversations: %d rows, %v", res.RowsAffected, res.Error)
	}
	// Turn x is in conversation x % 1000 + 1, of chat (x % 1000) % 500, started by message x / 500.
	res = s.w.Exec(`WITH RECURSIVE n(x) AS (SELECT 0 UNION ALL SELECT x + 1 FROM n WHERE x < 199999)
INSERT INTO turns (conversation_id, user_id, inbound_message_id, status, started_at, finished_at)
SELECT x % 1000 + 1, 'u', CAST(x / 500 AS TEXT), 'ok', '2026-01-01 00:00:00+00:00', '2026-01-01 00:00:01+00:00' FROM n`)
	if res.Error != nil || res.RowsAffected != 200_000 {
		b.Fatalf("seed turns: %d rows, %v", res.RowsAffected, res.Error)
	}
	if err := s.w.Exec("ANALYZE").Error; err != nil {
		b.Fatal(err)
	}
	b.Logf("plan:\n%s", explain(b, s, s.turnByInboundQuery(ctx, chat.Ref{Platform: "telegram", ChatID: "chat7"}, "123")))
	// chat.Message 123 started turns x = 61500..61999; the one in chat7 is x = 61507 (conversation 508).
	if got, found, err := s.Turns.TurnByInbound(ctx, chat.Ref{Platform: "telegram", ChatID: "chat7"}, "123"); err != nil || !found || got.ID != 61508 {
		b.Fatalf("TurnByInbound = %+v, %v, %v; want turn 61508", got, found, err)
	}
	for b.Loop() {
		if _, found, err := s.Turns.TurnByInbound(ctx, chat.Ref{Platform: "telegram", ChatID: "chat7"}, "123"); err != nil || !found {
			b.Fatal(found, err)
		}
	}
}
