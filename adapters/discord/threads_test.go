package discord_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"relaybot/adapters"
	"relaybot/adapters/discord"
	dtk "relaybot/internal/testkit/discord"
	"relaybot/internal/testkit/logbuf"
)

const threadsCh = "510000000000000077"

// answerIt is a handler that answers every message with "answer: " and its text, streamed.
func answerIt(ctx context.Context, in adapters.Inbound, out adapters.Responder) {
	r := out.NewReply(ctx)
	r.Update("answer:")
	_ = r.Finish(ctx, "answer: "+in.Text, nil)
}

// threadsOn turns threads on, archiving after an hour.
func threadsOn(o *discord.Options) { o.Threads, o.AutoArchive = true, 60 }

// mention posts a message mentioning the bot in ch and returns it with what the handler got.
func (hs *harness) mention(ch, text string) (dtk.Message, received) {
	hs.t.Helper()
	return hs.post(dtk.UserMessage{ChannelID: ch, GuildID: guildID, Content: "<@" + hs.srv.BotID() + "> " + text, MentionBot: true})
}

func TestAMentionOpensAThreadWhereTheConversationContinues(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		hs := startInBubble(t, threadsOn, answerIt)
		hs.srv.AddChannel(dtk.Channel{ID: threadsCh, GuildID: guildID, Type: dtk.ChannelGuildText})

		q, got := hs.mention(threadsCh, "how do tides work?\nand why twice a day")
		in := got.in
		if in.Chat.ChatID != q.ID || in.ParentChatID != threadsCh || !in.OpensThread {
			t.Fatalf("the question was handed over in chat %s (parent %q, opens %v), want the thread %s of channel %s",
				in.Chat.ChatID, in.ParentChatID, in.OpensThread, q.ID, threadsCh)
		}
		th, ok := hs.srv.Channel(q.ID)
		if !ok || th.Type != dtk.ChannelPublicThread || th.ParentID != threadsCh || th.OwnerID != hs.srv.BotID() {
			t.Fatalf("no public thread of the bot on the question: %+v (found %v)", th, ok)
		}
		if th.Name != "how do tides work?" || th.AutoArchive != 60 {
			t.Errorf("thread named %q archiving after %d min, want the question's first line and 60", th.Name, th.AutoArchive)
		}
		if got := hs.botText(q.ID); got != "answer: how do tides work?\nand why twice a day" {
			t.Errorf("the thread shows %q, want the answer", got)
		}
		if got := hs.botText(threadsCh); got != "" {
			t.Errorf("the channel shows %q, want nothing but the question", got)
		}

		// A follow-up in the thread needs no mention and continues its conversation.
		_, follow := hs.post(dtk.UserMessage{ChannelID: q.ID, GuildID: guildID, Content: "and the moon?"})
		if follow.in.Chat.ChatID != q.ID || follow.in.ParentChatID != threadsCh || follow.in.OpensThread {
			t.Fatalf("the follow-up was handed over in %+v, want the same thread, opening none", follow.in)
		}
		hs.waitFor("the follow-up's answer", func() bool { return strings.Contains(hs.botText(q.ID), "answer: and the moon?") })

		// The model's title renames the thread once.
		titler, ok := got.out.(adapters.ThreadTitler)
		if !ok {
			t.Fatal("the responder of a message that opened a thread cannot title it")
		}
		if err := titler.TitleThread(hs.ctx, "Tides   and the moon"); err != nil {
			t.Fatal(err)
		}
		if th, _ := hs.srv.Channel(q.ID); th.Name != "Tides and the moon" {
			t.Errorf("thread renamed to %q", th.Name)
		}

		// A second mention in the channel opens another thread: another conversation.
		q2, got2 := hs.mention(threadsCh, "unrelated: what is rust?")
		if got2.in.Chat.ChatID != q2.ID || q2.ID == q.ID {
			t.Fatalf("the second question went to %s", got2.in.Chat.ChatID)
		}
		hs.waitFor("the second thread's answer", func() bool { return hs.botText(q2.ID) == "answer: unrelated: what is rust?" })
		if n := len(hs.srv.Threads(threadsCh)); n != 2 {
			t.Errorf("%d threads in the channel, want 2", n)
		}
		for _, c := range hs.srv.CallsTo(dtk.RouteCreateMessage) {
			if strings.Contains(string(c.Body), `"message_id":"`+q.ID+`"`) {
				t.Errorf("an answer in a thread references the question in the parent channel: %s", c.Body)
			}
		}
	})
}

func TestCommandsAndMessagesInThreadsOpenNoThread(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		other := "510000000000000078"
		hs := startInBubble(t, func(o *discord.Options) {
			threadsOn(o)
			o.ThreadChannels = []string{threadsCh}
		}, answerIt)
		hs.srv.AddChannel(dtk.Channel{ID: threadsCh, GuildID: guildID, Type: dtk.ChannelGuildText})
		hs.srv.AddChannel(dtk.Channel{ID: other, GuildID: guildID, Type: dtk.ChannelGuildText})
		hs.srv.AddChannel(dtk.Channel{ID: "510000000000000079", GuildID: guildID, ParentID: threadsCh, Type: dtk.ChannelPublicThread, OwnerID: userID})

		for _, tc := range []struct{ name, ch, text string }{
			{"a command", threadsCh, "/usage"},
			{"a channel not listed", other, "hello"},
			{"a member's thread", "510000000000000079", "hello"},
		} {
			m, got := hs.mention(tc.ch, tc.text)
			if got.in.OpensThread || got.in.Chat.ChatID != tc.ch {
				t.Errorf("%s: handed over in %s opening a thread (%v)", tc.name, got.in.Chat.ChatID, got.in.OpensThread)
			}
			if _, ok := hs.srv.Channel(m.ID); ok {
				t.Errorf("%s opened a thread", tc.name)
			}
		}
		// In a member's thread, a message without a mention is not for the bot.
		if _, err := hs.srv.Post(dtk.UserMessage{ChannelID: "510000000000000079", GuildID: guildID, AuthorID: userID, Content: "chatting"}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		select {
		case r := <-hs.h.got:
			t.Errorf("a message without a mention in a member's thread reached the handler: %q", r.in.Text)
		default:
		}
	})
}

func TestThreadsOffAnswersInTheChannel(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		hs := startInBubble(t, nil, answerIt)
		hs.srv.AddChannel(dtk.Channel{ID: threadsCh, GuildID: guildID, Type: dtk.ChannelGuildText})
		q, got := hs.mention(threadsCh, "hello")
		if got.in.Chat.ChatID != threadsCh || got.in.OpensThread || got.in.ParentChatID != "" {
			t.Fatalf("handed over as %+v, want the channel's conversation", got.in)
		}
		hs.waitFor("the answer", func() bool { return hs.botText(threadsCh) == "answer: hello" })
		if n := len(hs.srv.CallsTo(dtk.RouteStartThread)); n != 0 {
			t.Errorf("%d thread openings with threads off", n)
		}
		if bm := hs.srv.BotMessages(threadsCh); bm[0].ReferenceID != q.ID {
			t.Errorf("the answer replies to %q, want the question %s", bm[0].ReferenceID, q.ID)
		}
		if _, ok := got.out.(adapters.ThreadTitler); ok {
			t.Error("a responder without a thread offers to title one")
		}
	})
}

func TestAThreadDiscordRefusesStillGetsItsAnswerInTheChannel(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var logs logbuf.Buffer
		hs := startInBubble(t, func(o *discord.Options) {
			threadsOn(o)
			o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		}, answerIt)
		hs.srv.AddChannel(dtk.Channel{ID: threadsCh, GuildID: guildID, Type: dtk.ChannelGuildText})
		hs.srv.FailNext(dtk.RouteStartThread, http.StatusForbidden, 1) // the bot lacks CREATE_PUBLIC_THREADS

		q, got := hs.mention(threadsCh, "hello")
		hs.waitFor("the answer in the channel", func() bool { return hs.botText(threadsCh) == "answer: hello" })
		if bm := hs.srv.BotMessages(threadsCh); bm[0].ReferenceID != q.ID {
			t.Errorf("the answer replies to %q, want the question %s", bm[0].ReferenceID, q.ID)
		}
		if !strings.Contains(logs.String(), "could not open a thread") || !strings.Contains(logs.String(), "403") {
			t.Errorf("the log does not say why the answer is in the channel:\n%s", logs.String())
		}
		err := got.out.(adapters.ThreadTitler).TitleThread(hs.ctx, "A title")
		if !errors.Is(err, adapters.ErrNoThread) {
			t.Errorf("titling a thread that was never opened: %v, want ErrNoThread", err)
		}
	})
}

// Replicas (here: three adapters that each receive the message, with no ledger between them to
// pick one) never open two threads for one message: Discord refuses a second thread (160004)
// and each finds the one there and answers in it.
func TestReplicasNeverOpenTwoThreadsForOneMessage(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		hs := startInBubble(t, threadsOn, answerIt)
		hs2 := join(t, hs.srv, threadsOn, answerIt)
		hs3 := join(t, hs.srv, threadsOn, answerIt)
		hs.srv.AddChannel(dtk.Channel{ID: threadsCh, GuildID: guildID, Type: dtk.ChannelGuildText})
		synctest.Wait()

		q, _ := hs.mention(threadsCh, "one question")
		hs2.next()
		hs3.next()
		synctest.Wait()
		if n := len(hs.srv.Threads(threadsCh)); n != 1 {
			t.Fatalf("%d threads for one message", n)
		}
		var refused int
		for _, c := range hs.srv.CallsTo(dtk.RouteStartThread) {
			if c.Status == http.StatusBadRequest {
				refused++
			}
		}
		if refused != 2 {
			t.Errorf("%d openings refused as already there, want 2", refused)
		}
		if n := len(hs.srv.BotMessages(q.ID)); n != 3 {
			t.Errorf("%d answers in the thread, want each replica's (no ledger here to pick one)", n)
		}
		if got := hs.botText(threadsCh); got != "" {
			t.Errorf("the channel shows %q", got)
		}
	})
}

func TestAMessageInALockedThreadIsNotDropped(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name          string
		manageThreads bool
		deleted       bool
	}{{"reopened where the bot may", true, false}, {"answered in the channel", false, false}, {"deleted: answered in the channel", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				var mu sync.Mutex
				lockNext := false
				var srv *dtk.Server
				hs := startWith(t, dtk.Config{InMemory: true, ManageThreads: tc.manageThreads}, threadsOn,
					func(ctx context.Context, in adapters.Inbound, out adapters.Responder) {
						mu.Lock()
						lock := lockNext
						mu.Unlock()
						switch {
						case lock && tc.deleted: // a moderator deletes the thread while the bot thinks
							_ = srv.DeleteChannel(in.Chat.ChatID)
						case lock: // a moderator archives and locks the thread while the bot thinks
							_ = srv.ArchiveThread(in.Chat.ChatID, true)
						}
						answerIt(ctx, in, out)
					})
				srv = hs.srv
				hs.srv.AddChannel(dtk.Channel{ID: threadsCh, GuildID: guildID, Type: dtk.ChannelGuildText})
				q, _ := hs.mention(threadsCh, "first")
				hs.waitFor("the first answer", func() bool { return hs.botText(q.ID) == "answer: first" })

				mu.Lock()
				lockNext = true
				mu.Unlock()
				hs.post(dtk.UserMessage{ChannelID: q.ID, GuildID: guildID, Content: "second"})
				synctest.Wait()
				th, _ := hs.srv.Channel(q.ID)
				if tc.manageThreads && !tc.deleted {
					if th.Archived || !strings.Contains(hs.botText(q.ID), "answer: second") {
						t.Errorf("thread archived %v, showing %q: want it reopened with the answer", th.Archived, hs.botText(q.ID))
					}
					return
				}
				got := hs.botText(threadsCh)
				if !strings.Contains(got, "answer: second") || !strings.Contains(got, "thread is closed") {
					t.Errorf("the channel shows %q, want the answer with a note that the thread is closed", got)
				}
			})
		})
	}
}

func TestAnArchiveDurationDiscordRefusesIsRefusedAtStart(t *testing.T) {
	t.Parallel()
	if _, err := discord.New(discord.Options{Token: "x", Threads: true, AutoArchive: 90}); err == nil {
		t.Error("an archive duration Discord does not take was accepted")
	}
}

// Opening a thread is paced like every request: a 429 on it is waited out, and the thread is
// opened and answered in after it.
func TestAThreadOpeningRateLimitedIsWaitedOut(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		hs := startInBubble(t, threadsOn, answerIt)
		hs.srv.AddChannel(dtk.Channel{ID: threadsCh, GuildID: guildID, Type: dtk.ChannelGuildText})
		hs.srv.Storm(threadsCh, 1, 2*time.Second)
		q, _ := hs.mention(threadsCh, "hello")
		hs.waitFor("the answer in the thread", func() bool { return hs.botText(q.ID) == "answer: hello" })
		calls := hs.srv.CallsTo(dtk.RouteStartThread)
		if len(calls) != 2 || calls[0].Status != http.StatusTooManyRequests || calls[1].Status != http.StatusCreated {
			t.Fatalf("thread openings answered %v, want a 429 then the thread", statuses(calls))
		}
		if waited := calls[1].Time.Sub(calls[0].Time); waited < 2*time.Second {
			t.Errorf("the opening was tried again %v after the 429, want its retry_after (2 s)", waited)
		}
	})
}

func statuses(calls []dtk.Call) []int {
	var out []int
	for _, c := range calls {
		out = append(out, c.Status)
	}
	return out
}

// @bot /new in a channel opens a new thread, named after /new's words or "New conversation",
// and the command is handed over in it.
func TestNewInAChannelOpensANewThread(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		hs := startInBubble(t, threadsOn, func(ctx context.Context, in adapters.Inbound, out adapters.Responder) {
			_ = out.Notice(ctx, "Started a new conversation.")
		})
		hs.srv.AddChannel(dtk.Channel{ID: threadsCh, GuildID: guildID, Type: dtk.ChannelGuildText})
		for _, tc := range []struct{ text, name string }{{"/new", "New conversation"}, {"/new tides and moons", "tides and moons"}} {
			m, got := hs.mention(threadsCh, tc.text)
			if got.in.Command != "new" || !got.in.OpensThread || got.in.Chat.ChatID != m.ID {
				t.Fatalf("%s handed over as %+v, want in the thread it opens", tc.text, got.in)
			}
			hs.waitFor("the notice in the thread", func() bool { return hs.botText(m.ID) == "Started a new conversation." })
			if th, _ := hs.srv.Channel(m.ID); th.Name != tc.name {
				t.Errorf("%s opened a thread named %q, want %q", tc.text, th.Name, tc.name)
			}
			if got.in.TitlesThread {
				t.Errorf("%s's notice would title its thread", tc.text)
			}
			// The first question in the thread titles it; the next one does not.
			for i, want := range []bool{true, false} {
				_, q := hs.post(dtk.UserMessage{ChannelID: m.ID, GuildID: guildID, Content: "question"})
				if q.in.TitlesThread != want {
					t.Errorf("question %d in /new's thread titles it: %v, want %v", i, q.in.TitlesThread, want)
				}
				if _, ok := q.out.(adapters.ThreadTitler); !ok {
					t.Errorf("question %d's responder cannot title the thread", i)
				}
			}
		}
	})
}
