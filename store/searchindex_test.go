package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"relaybot/chat"
)

// searchIndexBytes is the size of SQLite's FTS4 index of the messages: its segments' blocks
// and the roots in its directory.
func searchIndexBytes(t *testing.T, s *Database) int64 {
	t.Helper()
	var blocks, roots int64
	if err := s.rsql.QueryRow(`SELECT COALESCE(SUM(LENGTH(block)), 0) FROM messages_fts_segments`).Scan(&blocks); err != nil {
		t.Fatal(err)
	}
	if err := s.rsql.QueryRow(`SELECT COALESCE(SUM(LENGTH(root)), 0) FROM messages_fts_segdir`).Scan(&roots); err != nil {
		t.Fatal(err)
	}
	return blocks + roots
}

// TestRetentionShrinksTheSearchIndex: after retention deletes a month of old turns, their words
// are no longer found, the recent turn's still are, and on SQLite the FTS4 index is smaller than
// before the sweep (the deleted postings merged away, not kept beside delete markers).
func TestRetentionShrinksTheSearchIndex(t *testing.T) {
	forEachDriver(t, func(t *testing.T, driver string) {
		ctx := context.Background()
		s := newStore(t, driver)
		old := time.Now().Add(-30 * 24 * time.Hour)
		var turns []convTurn
		for i := range 80 {
			turns = append(turns, convTurn{key: chat.Key{Platform: chat.Telegram, ChatID: fmt.Sprint(i % 7)}, user: "1",
				ask: fmt.Sprintf("old question %d about the bluebird project w%d", i, i), answer: fmt.Sprintf("bluebird answer %d", i),
				status: chat.StatusOK, startsAt: old.Add(time.Duration(i) * time.Minute)})
		}
		turns = append(turns, convTurn{key: chat.Key{Platform: chat.Telegram, ChatID: "new"}, user: "2",
			ask: "a fresh question about marigold", answer: "marigold it is", status: chat.StatusOK})
		writeTurns(t, s, turns)
		found := func(q string) int {
			t.Helper()
			p, err := s.Transcripts.SearchMessages(ctx, q, ConversationFilter{}, Paging{Limit: 500})
			if err != nil {
				t.Fatal(err)
			}
			return len(p.Items)
		}
		if n := found("bluebird"); n != 160 {
			t.Fatalf("before the sweep bluebird is found %d times, want 160", n)
		}
		var before int64
		if driver == DriverSQLite {
			before = searchIndexBytes(t, s)
		}
		if _, err := s.Retention.Sweep(ctx, time.Now().Add(-24*time.Hour)); err != nil {
			t.Fatal(err)
		}
		if n := found("bluebird"); n != 0 {
			t.Errorf("after retention deleted the old turns, bluebird is still found %d times", n)
		}
		if n := found("marigold"); n != 2 {
			t.Errorf("the recent turn's marigold is found %d times, want 2", n)
		}
		if driver != DriverSQLite {
			return
		}
		if after := searchIndexBytes(t, s); after*4 > before {
			t.Errorf("the search index is %d bytes after retention deleted all but one turn of %d, was %d: the deleted postings stayed", after, len(turns), before)
		}
		if n := count(t, s, "messages_fts", "messages_fts MATCH ?", "bluebird"); n != 0 {
			t.Errorf("the FTS4 index still matches deleted words in %d rows", n)
		}
		if steps, err := s.Retention.CompactSearch(ctx); err != nil || steps != 0 {
			t.Errorf("a second merge = %d steps, %v; want nothing left to merge", steps, err)
		}
	})
}
