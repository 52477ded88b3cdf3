package store

import (
	"context"
	"fmt"
	"testing"

	"relaybot/chat"
)

// writerConn runs fn on the writer's SQLite connection.
func writerConn(t *testing.T, s *Database, fn func(c *stmtCacheConn)) {
	t.Helper()
	conn, err := s.wsql.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.Raw(func(dc any) error { fn(dc.(*stmtCacheConn)); return nil }); err != nil {
		t.Fatal(err)
	}
}

func TestTurnStatementsAreCompiledOnceAndTextIsStillCleaned(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, DriverSQLite)
	c, err := s.Conversations.Conversation(ctx, chat.Key{Platform: "telegram", ChatID: "1"})
	if err != nil {
		t.Fatal(err)
	}
	var kept, hits int
	writerConn(t, s, func(c *stmtCacheConn) { kept, hits = len(c.stmts), c.hits })
	const n = 20
	for i := range n {
		id, err := s.Turns.StartTurn(ctx, TurnStart{ConversationID: c.ID, UserMessage: chat.Message{Content: fmt.Sprint("question\x00 ", i, "\xff")}})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Turns.FinishTurn(ctx, TurnEnd{TurnID: id, Status: TurnOK, Messages: []chat.Message{{Role: RoleAssistant, Content: "answer"}}}); err != nil {
			t.Fatal(err)
		}
	}
	writerConn(t, s, func(c *stmtCacheConn) {
		if grown := len(c.stmts) - kept; grown > 12 {
			t.Errorf("%d statements kept after %d turns: turns compile new statements each time", grown, n)
		}
		// A turn runs four statements (two to start it, two to finish it), each compiled once.
		if want := 4*n - 4; c.hits-hits < want {
			t.Errorf("%d statements of %d turns ran from the cache, want at least %d", c.hits-hits, n, want)
		}
	})
	h, err := s.Messages.History(ctx, c.ID, n)
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 2*n || h[0].Content != "question 0\uFFFD" {
		t.Fatalf("history = %d messages, first %q; want %d, the NUL removed and the bad byte replaced", len(h), h[0].Content, 2*n)
	}
}

func TestAStatementRunsAgainWhileItsRowsAreOpen(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, DriverSQLite)
	for i := range 3 {
		if _, err := s.Conversations.Conversation(ctx, chat.Key{Platform: "telegram", ChatID: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	tx, err := s.wsql.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	const q = "SELECT chat_id FROM conversations ORDER BY id"
	outer, err := tx.QueryContext(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for outer.Next() {
		var id string
		if err := outer.Scan(&id); err != nil {
			t.Fatal(err)
		}
		inner, err := tx.QueryContext(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for inner.Next() {
			n++
		}
		inner.Close()
		got = append(got, fmt.Sprint(id, ":", n))
	}
	if err := outer.Err(); err != nil {
		t.Fatal(err)
	}
	outer.Close()
	if fmt.Sprint(got) != "[0:3 1:3 2:3]" {
		t.Errorf("nested reads of the same query = %v, want each outer row with all 3 inner rows", got)
	}
}
