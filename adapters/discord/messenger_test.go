package discord_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
	"unicode/utf8"

	"relaybot/adapters"
	"relaybot/adapters/discord"
	"relaybot/chat"
	dtk "relaybot/internal/testkit/discord"
)

func TestLongStreamedAnswerWithinBudgetAndExact(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		hs := startInBubble(t, nil, nil)
		ch := "500000000000000001"
		user, rc := hs.dm(ch, "tell me a long story")
		if rc.in.Kind != adapters.Private || rc.in.Text != "tell me a long story" {
			t.Fatalf("inbound = %+v", rc.in)
		}
		full := text(1900)
		r := rc.out.NewReply(hs.ctx)
		streamInto(r, full, 30, 40*time.Millisecond)
		if err := r.Finish(hs.ctx, full, nil); err != nil {
			t.Fatalf("Finish: %v", err)
		}
		msgs := hs.srv.BotMessages(ch)
		if len(msgs) != 1 {
			t.Fatalf("bot messages = %d, want 1", len(msgs))
		}
		if msgs[0].Content != full {
			t.Errorf("final text differs:\n got %q\nwant %q", msgs[0].Content, full)
		}
		if msgs[0].ReferenceID != user.ID {
			t.Errorf("reply references %q, want the user's message %q", msgs[0].ReferenceID, user.ID)
		}
		if len(msgs[0].Buttons) != 0 {
			t.Errorf("finished reply still shows buttons %+v", msgs[0].Buttons)
		}
		if msgs[0].Edits < 2 {
			t.Errorf("edits = %d: the answer was not streamed", msgs[0].Edits)
		}
		checkBudget(t, hs.srv, ch)
		checkNoPings(t, hs.srv)
	})
}

func TestSixThousandCharacterFinalInThreeMessagesWithBalancedFences(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		hs := startInBubble(t, nil, nil)
		ch := "500000000000000002"
		_, rc := hs.dm(ch, "write code")
		var b strings.Builder
		b.WriteString(text(200) + "\n\n```go\n")
		for utf8.RuneCountInString(b.String()) < 3850 {
			b.WriteString("fmt.Println(\"line number\", i, \"of the generated program\") // ü\n")
		}
		b.WriteString("```\n\n")
		// 5,800 characters with a code block across the first cut: exactly 6,000 cannot fit three
		// messages of 2,000 once the block is closed at the cut and reopened in the next message.
		full := b.String() + text(5800-utf8.RuneCountInString(b.String()))
		full += strings.Repeat(".", 5800-utf8.RuneCountInString(full))
		if n := utf8.RuneCountInString(full); n != 5800 {
			t.Fatalf("test text has %d runes", n)
		}
		r := rc.out.NewReply(hs.ctx)
		r.Update(prefix(full, 500))
		if err := r.Finish(hs.ctx, full, nil); err != nil {
			t.Fatalf("Finish: %v", err)
		}
		msgs := hs.srv.BotMessages(ch)
		if len(msgs) != 3 {
			for _, m := range msgs {
				t.Logf("%d runes: %q ... %q", utf8.RuneCountInString(m.Content), m.Content[:40], m.Content[len(m.Content)-40:])
			}
			t.Fatalf("bot messages = %d, want 3", len(msgs))
		}
		var gotLines []string
		for i, m := range msgs {
			if n := utf8.RuneCountInString(m.Content); n > 2000 {
				t.Errorf("message %d has %d characters", i, n)
			}
			fences := 0
			for _, line := range strings.Split(m.Content, "\n") {
				if strings.HasPrefix(line, "```") {
					fences++
					continue
				}
				gotLines = append(gotLines, strings.Fields(line)...)
			}
			if fences%2 != 0 {
				t.Errorf("message %d has unbalanced code fences:\n%s", i, m.Content)
			}
			if len(m.Buttons) != 0 {
				t.Errorf("message %d keeps buttons", i)
			}
		}
		var wantLines []string
		for _, line := range strings.Split(full, "\n") {
			if !strings.HasPrefix(line, "```") {
				wantLines = append(wantLines, strings.Fields(line)...)
			}
		}
		if !slices.Equal(gotLines, wantLines) {
			t.Errorf("the three messages do not carry the whole text in order")
		}
		if msgs[0].ReferenceID == "" || msgs[1].ReferenceID != "" {
			t.Errorf("only the first message should reference the user's: %q %q", msgs[0].ReferenceID, msgs[1].ReferenceID)
		}
		checkBudget(t, hs.srv, ch)
	})
}

// TestRateLimitStormIsWaitedOut answers four sends and edits of a streaming reply with 429s
// asking for 700 ms each: every one is waited out in full (on the bubble's clock, so exactly)
// and the final text still arrives whole.
func TestRateLimitStormIsWaitedOut(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		hs := startInBubble(t, nil, nil)
		ch := "500000000000000003"
		_, rc := hs.dm(ch, "hi")
		hs.srv.Storm(ch, 4, 700*time.Millisecond)
		full := text(900)
		r := rc.out.NewReply(hs.ctx)
		streamInto(r, full, 60, 30*time.Millisecond)
		if err := r.Finish(hs.ctx, full, nil); err != nil {
			t.Fatalf("Finish: %v", err)
		}
		if got := hs.botText(ch); got != full {
			t.Errorf("final text after the storm:\n got %q\nwant %q", got, full)
		}
		calls := hs.srv.CallsTo(dtk.RouteCreateMessage, dtk.RouteEditMessage)
		limited := 0
		for i, c := range calls {
			if c.Status != 429 {
				continue
			}
			limited++
			if i+1 < len(calls) {
				if gap := calls[i+1].Time.Sub(c.Time); gap < c.RetryAfter {
					t.Errorf("request %d came %s after a 429 asking for %s", i+1, gap, c.RetryAfter)
				}
			}
		}
		if limited != 4 {
			t.Errorf("429s answered = %d, want the 4 of the storm", limited)
		}
	})
}

func TestDeletedMessageFallsBackToNewMessage(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		hs := startInBubble(t, nil, nil)
		ch := "500000000000000004"
		_, rc := hs.dm(ch, "hi")
		full := text(800)
		r := rc.out.NewReply(hs.ctx)
		r.Update(prefix(full, 100))
		hs.waitFor("the first preview", func() bool { return len(hs.srv.BotMessages(ch)) == 1 })
		if err := hs.srv.DeleteMessage(hs.srv.BotMessages(ch)[0].ID); err != nil {
			t.Fatal(err)
		}
		r.Update(prefix(full, 400))
		if err := r.Finish(hs.ctx, full, nil); err != nil {
			t.Fatalf("Finish: %v", err)
		}
		msgs := hs.srv.BotMessages(ch)
		if len(msgs) != 1 || msgs[0].Content != full {
			t.Fatalf("after deleting the reply, the channel shows %d bot messages; want one with the whole answer", len(msgs))
		}
		gone := false
		for _, c := range hs.srv.CallsTo(dtk.RouteEditMessage) {
			gone = gone || c.Status == 404
		}
		if !gone {
			t.Errorf("no edit hit the deleted message: the test did not exercise the fallback")
		}
	})
}

func TestToolRoundShowsTypingAndAttachesFiles(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		hs := startInBubble(t, nil, nil)
		ch := "500000000000000005"
		_, rc := hs.dm(ch, "plot it")
		r := rc.out.NewReply(hs.ctx)
		r.Update("Let me run the plotting tool.")
		hs.waitFor("the first preview", func() bool { return len(hs.srv.BotMessages(ch)) == 1 })
		r.Working(true)
		hs.waitFor("typing", func() bool { return len(hs.srv.CallsTo(dtk.RouteTyping)) > 0 })
		r.Working(false)
		final := "Let me run the plotting tool.\n\nHere is the chart."
		png := append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte{7}, 300)...)
		r.Update(final)
		if err := r.Finish(hs.ctx, final, []chat.File{{Name: "chart.png", MIME: "image/png", Data: png}}); err != nil {
			t.Fatalf("Finish: %v", err)
		}
		msgs := hs.srv.BotMessages(ch)
		if len(msgs) != 1 {
			t.Fatalf("bot messages = %d, want one message with the answer and the chart", len(msgs))
		}
		if msgs[0].Content != final {
			t.Errorf("answer = %q, want %q (text from before the tool round kept)", msgs[0].Content, final)
		}
		if len(msgs[0].Attachments) != 1 || msgs[0].Attachments[0].Filename != "chart.png" || !bytes.Equal(msgs[0].Attachments[0].Data, png) {
			t.Errorf("answer attachments = %+v, want chart.png", msgs[0].Attachments)
		}
		if len(msgs[0].Buttons) != 0 {
			t.Errorf("finished reply still shows buttons %+v", msgs[0].Buttons)
		}
		// The chart came with the request that set the final text, not with an edit of its own.
		var withFiles []dtk.Call
		for _, c := range hs.srv.CallsTo(dtk.RouteCreateMessage, dtk.RouteEditMessage) {
			if len(c.Files) > 0 {
				withFiles = append(withFiles, c)
			}
		}
		if len(withFiles) != 1 || withFiles[0].Route != dtk.RouteEditMessage || !strings.Contains(string(withFiles[0].Body), `"content":"Let me run the plotting tool.\n\nHere is the chart."`) {
			t.Errorf("requests with files = %d, want one edit that also sets the final text", len(withFiles))
		}
		if typing := hs.srv.CallsTo(dtk.RouteTyping); typing[0].ChannelID != ch {
			t.Errorf("typing shown in %s, want %s", typing[0].ChannelID, ch)
		}
		checkBudget(t, hs.srv, ch)
		checkNoPings(t, hs.srv)
	})
}

// pngs returns n small distinct PNG files named img0.png, img1.png, ...
func pngs(n int) []chat.File {
	var files []chat.File
	for i := range n {
		data := append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte{byte(i)}, 100+i)...)
		files = append(files, chat.File{Name: fmt.Sprintf("img%d.png", i), MIME: "image/png", Data: data})
	}
	return files
}

func attachmentNames(m dtk.Message) []string {
	var names []string
	for _, a := range m.Attachments {
		names = append(names, a.Filename)
	}
	return names
}

func fileNames(files []chat.File) []string {
	var names []string
	for _, f := range files {
		names = append(names, f.Name)
	}
	return names
}

func TestLongFinalCarriesFilesOnItsLastPart(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		files     int
		wantMsgs  int
		onLast    int // files on the last part of the text
		followUps []int
	}{
		{"two files", 2, 3, 2, nil},
		{"more than one message holds", 12, 4, 10, []int{2}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				hs := startInBubble(t, nil, nil)
				ch := fmt.Sprintf("50000000000000002%d", i)
				_, rc := hs.dm(ch, "write a report with charts")
				full := text(5000)
				files := pngs(tc.files)
				r := rc.out.NewReply(hs.ctx)
				r.Update(prefix(full, 300))
				if err := r.Finish(hs.ctx, full, files); err != nil {
					t.Fatalf("Finish: %v", err)
				}
				msgs := hs.srv.BotMessages(ch)
				if len(msgs) != tc.wantMsgs {
					t.Fatalf("bot messages = %d, want %d", len(msgs), tc.wantMsgs)
				}
				var texts []string
				for j, m := range msgs[:3] {
					texts = append(texts, m.Content)
					want := 0
					if j == 2 {
						want = tc.onLast
					}
					if len(m.Attachments) != want {
						t.Errorf("part %d carries %d files, want %d", j, len(m.Attachments), want)
					}
				}
				if got := strings.Join(texts, " "); strings.Join(strings.Fields(got), " ") != strings.Join(strings.Fields(full), " ") {
					t.Errorf("the three parts do not carry the whole text")
				}
				var got []string
				for j, m := range msgs {
					got = append(got, attachmentNames(m)...)
					if j >= 3 {
						if m.Content != "" || len(m.Attachments) != tc.followUps[j-3] {
							t.Errorf("follow-up %d: %q with %d files, want %d files alone", j-3, m.Content, len(m.Attachments), tc.followUps[j-3])
						}
					}
				}
				if !slices.Equal(got, fileNames(files)) {
					t.Errorf("files shown %v, want %v in order", got, fileNames(files))
				}
				checkBudget(t, hs.srv, ch)
				checkNoPings(t, hs.srv)
			})
		})
	}
}

func TestRefusedAttachStillDeliversTheFiles(t *testing.T) {
	t.Parallel()
	small := pngs(1)[0]
	big := chat.File{Name: "huge.bin", MIME: "application/octet-stream", Data: bytes.Repeat([]byte{1}, 2048)}
	cases := []struct {
		name      string
		fault     int // injected answer to the attaching edit; 0 for none
		files     []chat.File
		wantFiles []string // the files delivered, each in a message of its own after the text
		wantErr   string   // a file that could not be delivered
	}{
		{"HTTP 413", 413, []chat.File{small}, []string{"img0.png"}, ""},
		{"HTTP 400", 400, []chat.File{small}, []string{"img0.png"}, ""},
		{"one file over the upload limit", 0, []chat.File{small, big}, []string{"img0.png"}, "huge.bin"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				hs := startWith(t, dtk.Config{InMemory: true, MaxUploadBytes: 1024}, nil, nil)
				ch := fmt.Sprintf("50000000000000003%d", i)
				_, rc := hs.dm(ch, "draw it")
				r := rc.out.NewReply(hs.ctx)
				r.Update("Drawing")
				hs.waitFor("the first preview", func() bool { return len(hs.srv.BotMessages(ch)) == 1 })
				if tc.fault != 0 {
					hs.srv.FailNext(dtk.RouteEditMessage, tc.fault, 1)
				}
				final := "Drawing done: here it is."
				err := r.Finish(hs.ctx, final, tc.files)
				switch {
				case tc.wantErr == "" && err != nil:
					t.Fatalf("Finish: %v", err)
				case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
					t.Fatalf("Finish: %v, want an error naming %s", err, tc.wantErr)
				}
				msgs := hs.srv.BotMessages(ch)
				if len(msgs) != 1+len(tc.wantFiles) {
					t.Fatalf("bot messages = %d, want the answer and %d file messages", len(msgs), len(tc.wantFiles))
				}
				if msgs[0].Content != final || len(msgs[0].Attachments) != 0 || len(msgs[0].Buttons) != 0 {
					t.Errorf("answer shows %q with files %v and buttons %v, want the final text alone", msgs[0].Content, attachmentNames(msgs[0]), msgs[0].Buttons)
				}
				for j, name := range tc.wantFiles {
					if got := attachmentNames(msgs[1+j]); !slices.Equal(got, []string{name}) {
						t.Errorf("file message %d shows %v, want %s", j, got, name)
					}
				}
				refused := 0
				for _, c := range hs.srv.CallsTo(dtk.RouteEditMessage) {
					if len(c.Files) > 0 && c.Status >= 400 {
						refused++
					}
				}
				if refused != 1 {
					t.Errorf("refused attaching edits = %d, want 1: the test did not exercise the fallback", refused)
				}
				checkBudget(t, hs.srv, ch)
				checkNoPings(t, hs.srv)
			})
		})
	}
}

func TestTwoRepliesInOneChannelShareTheBudget(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		hs := startInBubble(t, nil, nil)
		ch := "500000000000000006"
		_, rc1 := hs.post(dtk.UserMessage{ChannelID: ch, GuildID: guildID, Content: "<@" + hs.srv.BotID() + "> one", MentionBot: true})
		_, rc2 := hs.post(dtk.UserMessage{ChannelID: ch, GuildID: guildID, Content: "<@" + hs.srv.BotID() + "> two", MentionBot: true, AuthorID: "400000000000000002"})
		texts := []string{text(1200), text(1500)}
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, rc := range []received{rc1, rc2} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rc.out.NewReply(hs.ctx)
				streamInto(r, texts[i], 40, 40*time.Millisecond)
				errs[i] = r.Finish(hs.ctx, texts[i], nil)
			}()
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("reply %d: %v", i, err)
			}
		}
		var got []string
		for _, m := range hs.srv.BotMessages(ch) {
			got = append(got, m.Content)
		}
		slices.Sort(got)
		want := slices.Clone(texts)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("channel shows %d bot messages that are not the two answers", len(got))
		}
		checkBudget(t, hs.srv, ch)
	})
}

func TestEveryoneInModelTextPingsNoOne(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		hs := startInBubble(t, nil, nil)
		ch := "500000000000000007"
		_, rc := hs.post(dtk.UserMessage{ChannelID: ch, GuildID: guildID, Content: "<@" + hs.srv.BotID() + "> ping", MentionBot: true})
		evil := "Sure! @everyone @here look at this, <@&600000000000000001> and <@" + userID + ">"
		r := rc.out.NewReply(hs.ctx)
		r.Update(evil[:20])
		if err := r.Finish(hs.ctx, evil, nil); err != nil {
			t.Fatal(err)
		}
		if err := rc.out.Notice(hs.ctx, "@everyone notice"); err != nil {
			t.Fatal(err)
		}
		for _, m := range hs.srv.BotMessages(ch) {
			if m.MentionEveryone || len(m.MentionRoles) > 0 || len(m.MentionUsers) > 0 {
				t.Errorf("message %q pinged everyone=%v roles=%v users=%v", m.Content, m.MentionEveryone, m.MentionRoles, m.MentionUsers)
			}
		}
		if got := hs.srv.BotMessages(ch)[0].Content; got != evil {
			t.Errorf("text = %q, want it shown unchanged %q", got, evil)
		}
		checkNoPings(t, hs.srv)
	})
}

// TestLinksToAppSchemesAreShownAsText: a masked link Discord would open in another app
// (tg://proxy) reaches the channel inert, a web link as written.
func TestLinksToAppSchemesAreShownAsText(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		hs := startInBubble(t, nil, nil)
		ch := "500000000000000008"
		_, rc := hs.post(dtk.UserMessage{ChannelID: ch, GuildID: guildID, Content: "<@" + hs.srv.BotID() + "> links", MentionBot: true})
		text := "[Verify](tg://proxy?server=evil.example) or [docs](https://example.com)"
		if err := rc.out.NewReply(hs.ctx).Finish(hs.ctx, text, nil); err != nil {
			t.Fatal(err)
		}
		want := "[Verify]（tg://proxy?server=evil.example) or [docs](https://example.com)"
		if got := hs.srv.BotMessages(ch)[0].Content; got != want {
			t.Errorf("text = %q, want %q", got, want)
		}
	})
}

func TestErrorsMapOntoAdapterErrors(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		hs := startInBubble(t, nil, nil)
		chat := chat.Ref{Platform: chat.Discord, ChatID: "540000000000000001"}
		hs.srv.AddChannel(dtk.Channel{ID: chat.ChatID, Type: dtk.ChannelDM})
		ctx, cancel := context.WithTimeout(hs.ctx, 10*time.Second)
		defer cancel()
		ref, err := discord.MessengerOf(hs.a).Send(ctx, chat, "hello", adapters.SendOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := hs.srv.DeleteMessage(ref.ID); err != nil {
			t.Fatal(err)
		}
		if err := discord.MessengerOf(hs.a).Edit(ctx, ref, "x"); !errorsIs(err, adapters.ErrMessageGone) {
			t.Errorf("edit of a deleted message: %v, want ErrMessageGone", err)
		}
		for _, status := range []int{500, 502, 503} {
			hs.srv.FailNext(dtk.RouteCreateMessage, status, 1)
			if _, err := discord.MessengerOf(hs.a).Send(ctx, chat, "x", adapters.SendOptions{}); !errorsIs(err, adapters.ErrTemporary) {
				t.Errorf("HTTP %d: %v, want ErrTemporary", status, err)
			}
		}
		if _, err := discord.MessengerOf(hs.a).Send(ctx, chat, strings.Repeat("a", 2001), adapters.SendOptions{}); !errorsIs(err, adapters.ErrTooLong) {
			t.Errorf("2001 characters: %v, want ErrTooLong", err)
		}
		hs.srv.Storm(chat.ChatID, 1, 1500*time.Millisecond)
		_, err = discord.MessengerOf(hs.a).Send(ctx, chat, "x", adapters.SendOptions{})
		var rl *adapters.RateLimitError
		if !errorsAs(err, &rl) || rl.RetryAfter != 1500*time.Millisecond {
			t.Errorf("429: %v, want RateLimitError after 1.5s", err)
		}
	})
}

func TestDeletedMessageIsReplacedWithTextAndFiles(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		hs := startInBubble(t, nil, nil)
		ch := "500000000000000041"
		user, rc := hs.dm(ch, "draw it")
		r := rc.out.NewReply(hs.ctx)
		r.Update("Drawing")
		hs.waitFor("the first preview", func() bool { return len(hs.srv.BotMessages(ch)) == 1 })
		if err := hs.srv.DeleteMessage(hs.srv.BotMessages(ch)[0].ID); err != nil {
			t.Fatal(err)
		}
		final := "Drawing done."
		files := pngs(2)
		if err := r.Finish(hs.ctx, final, files); err != nil {
			t.Fatalf("Finish: %v", err)
		}
		msgs := hs.srv.BotMessages(ch)
		if len(msgs) != 1 || msgs[0].Content != final || !slices.Equal(attachmentNames(msgs[0]), fileNames(files)) {
			t.Fatalf("after deleting the reply the channel shows %d bot messages; want one with the answer and both files", len(msgs))
		}
		if msgs[0].ReferenceID != user.ID {
			t.Errorf("the new message references %q, want the user's message %q", msgs[0].ReferenceID, user.ID)
		}
		checkBudget(t, hs.srv, ch)
		checkNoPings(t, hs.srv)
	})
}

func TestProxyHTMLRateLimitIsWaitedOut(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		route dtk.Route
	}{
		{"final edit", dtk.RouteEditMessage},
		{"final create", dtk.RouteCreateMessage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				hs := startInBubble(t, nil, nil)
				ch := map[dtk.Route]string{dtk.RouteEditMessage: "500000000000000051", dtk.RouteCreateMessage: "500000000000000052"}[tc.route]
				_, rc := hs.dm(ch, "hi")
				full := "The whole answer, delivered despite a proxy's HTML 429."
				r := rc.out.NewReply(hs.ctx)
				if tc.route == dtk.RouteEditMessage {
					r.Update("The whole")
					hs.waitFor("the first preview", func() bool { return len(hs.srv.BotMessages(ch)) == 1 })
				}
				hs.srv.ProxyRateLimit(tc.route, 1, time.Second)
				if err := r.Finish(hs.ctx, full, nil); err != nil {
					t.Fatalf("Finish after an HTML 429: %v", err)
				}
				msgs := hs.srv.BotMessages(ch)
				if len(msgs) != 1 || msgs[0].Content != full {
					var got []string
					for _, m := range msgs {
						got = append(got, m.Content)
					}
					t.Fatalf("channel shows %q, want the final text exactly once", got)
				}
				if limited := limitedCalls(hs.srv, tc.route); limited != 1 {
					t.Errorf("HTML 429s answered = %d, want 1", limited)
				}
				// On the bubble's clock the retry comes exactly when the Retry-After header says.
				calls := hs.srv.CallsTo(tc.route)
				for i, c := range calls[:len(calls)-1] {
					if gap := calls[i+1].Time.Sub(c.Time); c.Status == 429 && gap < time.Second {
						t.Errorf("the request after the HTML 429 came %s later, want the Retry-After's 1 s", gap)
					}
				}
			})
		})
	}
}

// A long answer keeps moving: once the streamed text outgrows a message, that message is
// finished at a clean boundary and streaming goes on in the next one, so the user reads the
// first part while the model is still writing the rest. Only the message still streaming
// carries the Stop button, and no finished part is edited again by the final pass.
func TestTwelveThousandCharacterAnswerRollsOverWhileTheModelWrites(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		hs := startInBubble(t, nil, nil)
		ch := "500000000000000031"
		_, rc := hs.dm(ch, "write a long essay")
		full := text(12000)
		r := rc.out.NewReply(hs.ctx)
		streamInto(r, full, 40, 20*time.Millisecond)
		modelEnd := time.Now()
		if err := r.Finish(hs.ctx, full, nil); err != nil {
			t.Fatalf("Finish: %v", err)
		}
		msgs := hs.srv.BotMessages(ch)
		if len(msgs) < 6 {
			t.Fatalf("bot messages = %d, want at least 6 for 12,000 characters", len(msgs))
		}
		var got []string
		for i, m := range msgs {
			if n := utf8.RuneCountInString(m.Content); n > 2000 {
				t.Errorf("message %d has %d characters", i, n)
			}
			if strings.Contains(m.Content, "▌") || len(m.Buttons) != 0 {
				t.Errorf("message %d still looks unfinished: cursor or buttons %+v", i, m.Buttons)
			}
			got = append(got, strings.Fields(m.Content)...)
		}
		if !slices.Equal(got, strings.Fields(full)) {
			t.Errorf("the messages do not carry the whole answer in order, once")
		}
		// The first message took its final text before the model ended, and was not touched after.
		var finishedAt time.Time
		for _, c := range hs.srv.CallsTo(dtk.RouteCreateMessage, dtk.RouteEditMessage) {
			if c.Status != 200 || (c.MessageID != msgs[0].ID && c.Route == dtk.RouteEditMessage) {
				continue
			}
			if c.Route == dtk.RouteCreateMessage && !bytes.Contains(c.Body, []byte(`"message_reference"`)) {
				continue
			}
			if bytes.Contains(c.Body, []byte(jsonText(msgs[0].Content))) {
				if !finishedAt.IsZero() {
					t.Errorf("message 1 was sent its final text twice (again at %s)", c.Time.Format("15:04:05.000"))
				}
				finishedAt = c.Time
			}
		}
		if finishedAt.IsZero() || !finishedAt.Before(modelEnd) {
			t.Errorf("message 1 got its final text at %s, the model ended at %s: the user watched a frozen head",
				finishedAt.Format("15:04:05.000"), modelEnd.Format("15:04:05.000"))
		}
		checkBudget(t, hs.srv, ch)
	})
}

// jsonText is s as it appears inside a JSON string.
func jsonText(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}

// With Components V2 a reply is a container with a text display (up to 4,000 characters) and,
// while it streams, the Stop button in the same message; a tall answer is split at 17 lines as
// well, so the client never clips it. Every line arrives once, in order.
func TestComponentsV2RepliesAreContainersSplitAtSeventeenLines(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		hs := startInBubble(t, func(o *discord.Options) { o.ComponentsV2 = true }, nil)
		ch := "500000000000000041"
		_, rc := hs.dm(ch, "list things")
		var b strings.Builder
		for i := range 60 {
			fmt.Fprintf(&b, "%d. item number %d of a tall list\n", i+1, i+1)
		}
		full := strings.TrimSpace(b.String())
		r := rc.out.NewReply(hs.ctx)
		r.Update(prefix(full, 200))
		waitForServer(t, hs, "the streaming container with its Stop button", func() bool {
			ms := hs.srv.BotMessages(ch)
			return len(ms) == 1 && len(ms[0].Buttons) == 1 && ms[0].Buttons[0].CustomID == discord.StopButtonID
		})
		streamInto(r, full, 60, 30*time.Millisecond)
		if err := r.Finish(hs.ctx, full, nil); err != nil {
			t.Fatalf("Finish: %v", err)
		}
		msgs := hs.srv.BotMessages(ch)
		if len(msgs) < 4 {
			t.Fatalf("%d messages for 60 lines, want at least 4 of at most 17 lines", len(msgs))
		}
		var got []string
		for i, m := range msgs {
			if m.Flags&dtk.FlagComponentsV2 == 0 {
				t.Errorf("message %d is not a Components V2 message (flags %d)", i, m.Flags)
			}
			lines := strings.Split(m.Content, "\n")
			if len(lines) > 17 {
				t.Errorf("message %d has %d lines; the client clips it", i, len(lines))
			}
			if len(m.Buttons) != 0 || strings.Contains(m.Content, "▌") {
				t.Errorf("message %d still looks unfinished", i)
			}
			got = append(got, lines...)
		}
		if !slices.Equal(got, strings.Split(full, "\n")) {
			t.Errorf("the messages do not carry every line in order, once:\n%q", got)
		}
		checkBudget(t, hs.srv, ch)
	})
}
