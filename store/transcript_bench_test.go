package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"relaybot/store/internal/testdb"
)

// BenchmarkTranscripts measures the admin's conversations pages on a filled database: 1,000
// conversations of 25 turns, each turn a member's question and the bot's answer of 20 words from
// a vocabulary of 5,000 (50,000 messages), on each database. It reads the first page of the list,
// a search for a rare word (in about 200 messages) and one for a common word (in about 5,000;
// the first page of 50 is read), and a conversation's newest page of turns.
func BenchmarkTranscripts(b *testing.B) {
	for _, driver := range []string{DriverSQLite, DriverPostgres} {
		b.Run(driver, func(b *testing.B) {
			if driver == DriverPostgres && !hasPostgres() {
				b.Skip("no PostgreSQL (BOT_TEST_POSTGRES_DSN)")
			}
			s := newStore(b, driver)
			fillTranscripts(b, s)
			ctx := context.Background()
			for _, c := range []struct {
				name string
				run  func() error
			}{
				{"list", func() error { _, err := s.Transcripts.Conversations(ctx, ConversationFilter{}, Paging{}); return err }},
				{"search=rare", func() error {
					_, err := s.Transcripts.SearchMessages(ctx, "w4999", ConversationFilter{}, Paging{})
					return err
				}},
				{"search=common", func() error {
					_, err := s.Transcripts.SearchMessages(ctx, "w1", ConversationFilter{}, Paging{})
					return err
				}},
				{"conversation", func() error { _, err := s.Transcripts.Transcript(ctx, 500, Paging{}); return err }},
			} {
				b.Run(c.name, func(b *testing.B) {
					for b.Loop() {
						if err := c.run(); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		})
	}
}

func hasPostgres() bool {
	return strings.TrimSpace(os.Getenv(testdb.Env)) != ""
}

// fillTranscripts writes the benchmark's conversations, turns and messages in a few large
// transactions (the index is written by the same triggers or index as a turn's writes).
func fillTranscripts(b *testing.B, s *Database) {
	b.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	// A word's frequency falls with its number (Zipf-like), so w1 is common and w4999 rare.
	zipf := rand.NewZipf(rand.New(rand.NewPCG(3, 4)), 1.1, 1, 4999)
	text := func() string {
		words := make([]string, 20)
		for i := range words {
			words[i] = fmt.Sprintf("w%d", zipf.Uint64()+1)
		}
		return strings.Join(words, " ")
	}
	start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	err := s.w.Transaction(func(tx *gorm.DB) error {
		for c := 1; c <= 1000; c++ {
			if err := tx.Exec(`INSERT INTO conversations (id, platform, chat_id, thread_id, user_id, active, created_at)
				VALUES (?, 'telegram', ?, '', '', ?, ?)`, c, fmt.Sprint(c), true, start).Error; err != nil {
				return err
			}
			for t := 0; t < 25; t++ {
				id := int64(c*100 + t)
				at := start.Add(time.Duration(rng.IntN(30*24*3600)) * time.Second)
				if err := tx.Exec(`INSERT INTO turns (id, conversation_id, user_id, user_name, status, started_at)
					VALUES (?, ?, ?, ?, 'ok', ?)`, id, c, fmt.Sprint("u", c%50), fmt.Sprint("Person ", c%50), at).Error; err != nil {
					return err
				}
				if err := tx.Exec(`INSERT INTO messages (conversation_id, turn_id, seq, role, content, created_at)
					VALUES (?, ?, 0, 'user', ?, ?), (?, ?, 1, 'assistant', ?, ?)`,
					c, id, text(), at, c, id, text(), at).Error; err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	if s.driver == DriverPostgres {
		for _, t := range []string{"conversations", "turns", "messages"} {
			if err := s.w.Exec("ANALYZE " + t).Error; err != nil {
				b.Fatal(err)
			}
		}
	}
}
