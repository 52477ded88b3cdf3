//go:build unix

package store

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"relaybot/audit"
	"relaybot/chat"
	"syscall"
	"testing"
)

// TestSQLiteFilesArePrivateWhateverTheUmask writes a turn and an audit row to a new SQLite
// database under umasks that would leave it readable by others, and checks that the database,
// its -wal and -shm files are 0600 and the folder the store created 0700: they hold every
// conversation.
func TestSQLiteFilesArePrivateWhateverTheUmask(t *testing.T) {
	for _, umask := range []int{0o000, 0o022, 0o002} {
		t.Run("umask "+modeString(os.FileMode(umask)), func(t *testing.T) {
			old := syscall.Umask(umask)
			t.Cleanup(func() { syscall.Umask(old) })
			dir := filepath.Join(t.TempDir(), "data", "bot")
			path := filepath.Join(dir, "bot.db")
			s := openTest(t, Options{Driver: DriverSQLite, DSN: path})
			ctx := context.Background()
			c, err := s.Conversations.Conversation(ctx, chat.Key{Platform: "telegram", ChatID: "1"})
			if err != nil {
				t.Fatal(err)
			}
			id, err := s.Turns.StartTurn(ctx, TurnStart{ConversationID: c.ID, UserMessage: chat.Message{Content: "secret"}})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.ToolCalls.StartToolCall(ctx, &audit.Record{TurnID: id, ToolName: "t", Arguments: "{}"}); err != nil {
				t.Fatal(err)
			}
			if err := s.Turns.FinishTurn(ctx, TurnEnd{TurnID: id, Status: TurnOK}); err != nil {
				t.Fatal(err)
			}
			want := map[string]os.FileMode{dir: 0o700, path: 0o600, path + "-wal": 0o600, path + "-shm": 0o600}
			for p, mode := range want {
				fi, err := os.Stat(p)
				if err != nil {
					t.Fatalf("%s: %v", p, err)
				}
				if got := fi.Mode().Perm(); got != mode {
					t.Errorf("%s is %s, want %s", filepath.Base(p), modeString(got), modeString(mode))
				}
			}
		})
	}
}

func modeString(m os.FileMode) string { return fmt.Sprintf("%04o", uint32(m)) }
