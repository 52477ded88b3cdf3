package storetest_test

import (
	"context"
	"testing"

	"relaybot/chat"
	"relaybot/store/storetest"
)

// TestOpenGivesEachTestAMigratedDatabaseOfItsOwn: on every driver, Open hands back a database
// at the newest schema, and what one test writes another does not see.
func TestOpenGivesEachTestAMigratedDatabaseOfItsOwn(t *testing.T) {
	storetest.Drivers(t, func(t *testing.T, driver string) {
		ctx := context.Background()
		ref := chat.Ref{Platform: chat.Telegram, ChatID: "1"}
		for i := range 2 {
			db := storetest.Open(t, driver)
			cur, latest, err := db.SchemaVersion(ctx)
			if err != nil || cur != latest {
				t.Fatalf("schema at version %d of %d (err %v), want the newest", cur, latest, err)
			}
			seen, err := db.WebChat.ChatConversations(ctx, ref, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(seen) != 0 {
				t.Fatalf("database %d holds %d conversations of another test's database", i+1, len(seen))
			}
			if _, err := db.Conversations.Conversation(ctx, chat.Key{Platform: ref.Platform, ChatID: ref.ChatID}); err != nil {
				t.Fatal(err)
			}
		}
	})
}
