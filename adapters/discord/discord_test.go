package discord_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"relaybot/adapters"
	"relaybot/adapters/discord"
	"relaybot/chat"
	dtk "relaybot/internal/testkit/discord"
	"relaybot/internal/testkit/wait"
)

func TestLongStreamedAnswerWithinBudgetAndExact(t *testing.T) {
	t.Parallel()
	hs := start(t, nil, nil)
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
}

func TestSixThousandCharacterFinalInThreeMessagesWithBalancedFences(t *testing.T) {
	t.Parallel()
	hs := start(t, nil, nil)
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
}

func TestRateLimitStormIsWaitedOut(t *testing.T) {
	t.Parallel()
	hs := start(t, nil, nil)
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
			if gap := calls[i+1].Time.Sub(c.Time); gap < c.RetryAfter-50*time.Millisecond {
				t.Errorf("request %d came %s after a 429 asking for %s", i+1, gap, c.RetryAfter)
			}
		}
	}
	if limited != 4 {
		t.Errorf("429s answered = %d, want the 4 of the storm", limited)
	}
}

func TestDeletedMessageFallsBackToNewMessage(t *testing.T) {
	t.Parallel()
	hs := start(t, nil, nil)
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
}

func TestToolRoundShowsTypingAndAttachesFiles(t *testing.T) {
	t.Parallel()
	hs := start(t, nil, nil)
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
			hs := start(t, nil, nil)
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
			hs := startWith(t, dtk.Config{MaxUploadBytes: 1024}, nil, nil)
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
	}
}

func TestTwoRepliesInOneChannelShareTheBudget(t *testing.T) {
	t.Parallel()
	hs := start(t, nil, nil)
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
}

func TestEveryoneInModelTextPingsNoOne(t *testing.T) {
	t.Parallel()
	hs := start(t, nil, nil)
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
}

// TestLinksToAppSchemesAreShownAsText: a masked link Discord would open in another app
// (tg://proxy) reaches the channel inert, a web link as written.
func TestLinksToAppSchemesAreShownAsText(t *testing.T) {
	t.Parallel()
	hs := start(t, nil, nil)
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
}

func TestStopButtonReachesHandlerAsStop(t *testing.T) {
	t.Parallel()
	hs := start(t, nil, nil)
	ch := "500000000000000008"
	_, rc := hs.post(dtk.UserMessage{ChannelID: ch, GuildID: guildID, Content: "<@" + hs.srv.BotID() + "> go", MentionBot: true})
	r := rc.out.NewReply(hs.ctx)
	r.Update("Thinking about a very long answer")
	hs.waitFor("the streaming message", func() bool { return len(hs.srv.BotMessages(ch)) == 1 })
	msg := hs.srv.BotMessages(ch)[0]
	if len(msg.Buttons) != 1 || msg.Buttons[0].CustomID != discord.StopButtonID || msg.Buttons[0].Label != "Stop" {
		t.Fatalf("streaming message buttons = %+v, want one Stop button", msg.Buttons)
	}
	if !strings.HasSuffix(msg.Content, "▌") {
		t.Errorf("streaming message %q shows no cursor", msg.Content)
	}
	if _, err := hs.srv.ClickButton(msg.ID, discord.StopButtonID, userID, nil); err != nil {
		t.Fatal(err)
	}
	stop := hs.next()
	if stop.in.Command != "stop" || stop.in.Chat != rc.in.Chat || stop.in.UserID != userID {
		t.Fatalf("button press reached the handler as %+v", stop.in)
	}
	if m, _ := hs.srv.Message(msg.ID); len(m.Buttons) != 0 {
		t.Errorf("Stop button still shown after the press")
	}
	partial := "Thinking about a very long answer"
	if err := r.Finish(hs.ctx, partial, nil); err != nil {
		t.Fatal(err)
	}
	if m, _ := hs.srv.Message(msg.ID); m.Content != partial || len(m.Buttons) != 0 {
		t.Errorf("stopped reply shows %q with buttons %+v", m.Content, m.Buttons)
	}
}

// In a guild channel, a member who did not ask pressing Stop reaches the handler (which may
// refuse: only the asker or an admin stops an answer) but leaves the button, so the asker can
// still press it.
func TestStopButtonPressedByAnotherMember(t *testing.T) {
	t.Parallel()
	hs := start(t, nil, nil)
	ch := "500000000000000018"
	const bystander = "400000000000000002"
	_, rc := hs.post(dtk.UserMessage{ChannelID: ch, GuildID: guildID, Content: "<@" + hs.srv.BotID() + "> go", MentionBot: true})
	r := rc.out.NewReply(hs.ctx)
	r.Update("A long answer in progress")
	hs.waitFor("the streaming message", func() bool { return len(hs.srv.BotMessages(ch)) == 1 })
	msg := hs.srv.BotMessages(ch)[0]
	if _, err := hs.srv.ClickButton(msg.ID, discord.StopButtonID, bystander, nil); err != nil {
		t.Fatal(err)
	}
	if stop := hs.next(); stop.in.Command != "stop" || stop.in.UserID != bystander {
		t.Fatalf("button press reached the handler as %+v", stop.in)
	}
	if m, _ := hs.srv.Message(msg.ID); len(m.Buttons) != 1 {
		t.Fatalf("a bystander's press took the asker's Stop button away: buttons %+v", m.Buttons)
	}
	if _, err := hs.srv.ClickButton(msg.ID, discord.StopButtonID, userID, nil); err != nil {
		t.Fatal(err)
	}
	if stop := hs.next(); stop.in.Command != "stop" || stop.in.UserID != userID {
		t.Fatalf("button press reached the handler as %+v", stop.in)
	}
	if m, _ := hs.srv.Message(msg.ID); len(m.Buttons) != 0 {
		t.Errorf("Stop button still shown after the asker's press")
	}
	if err := r.Finish(hs.ctx, "A long answer", nil); err != nil {
		t.Fatal(err)
	}
}

func TestSlashAndTextCommands(t *testing.T) {
	t.Parallel()
	hs := start(t, func(o *discord.Options) { o.RegisterCommands = true },
		func(ctx context.Context, in adapters.Inbound, out adapters.Responder) {
			if in.Command == "reset" {
				_ = out.Notice(ctx, "Conversation reset.")
			}
		})
	hs.waitFor("command registration", func() bool { return len(hs.srv.Commands()) == 4 })
	var names []string
	for _, c := range hs.srv.Commands() {
		names = append(names, c.Name)
	}
	if !slices.Equal(names, []string{"reset", "stop", "help", "usage"}) {
		t.Errorf("registered commands %v", names)
	}
	ch := "500000000000000009"
	it, err := hs.srv.SlashCommand(ch, guildID, "reset", userID, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := hs.next()
	if got.in.Command != "reset" || got.in.Chat.ChatID != ch || got.in.Kind != adapters.Group || got.in.UserID != userID {
		t.Errorf("slash command reached the handler as %+v", got.in)
	}
	hs.waitFor("the command's answer", func() bool {
		m, ok := hs.srv.InteractionResponse(it)
		return ok && m.Content == "Conversation reset."
	})

	_, txt := hs.post(dtk.UserMessage{ChannelID: ch, GuildID: guildID, Content: "<@" + hs.srv.BotID() + "> /help models", MentionBot: true})
	if txt.in.Command != "help" || txt.in.Args != "models" {
		t.Errorf("text command = %q args %q", txt.in.Command, txt.in.Args)
	}
	_, path := hs.dm("500000000000000010", "/etc/hosts is what?")
	if path.in.Command != "" {
		t.Errorf("a path was taken for the command %q", path.in.Command)
	}
}

func TestGatewayDropDuringStreamingLosesNothing(t *testing.T) {
	t.Parallel()
	hs := start(t, nil, nil)
	ch := "500000000000000011"
	_, rc := hs.dm(ch, "stream please")
	full := text(1500)
	r := rc.out.NewReply(hs.ctx)
	runes := []rune(full)
	streamInto(r, string(runes[:600]), 30, 30*time.Millisecond)
	hs.srv.DropGateway()
	// A message sent while the bot is disconnected arrives after the resume.
	if _, err := hs.srv.Post(dtk.UserMessage{ChannelID: ch, AuthorID: userID, Content: "are you there?"}); err != nil {
		t.Fatal(err)
	}
	streamInto(r, full, 30, 30*time.Millisecond)
	if err := r.Finish(hs.ctx, full, nil); err != nil {
		t.Fatalf("Finish: %v", err)
	}
	if got := hs.botText(ch); got != full {
		t.Errorf("final text after a gateway drop:\n got %q\nwant %q", got, full)
	}
	later := hs.next()
	if later.in.Text != "are you there?" {
		t.Errorf("after the resume the handler got %q", later.in.Text)
	}
	if hs.srv.Resumes() < 1 || hs.srv.Identifies() != 1 {
		t.Errorf("resumes = %d, identifies = %d: want the session resumed, not re-identified", hs.srv.Resumes(), hs.srv.Identifies())
	}
	checkBudget(t, hs.srv, ch)
}

func TestWhichMessagesAreAddressed(t *testing.T) {
	t.Parallel()
	const (
		allowedCh = "510000000000000001"
		otherCh   = "510000000000000002"
		threadCh  = "510000000000000003"
		role      = "610000000000000001"
	)
	hs := start(t, func(o *discord.Options) {
		o.TriggerPrefix = "!ai"
		o.AllowedGuilds = []string{guildID}
		o.AllowedChannels = []string{allowedCh}
		o.AllowedRoles = []string{role}
	}, nil)
	hs.srv.AddMember(guildID, userID, []string{role}) // may send direct messages
	hs.srv.AddChannel(dtk.Channel{ID: allowedCh, GuildID: guildID, Type: dtk.ChannelGuildText})
	hs.srv.AddChannel(dtk.Channel{ID: otherCh, GuildID: guildID, Type: dtk.ChannelGuildText})
	hs.srv.AddChannel(dtk.Channel{ID: threadCh, GuildID: guildID, ParentID: allowedCh, Type: dtk.ChannelPublicThread})
	bot := hs.srv.BotID()
	botMsg, err := hs.a.Send(hs.ctx, chat.Ref{Platform: chat.Discord, ChatID: allowedCh}, "earlier answer", adapters.SendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	roles := []string{role}
	cases := []struct {
		name     string
		msg      dtk.UserMessage
		want     bool
		wantText string
	}{
		{"dm from a member with the role", dtk.UserMessage{ChannelID: "520000000000000001", Content: "hello"}, true, "hello"},
		{"dm with prefix", dtk.UserMessage{ChannelID: "520000000000000001", Content: "!ai hello"}, true, "hello"},
		{"guild without mention", dtk.UserMessage{ChannelID: allowedCh, GuildID: guildID, RoleIDs: roles, Content: "just chatting"}, false, ""},
		{"mention", dtk.UserMessage{ChannelID: allowedCh, GuildID: guildID, RoleIDs: roles, Content: "<@" + bot + "> what time", MentionBot: true}, true, "what time"},
		{"reply to the bot", dtk.UserMessage{ChannelID: allowedCh, GuildID: guildID, RoleIDs: roles, Content: "and then?", ReplyTo: botMsg.ID}, true, "and then?"},
		{"prefix", dtk.UserMessage{ChannelID: allowedCh, GuildID: guildID, RoleIDs: roles, Content: "!ai summarise"}, true, "summarise"},
		{"thread of an allowed channel", dtk.UserMessage{ChannelID: threadCh, GuildID: guildID, RoleIDs: roles, Content: "!ai in thread"}, true, "in thread"},
		{"channel not allowed", dtk.UserMessage{ChannelID: otherCh, GuildID: guildID, RoleIDs: roles, Content: "!ai hi"}, false, ""},
		{"guild not allowed", dtk.UserMessage{ChannelID: "510000000000000009", GuildID: "399999999999999999", RoleIDs: roles, Content: "!ai hi"}, false, ""},
		{"role missing", dtk.UserMessage{ChannelID: allowedCh, GuildID: guildID, Content: "!ai hi"}, false, ""},
	}
	for _, tc := range cases {
		tc.msg.AuthorID = userID
		m, err := hs.srv.Post(tc.msg)
		if err != nil {
			t.Fatal(err)
		}
		// A direct message after each case: when it arrives, the case's message was decided.
		sentinel, err := hs.srv.Post(dtk.UserMessage{ChannelID: "520000000000000009", AuthorID: userID, Content: "sentinel"})
		if err != nil {
			t.Fatal(err)
		}
		var got *adapters.Inbound
		for seen := false; !seen || (tc.want && got == nil); {
			rc := hs.next()
			switch rc.in.MessageID {
			case sentinel.ID:
				seen = true
			case m.ID:
				in := rc.in
				got = &in
			default:
				t.Fatalf("%s: unexpected message %q reached the handler", tc.name, rc.in.Text)
			}
		}
		if (got != nil) != tc.want {
			t.Errorf("%s: addressed = %v, want %v", tc.name, got != nil, tc.want)
			continue
		}
		if got != nil && (got.Text != tc.wantText || got.Chat.ChatID != tc.msg.ChannelID) {
			t.Errorf("%s: text %q in chat %s, want %q in %s", tc.name, got.Text, got.Chat.ChatID, tc.wantText, tc.msg.ChannelID)
		}
		// A thread's message names its parent channel, whose rules the pipeline applies to it.
		if wantParent := map[string]string{threadCh: allowedCh}[tc.msg.ChannelID]; got != nil && got.ParentChatID != wantParent {
			t.Errorf("%s: parent channel %q, want %q", tc.name, got.ParentChatID, wantParent)
		}
	}
}

func TestImagesAreDownloadedAndCapped(t *testing.T) {
	t.Parallel()
	hs := start(t, func(o *discord.Options) { o.MaxImageBytes = 1000 }, nil)
	small := bytes.Repeat([]byte{1}, 500)
	_, rc := hs.post(dtk.UserMessage{ChannelID: "530000000000000001", Content: "what is this", Attachments: []dtk.Attachment{
		{Filename: "a.png", ContentType: "image/png", Data: small},
		{Filename: "big.png", ContentType: "image/png", Data: bytes.Repeat([]byte{2}, 5000)},
		{Filename: "notes.txt", ContentType: "text/plain", Data: []byte("text")},
	}})
	if len(rc.in.Images) != 1 || !bytes.Equal(rc.in.Images[0].Data, small) || rc.in.Images[0].MIME != "image/png" {
		t.Errorf("images = %d, want only the small picture", len(rc.in.Images))
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	for _, o := range []discord.Options{{}, {Token: "t", APIBase: "ftp://example.org"}, {Token: "t", APIBase: "::"}} {
		if _, err := discord.New(o); err == nil {
			t.Errorf("New(%+v) accepted", o)
		}
	}
}

func TestErrorsMapOntoAdapterErrors(t *testing.T) {
	t.Parallel()
	hs := start(t, nil, nil)
	chat := chat.Ref{Platform: chat.Discord, ChatID: "540000000000000001"}
	hs.srv.AddChannel(dtk.Channel{ID: chat.ChatID, Type: dtk.ChannelDM})
	ctx, cancel := context.WithTimeout(hs.ctx, 10*time.Second)
	defer cancel()
	ref, err := hs.a.Send(ctx, chat, "hello", adapters.SendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := hs.srv.DeleteMessage(ref.ID); err != nil {
		t.Fatal(err)
	}
	if err := hs.a.Edit(ctx, ref, "x"); !errorsIs(err, adapters.ErrMessageGone) {
		t.Errorf("edit of a deleted message: %v, want ErrMessageGone", err)
	}
	for _, status := range []int{500, 502, 503} {
		hs.srv.FailNext(dtk.RouteCreateMessage, status, 1)
		if _, err := hs.a.Send(ctx, chat, "x", adapters.SendOptions{}); !errorsIs(err, adapters.ErrTemporary) {
			t.Errorf("HTTP %d: %v, want ErrTemporary", status, err)
		}
	}
	if _, err := hs.a.Send(ctx, chat, strings.Repeat("a", 2001), adapters.SendOptions{}); !errorsIs(err, adapters.ErrTooLong) {
		t.Errorf("2001 characters: %v, want ErrTooLong", err)
	}
	hs.srv.Storm(chat.ChatID, 1, 1500*time.Millisecond)
	_, err = hs.a.Send(ctx, chat, "x", adapters.SendOptions{})
	var rl *adapters.RateLimitError
	if !errorsAs(err, &rl) || rl.RetryAfter != 1500*time.Millisecond {
		t.Errorf("429: %v, want RateLimitError after 1.5s", err)
	}
}

func TestRunLeavesNoGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	t.Run("session", func(t *testing.T) {
		hs := start(t, func(o *discord.Options) { o.RegisterCommands = true }, nil)
		_, rc := hs.dm("550000000000000001", "hi")
		r := rc.out.NewReply(hs.ctx)
		r.Update("working on it")
		r.Working(true)
		hs.srv.DropGateway()
		hs.waitFor("the resume", func() bool { return hs.srv.Resumes() == 1 })
		if err := r.Finish(hs.ctx, "done", nil); err != nil {
			t.Fatal(err)
		}
	})
	wait.Until(t, "the adapter's goroutines to end after Run returned", func() error {
		if n := runtime.NumGoroutine(); n > before {
			var buf strings.Builder
			_ = pprof.Lookup("goroutine").WriteTo(&buf, 1)
			return fmt.Errorf("%d goroutines left (%d before):\n%s", n, before, buf.String())
		}
		return nil
	})
}

func TestDeletedMessageIsReplacedWithTextAndFiles(t *testing.T) {
	t.Parallel()
	hs := start(t, nil, nil)
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
			hs := start(t, nil, nil)
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
		})
	}
}

func TestTextCommandNamingAnotherBotIsIgnored(t *testing.T) {
	t.Parallel()
	hs := start(t, nil, nil)
	ch := "500000000000000077"
	cases := []struct {
		text     string
		want     bool
		cmd, arg string
	}{
		{"/reset@otherbot", false, "", ""},
		{"/audit@otherbot fetch_url", false, "", ""},
		{"/reset@" + "RelayBot", true, "reset", ""},
		{"/Reset", true, "reset", ""},
		{"/help@relaybot models", true, "help", "models"},
	}
	for _, tc := range cases {
		m, err := hs.srv.Post(dtk.UserMessage{ChannelID: ch, AuthorID: userID, Content: tc.text})
		if err != nil {
			t.Fatal(err)
		}
		// A direct message after each case: when it arrives, the case's message was decided.
		sentinel, err := hs.srv.Post(dtk.UserMessage{ChannelID: ch, AuthorID: userID, Content: "sentinel"})
		if err != nil {
			t.Fatal(err)
		}
		var got *adapters.Inbound
		for seen := false; !seen || (tc.want && got == nil); {
			rc := hs.next()
			switch rc.in.MessageID {
			case sentinel.ID:
				seen = true
			case m.ID:
				in := rc.in
				got = &in
			}
		}
		if (got != nil) != tc.want {
			t.Errorf("%q reached the bot: %v, want %v (another bot's /reset reset our conversation)", tc.text, got != nil, tc.want)
			continue
		}
		if got != nil && (got.Command != tc.cmd || got.Args != tc.arg) {
			t.Errorf("%q: command %q args %q, want %q %q", tc.text, got.Command, got.Args, tc.cmd, tc.arg)
		}
	}
}

func TestDirectMessagesFollowTheGuildRules(t *testing.T) {
	t.Parallel()
	const (
		role     = "610000000000000001"
		withRole = "400000000000000011"
		noRole   = "400000000000000012"
		stranger = "400000000000000013"
		trusted  = "400000000000000014"
	)
	guildRules := func(o *discord.Options) {
		o.AllowedGuilds = []string{guildID}
		o.AllowedRoles = []string{role}
		o.AccessUsers = []string{trusted}
	}
	tests := []struct {
		name   string
		tweak  func(*discord.Options)
		author string
		want   bool
	}{
		{"member with an allowed role", guildRules, withRole, true},
		{"member without an allowed role", guildRules, noRole, false},
		{"not a member of an allowed guild", guildRules, stranger, false},
		{"user listed in [access]", guildRules, trusted, true},
		{"no guild rules: anyone", nil, stranger, true},
		{"direct messages off", func(o *discord.Options) { guildRules(o); o.NoDMs = true }, withRole, false},
		{"channel rule: member of the channel's guild", func(o *discord.Options) { o.AllowedChannels = []string{"510000000000000031"} }, noRole, true},
		{"channel rule: not a member", func(o *discord.Options) { o.AllowedChannels = []string{"510000000000000031"} }, stranger, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			hs := start(t, func(o *discord.Options) {
				o.RegisterCommands = true
				if tt.tweak != nil {
					tt.tweak(o)
				}
			}, nil)
			hs.waitFor("command registration", func() bool { return len(hs.srv.Commands()) == 4 })
			hs.srv.AddChannel(dtk.Channel{ID: "510000000000000031", GuildID: guildID, Type: dtk.ChannelGuildText})
			hs.srv.AddMember(guildID, withRole, []string{role})
			hs.srv.AddMember(guildID, noRole, nil)
			ch := "520000000000000031"
			m, err := hs.srv.Post(dtk.UserMessage{ChannelID: ch, AuthorID: tt.author, Content: "hello"})
			if err != nil {
				t.Fatal(err)
			}
			// Slash commands in a direct message follow the same rule.
			it, err := hs.srv.SlashCommand(ch, "", "help", tt.author, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !tt.want {
				hs.waitFor("the slash command to be refused", func() bool {
					r, ok := hs.srv.InteractionResponse(it)
					return ok && r.Content != ""
				})
				if r, _ := hs.srv.InteractionResponse(it); !strings.Contains(r.Content, "does not answer") {
					t.Fatalf("a refused /help in a DM was answered %q", r.Content)
				}
			}
			// A guild message every case answers: when it arrives, the case was decided.
			sentinel, err := hs.srv.Post(dtk.UserMessage{ChannelID: "510000000000000031", GuildID: guildID, AuthorID: withRole,
				RoleIDs: []string{role}, Content: "<@" + hs.srv.BotID() + "> sentinel", MentionBot: true})
			if err != nil {
				t.Fatal(err)
			}
			var gotMsg, gotCmd bool
			for seen := false; !seen || tt.want && (!gotMsg || !gotCmd); {
				rc := hs.next()
				switch {
				case rc.in.MessageID == sentinel.ID:
					seen = true
				case rc.in.MessageID == m.ID:
					gotMsg = true
				case rc.in.Command == "help":
					gotCmd = true
				}
			}
			if gotMsg != tt.want || gotCmd != tt.want {
				t.Fatalf("direct message answered %v, slash command answered %v; want %v (a user refused in the guild was answered by DM)", gotMsg, gotCmd, tt.want)
			}
		})
	}
}

// A long answer keeps moving: once the streamed text outgrows a message, that message is
// finished at a clean boundary and streaming goes on in the next one, so the user reads the
// first part while the model is still writing the rest. Only the message still streaming
// carries the Stop button, and no finished part is edited again by the final pass.
func TestTwelveThousandCharacterAnswerRollsOverWhileTheModelWrites(t *testing.T) {
	t.Parallel()
	hs := start(t, nil, nil)
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
	hs := start(t, func(o *discord.Options) { o.ComponentsV2 = true }, nil)
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
}

// waitForServer polls cond with a generous deadline.
func waitForServer(t *testing.T, hs *harness, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(hs.ctx, 20*time.Second)
	defer cancel()
	if err := hs.srv.WaitFor(ctx, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

func TestGlobalBudgetIsTheConfiguredOne(t *testing.T) {
	tests := []struct {
		name      string
		perSecond int
		want      int
	}{
		{"default is Discord's 50", 0, 50},
		{"a large bot's grant", 1200, 1200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := discord.New(discord.Options{Token: "t", APIBase: "http://127.0.0.1:1/api/v10", GlobalPerSecond: tt.perSecond})
			if err != nil {
				t.Fatal(err)
			}
			defer a.Engine().Close()
			if got := a.Limits().Global.N; got != tt.want {
				t.Errorf("replies are paced at %d requests a second, want %d", got, tt.want)
			}
		})
	}
}

// TestLookupsKeepToTheGlobalBudget posts a message in each of 20 channels the gateway never
// described, at once, to a bot whose global budget is 10 requests a second: each channel must be
// looked up (is it a thread, whose parent's rules apply?) before the message reaches the
// handler, and Discord counts those lookups against the bot's global limit like its messages
// (and like the gateway's address, which discordgo asks for as the bot connects). Every
// message reaches the handler and is answered, and Discord answers no request with 429; a
// lookup refused with a 429 used to drop its message.
func TestLookupsKeepToTheGlobalBudget(t *testing.T) {
	t.Parallel()
	const channels, perSecond = 20, 10
	hs := startWith(t, dtk.Config{GlobalN: perSecond}, func(o *discord.Options) { o.GlobalPerSecond = perSecond },
		func(ctx context.Context, in adapters.Inbound, out adapters.Responder) {
			if err := out.NewReply(ctx).Finish(ctx, "answer to "+in.Text, nil); err != nil {
				t.Errorf("answering %q: %v", in.Text, err)
			}
		})
	for i := range channels {
		ch := fmt.Sprintf("5100000000000000%02d", i)
		if _, err := hs.srv.Post(dtk.UserMessage{ChannelID: ch, GuildID: guildID, AuthorID: userID,
			Content: fmt.Sprintf("<@%s> m%d", hs.srv.BotID(), i), MentionBot: true}); err != nil {
			t.Fatal(err)
		}
	}
	for range channels {
		hs.next()
	}
	for i := range channels {
		ch := fmt.Sprintf("5100000000000000%02d", i)
		if got, want := hs.botText(ch), fmt.Sprintf("answer to m%d", i); got != want {
			t.Errorf("channel %s shows %q, want %q", ch, got, want)
		}
	}
	var limited []string
	for _, c := range hs.srv.Calls() {
		if c.Status == http.StatusTooManyRequests {
			limited = append(limited, fmt.Sprintf("%s %s", c.Method, c.Path))
		}
	}
	if len(limited) > 0 {
		t.Errorf("Discord answered %d requests with 429, want none; the first: %s", len(limited), limited[0])
	}
	if n := len(hs.srv.CallsTo(dtk.RouteGetChannel)); n < channels {
		t.Errorf("%d channel lookups, want one per channel (%d): the test no longer exercises them", n, channels)
	}
}
