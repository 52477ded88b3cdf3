package coord

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"relaybot/adapters"
	"relaybot/adapters/delivery"
	"relaybot/adapters/telegram"
	"relaybot/chat"
	tgtest "relaybot/internal/testkit/telegram"
	"relaybot/internal/testkit/wait"
)

// telegramBudgets are the chat budgets of a Telegram bot as cmd/bot builds them.
func telegramBudgets(db *sql.DB, instance string) *ChatBudgets {
	lim := telegram.Limits()
	return NewChatBudgets(db, instance, ChatBudgetOptions{Bot: BotOf(chat.Telegram, "test"),
		Chat: Window{N: lim.PerChat.N, Per: lim.PerChat.Per}, Group: Window{N: lim.PerGroup.N, Per: lim.PerGroup.Per}})
}

// joinAs registers a live replica with id for the length of the test.
func joinAs(t testing.TB, db *sql.DB, id string) {
	t.Helper()
	m, err := Join(context.Background(), db, Options{ID: id})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Leave(context.Background()) })
}

func TestTwoReplicasStreamingIntoOneGroupDrawNo429s(t *testing.T) {
	st, _ := pgStore(t, "")
	db := pool(t, st)
	srv, err := tgtest.New(tgtest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	const group = -100777
	chat := chat.Ref{Platform: chat.Telegram, ChatID: strconv.Itoa(group)}
	srv.Send(tgtest.Inbound{Chat: tgtest.Chat{ID: group, Type: "supergroup"}, From: tgtest.User{ID: 1}, Text: "@relay_test_bot hello"})

	replicas := []string{"replica-a", "replica-b"}
	replies := make([]adapters.Reply, len(replicas))
	for i, id := range replicas {
		joinAs(t, db, id)
		ad, err := telegram.New(telegram.Options{Token: srv.Token(), APIEndpoint: srv.Endpoint(),
			Delivery: delivery.Options{SharedChats: telegramBudgets(db, id), ShareCheck: 50 * time.Millisecond}})
		if err != nil {
			t.Fatal(err)
		}
		defer ad.Engine().Close()
		replies[i] = ad.Engine().NewReply(context.Background(), chat, adapters.SendOptions{})
	}

	// Both answers stream at once, each step shown before the next comes, as a model's
	// output would be on two replicas answering two members of the group.
	texts := make([]string, len(replicas))
	for step := 1; step <= 3; step++ {
		for i := range replicas {
			texts[i] += fmt.Sprintf("%s says part %d. ", strings.ToUpper(replicas[i][8:]), step)
			replies[i].Update(texts[i])
		}
		want := append([]string(nil), texts...)
		wait.For(t, fmt.Sprintf("step %d of both answers shown in the group", step), func() bool {
			return shows(srv, group, want[0]) && shows(srv, group, want[1])
		})
	}
	var wg sync.WaitGroup
	errs := make([]error, len(replicas))
	for i := range replicas {
		texts[i] += "The end."
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = replies[i].Finish(context.Background(), texts[i], nil)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("%s: final text not delivered: %v", replicas[i], err)
		}
		if !shows(srv, group, texts[i]) {
			t.Errorf("%s: the group does not show the whole answer %q; it shows %q", replicas[i], texts[i], botTexts(srv, group))
		}
	}
	for _, c := range srv.Calls() {
		if c.Code == 429 {
			t.Errorf("Telegram answered %s in the group with 429 (%s): the replicas together overdrew the chat's budget", c.Method, c.Description)
		}
	}
}

func shows(srv *tgtest.Server, chat int64, text string) bool {
	for _, m := range srv.BotMessages(chat) {
		if m.Text == strings.TrimSpace(text) {
			return true
		}
	}
	return false
}

func botTexts(srv *tgtest.Server, chat int64) []string {
	var out []string
	for _, m := range srv.BotMessages(chat) {
		out = append(out, m.Text)
	}
	return out
}

// nullMessenger answers every request at once, so a benchmark measures the engine alone.
type nullMessenger struct{ n int64 }

func (m *nullMessenger) Send(_ context.Context, c chat.Ref, _ string, _ adapters.SendOptions) (adapters.MessageRef, error) {
	return adapters.MessageRef{Chat: c, ID: "1"}, nil
}
func (m *nullMessenger) Edit(context.Context, adapters.MessageRef, string) error { return nil }
func (m *nullMessenger) SendFiles(_ context.Context, c chat.Ref, _ []chat.File, _ string, _ adapters.SendOptions) (adapters.MessageRef, error) {
	return adapters.MessageRef{Chat: c, ID: "1"}, nil
}
func (m *nullMessenger) Typing(context.Context, chat.Ref) error { return nil }

// BenchmarkChatBudgetAlone is what sharing chat budgets costs a replica that is the only one
// delivering to its chats: one reply of one message per op, in memory only ("memory"), with
// SharedChats in a chat already entered ("entered": no database work), and in a new chat every
// time ("new-chat": the Enter round trip; the Leave runs later off the delivery path).
func BenchmarkChatBudgetAlone(b *testing.B) {
	st, _ := pgStore(b, "")
	db := pool(b, st)
	joinAs(b, db, "bench")
	lim := adapters.Limits{MaxLen: 4096, PerChat: adapters.Rate{N: 1 << 30, Per: time.Millisecond}}
	for _, tc := range []struct {
		name    string
		shared  bool
		newChat bool
	}{{"memory", false, false}, {"entered", true, false}, {"new-chat", true, true}} {
		b.Run(tc.name, func(b *testing.B) {
			opts := delivery.Options{}
			if tc.shared {
				opts.SharedChats = NewChatBudgets(db, "bench", ChatBudgetOptions{Bot: BotOf(chat.Telegram, "bench "+tc.name),
					Chat: Window{N: 3, Per: 3 * time.Second}})
			}
			e := delivery.New(&nullMessenger{}, lim, opts)
			ctx := context.Background()
			c := chat.Ref{Platform: chat.Telegram, ChatID: "1"}
			b.ResetTimer()
			for i := range b.N {
				if tc.newChat {
					c.ChatID = strconv.Itoa(i + 2)
				}
				if err := e.Notice(ctx, c, "hello", adapters.SendOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			e.Close() // hands the chats over: off the delivery path, so not timed
		})
	}
}
