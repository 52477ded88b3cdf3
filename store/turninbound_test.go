package store

import (
	"context"
	"fmt"
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
		turn := func(key Key, msgID, status string) int64 {
			t.Helper()
			c, err := s.Conversation(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			id, err := s.StartTurn(ctx, TurnStart{ConversationID: c.ID, UserID: "u", InboundMessageID: msgID,
				UserMessage: Message{Role: RoleUser, Content: "message " + msgID}})
			if err != nil {
				t.Fatal(err)
			}
			if status != TurnRunning {
				if err := s.FinishTurn(ctx, TurnEnd{TurnID: id, Status: status}); err != nil {
					t.Fatal(err)
				}
			}
			return id
		}
		chat := Key{Platform: "telegram", ChatID: "100"}
		turn(chat, "7", TurnOK)
		if _, err := s.ResetConversation(ctx, chat); err != nil {
			t.Fatal(err)
		}
		// The same message again after /reset (a redelivery answered in the new conversation).
		newest := turn(chat, "7", TurnRunning)
		perUser := turn(Key{Platform: "telegram", ChatID: "100", UserID: "u2"}, "8", TurnError)
		otherChat := turn(Key{Platform: "telegram", ChatID: "200"}, "7", TurnCancelled)
		otherPlatform := turn(Key{Platform: "discord", ChatID: "100"}, "9", TurnOK)

		for _, tc := range []struct {
			name             string
			platform, chat   string
			msgID            string
			wantID           int64 // 0: not found
			wantStatus       string
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
				got, found, err := s.TurnByInbound(ctx, tc.platform, tc.chat, tc.msgID)
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
		if _, _, err := s.Recover(ctx); err != nil {
			t.Fatal(err)
		}
		got, found, err := s.TurnByInbound(ctx, "telegram", "100", "7")
		if err != nil || !found || got.ID != newest || got.Status != TurnInterrupted {
			t.Fatalf("after Recover: turn %+v found %v (%v), want %d interrupted", got, found, err, newest)
		}

		for _, args := range [][3]string{{"", "100", "7"}, {"telegram", "", "7"}, {"telegram", "100", ""}} {
			if _, _, err := s.TurnByInbound(ctx, args[0], args[1], args[2]); err == nil {
				t.Errorf("TurnByInbound%q succeeded, want an error", args)
			}
		}
	})
}

// TestTurnByInboundPlanUsesIndex checks that the lookup is an index search on idx_turns_inbound
// whose order needs no sort (SQLite), and that PostgreSQL can answer it from that index.
func TestTurnByInboundPlanUsesIndex(t *testing.T) {
	forEachDriver(t, func(t *testing.T, driver string) {
		ctx := context.Background()
		s := newStore(t, driver)
		for _, chat := range []string{"1", "2", "3", "4"} {
			c, err := s.Conversation(ctx, Key{Platform: "telegram", ChatID: chat})
			if err != nil {
				t.Fatal(err)
			}
			for m := range 10 {
				if _, err := s.StartTurn(ctx, TurnStart{ConversationID: c.ID, InboundMessageID: fmt.Sprintf("%s-%d", chat, m),
					UserMessage: Message{Role: RoleUser, Content: "q"}}); err != nil {
					t.Fatal(err)
				}
			}
		}
		plan := explain(t, s, s.turnByInboundQuery(ctx, "telegram", "1", "1-3"))
		switch driver {
		case DriverSQLite:
			if !strings.Contains(plan, "USING INDEX idx_turns_inbound (inbound_message_id=?)") ||
				strings.Contains(plan, "SCAN turns") || strings.Contains(plan, "TEMP B-TREE") {
				t.Errorf("plan does not search idx_turns_inbound for both filter and order:\n%s", plan)
			}
		case DriverPostgres:
			if !strings.Contains(plan, "idx_turns_inbound") {
				t.Errorf("plan does not use idx_turns_inbound:\n%s", plan)
			}
		}
	})
}

// explain returns the database's plan of q. On PostgreSQL sequential scans are turned off for
// the statement's connection: a test table is small enough to scan, and the question is whether
// the index can answer the query.
func explain(t testing.TB, s *Store, q *gorm.DB) string {
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
// index (the lookup still answers, by a scan), up brings it back.
func TestTurnsInboundMigration(t *testing.T) {
	forEachDriver(t, func(t *testing.T, driver string) {
		ctx := context.Background()
		s := newStore(t, driver)
		c, err := s.Conversation(ctx, Key{Platform: "telegram", ChatID: "5"})
		if err != nil {
			t.Fatal(err)
		}
		id, err := s.StartTurn(ctx, TurnStart{ConversationID: c.ID, InboundMessageID: "77", UserMessage: Message{Role: RoleUser, Content: "q"}})
		if err != nil {
			t.Fatal(err)
		}
		hasIndex := func() bool {
			t.Helper()
			q := "SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND name = ?"
			if driver == DriverPostgres {
				q = "SELECT COUNT(*) FROM pg_indexes WHERE schemaname = current_schema() AND indexname = $1"
			}
			var n int
			if err := s.rsql.QueryRowContext(ctx, q, "idx_turns_inbound").Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n == 1
		}
		lookup := func() {
			t.Helper()
			got, found, err := s.TurnByInbound(ctx, "telegram", "5", "77")
			if err != nil || !found || got.ID != id {
				t.Fatalf("TurnByInbound = %d, %v, %v; want turn %d", got.ID, found, err, id)
			}
		}
		if cur, _, err := s.SchemaVersion(ctx); err != nil || cur < 3 || !hasIndex() {
			t.Fatalf("after Migrate: version %d (%v), index present %v; want >= 3 with idx_turns_inbound", cur, err, hasIndex())
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
			t.Fatalf("after down to 2: version %d, index present %v; want 2 without idx_turns_inbound", cur, hasIndex())
		}
		lookup()
		if n := count(t, s, "turns", ""); n != 1 {
			t.Fatalf("turns after down = %d, want the 1 kept", n)
		}
		if err := s.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		if !hasIndex() {
			t.Fatal("idx_turns_inbound missing after migrating up again")
		}
		lookup()
	})
}
