package admin

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"relaybot/adapters"
	"relaybot/adapters/web"
	"relaybot/store/storetest"
)

// fileReader is a pipeline stand-in that answers a message with what its files hold.
type fileReader struct{}

func (fileReader) Handle(ctx context.Context, in adapters.Inbound, out adapters.Responder) {
	var parts []string
	for _, a := range in.Attachments {
		data, err := a.Fetch(ctx, 1<<20)
		if err != nil {
			parts = append(parts, fmt.Sprintf("%s: %v", a.Name, err))
			continue
		}
		first, _, _ := strings.Cut(string(data), "\n")
		parts = append(parts, fmt.Sprintf("read %s (%s, %d bytes) starting %q", a.Name, a.Kind, len(data), first))
	}
	_ = out.NewReply(ctx).Finish(ctx, strings.Join(parts, "; ")+" with the text "+fmt.Sprintf("%q", in.Text), nil)
}

// A file picked in the web chat's page goes with the message and reaches the bot as an
// attachment; the page shows the file's name on the user's message and the bot's answer.
func TestBrowserWebChatUploadsAFile(t *testing.T) {
	st := storetest.Open(t, storetest.SQLite)
	chat, err := web.New(web.Options{Handler: fileReader{}})
	if err != nil {
		t.Fatal(err)
	}
	_, ts := newTestServer(t, st, testToken, func(o *Options) {
		o.WebChat = chat.Handler()
		o.ChatUploadBytes = web.MaxSendBytes(0)
	})
	t.Cleanup(func() { chat.Close() })
	path := filepath.Join(t.TempDir(), "notes.md")
	if err := os.WriteFile(path, []byte("# Meeting notes\n\nShip the voice feature.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bctx := newBrowser(t)
	ctx, cancel := context.WithTimeout(bctx, 90*time.Second)
	defer cancel()
	step := stepper(t, ctx)
	step("open the admin page", chromedp.Navigate(ts.URL+"/admin/"), chromedp.WaitVisible(chromedp.ID("token")))
	step("log in", chromedp.SendKeys(chromedp.ID("token"), testToken), chromedp.Submit(chromedp.ID("token")),
		chromedp.WaitNotPresent(chromedp.ID("token")))
	step("open the chat", chromedp.Navigate(ts.URL+"/chat"), chromedp.WaitVisible(chromedp.ID("text")))
	step("pick a file and send it",
		chromedp.SetUploadFiles(chromedp.ID("file"), []string{path}),
		chromedp.WaitVisible(chromedp.ID("picked")),
		chromedp.SendKeys(chromedp.ID("text"), "summarise this"),
		chromedp.Click(chromedp.ID("send")),
	)
	want := `read notes.md (document, 41 bytes) starting "# Meeting notes" with the text "summarise this"`
	pctx, pcancel := context.WithTimeout(ctx, 30*time.Second)
	defer pcancel()
	found, err := chromedp.Run(pctx, chromedp.Poll[bool](fmt.Sprintf(
		`Array.from(document.querySelectorAll("article.msg.bot")).some(e => e.textContent.includes(%q))`, want)))
	if err != nil || !found {
		bot, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`Array.from(document.querySelectorAll("article.msg.bot")).map(e => e.textContent).join("\n")`))
		t.Fatalf("the bot's answer in the page is %q (%v), want it to say %q", bot, err, want)
	}
	user, err := chromedp.Run(ctx, chromedp.Evaluate[string](`Array.from(document.querySelectorAll("article.msg.user")).map(e => e.textContent).join("\n")`))
	if err != nil || !strings.Contains(user, "📎 notes.md") {
		t.Fatalf("the user's message shows %q (%v), want the file's name", user, err)
	}
	picked, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.getElementById("picked").hidden && document.getElementById("file").files.length === 0`))
	if err != nil || !picked {
		t.Fatalf("after sending, the picked file is still shown (%v)", err)
	}
}
