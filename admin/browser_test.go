package admin

import (
	"context"
	"encoding/csv"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"

	"relaybot/adapters"
	"relaybot/adapters/web"
	"relaybot/internal/testkit/headless"
	"relaybot/store/storetest"
	"relaybot/tools"
)

// newBrowser starts a headless Chromium with a fresh profile; it ends with the test.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	return headless.Start(t)
}

// stepper returns a function that runs browser actions in ctx and fails the test, naming the
// step, when one fails.
func stepper(t *testing.T, ctx context.Context) func(what string, actions ...chromedp.Action[chromedp.Void]) {
	return func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
}

// gatedReply is a pipeline stand-in for the browser test: it streams a reply in steps through
// the delivery engine, showing the typing indicator and a tool status line, and waits after each
// step until the test has seen it in the page.
type gatedReply struct {
	steps []string
	seen  chan struct{}
}

func (h *gatedReply) Handle(ctx context.Context, in adapters.Inbound, out adapters.Responder) {
	reply := out.NewReply(ctx)
	reply.Working(true)
	for _, step := range h.steps[:len(h.steps)-1] {
		reply.Update(step)
		select {
		case <-h.seen:
		case <-ctx.Done():
			return
		}
	}
	reply.Working(false)
	if err := reply.Finish(ctx, h.steps[len(h.steps)-1]+" (you said: "+in.Text+")", nil); err != nil {
		panic(fmt.Sprintf("finish: %v", err))
	}
}

// shoot saves the current page at desktop and phone widths when BOT_SCREENSHOT_DIR is set, for
// a person to look at.
func shoot(t *testing.T, ctx context.Context, name string) {
	dir := os.Getenv("BOT_SCREENSHOT_DIR")
	if dir == "" {
		return
	}
	sizes := []struct {
		suffix string
		view   chromedp.Action[chromedp.Void]
	}{
		{"desktop", chromedp.EmulateViewport(1280, 900)},
		{"phone", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile)},
	}
	for _, s := range sizes {
		if err := chromedp.Do(ctx, s.view); err != nil {
			t.Fatalf("viewport %s: %v", s.suffix, err)
		}
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, name+"-"+s.suffix+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 900)); err != nil {
		t.Fatal(err)
	}
}

func TestBrowserAdminAndWebChat(t *testing.T) {
	st := storetest.Open(t, storetest.SQLite)
	seed := seedStore(t, st)

	h := &gatedReply{
		steps: []string{"Let me look that up.", "Let me look that up.\n\n⚙ weather…",
			"It is **sunny** in Paris.\n\n```\nuv index 3\n```\n\n<script>window.pwned = 1</script><img src=x onerror=\"window.pwned = 1\">"},
		seen: make(chan struct{}),
	}
	chat, err := web.New(web.Options{Handler: h})
	if err != nil {
		t.Fatal(err)
	}
	_, ts := newTestServer(t, st, testToken, func(o *Options) {
		o.WebChat = chat.Handler()
		o.MCPHealth = func() []tools.ServerHealth {
			return []tools.ServerHealth{
				{Name: "wx", Transport: "stdio", State: "up", Tools: 3, Since: seed.base},
				{Name: "web", Transport: "http", State: "down", LastError: "dial tcp 127.0.0.1:9: connection refused", Since: seed.base},
			}
		}
	})
	// Cleanups run last-first: the browser goes, then the chat ends its event streams, then the
	// server closes.
	t.Cleanup(func() { chat.Close() })
	bctx := newBrowser(t)
	ctx, cancel := context.WithTimeout(bctx, 90*time.Second)
	defer cancel()
	step := stepper(t, ctx)
	// poll waits until expr is true in the page; errors while the page navigates are retried.
	poll := func(what, expr string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		tick := time.NewTicker(25 * time.Millisecond)
		defer tick.Stop()
		for {
			ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](expr))
			if err == nil && ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %s is still not true (last error %v)", what, expr, err)
			}
			<-tick.C
		}
	}

	// Log in: the page sends the browser to the login form first.
	step("open the admin page", chromedp.Navigate(ts.URL+"/admin/calls"), chromedp.WaitVisible(chromedp.ID("token")))
	shoot(t, ctx, "login")
	step("log in",
		chromedp.SendKeys(chromedp.ID("token"), testToken),
		chromedp.Submit(chromedp.ID("token")),
		chromedp.WaitVisible(chromedp.CSS("table.calls")),
	)
	rows, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("table.calls tbody tr").length`))
	if err != nil || rows != len(seed.calls) {
		t.Fatalf("after login the table has %d rows (%v), want %d", rows, err, len(seed.calls))
	}
	shoot(t, ctx, "calls")

	// Filter to errors.
	step("filter to errors",
		chromedp.Click(chromedp.CSS("details.filters summary")),
		chromedp.SetValue(chromedp.CSS(`select[name="status"]`), "error"),
		chromedp.Click(chromedp.CSS(`details.filters button[type="submit"]`)),
	)
	poll("filter", `location.search.includes("status=error") && document.readyState === "complete"`)
	step("filtered table", chromedp.WaitVisible(chromedp.CSS("table.calls")))
	text, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("table.calls tbody")))
	if err != nil {
		t.Fatal(err)
	}
	rows, _ = chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("table.calls tbody tr").length`))
	if rows != 2 || !strings.Contains(text, "search") || !strings.Contains(text, "weather") || strings.Contains(text, "current_time") {
		t.Fatalf("errors filter shows %d rows:\n%s", rows, text)
	}
	filtered, _ := chromedp.Run(ctx, chromedp.Location())

	// Open the weather row (the older of the two) and see its arguments.
	step("open a row",
		chromedp.Click(chromedp.CSS(`table.calls tbody tr:last-child a.tool`)),
		chromedp.WaitVisible(chromedp.ID("arguments")),
	)
	args, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("arguments")))
	if err != nil || !strings.Contains(args, `"city": "Paris"`) {
		t.Fatalf("detail arguments = %q, %v", args, err)
	}
	errText, _ := chromedp.Run(ctx, chromedp.Text(chromedp.ID("error")))
	if !strings.Contains(errText, "upstream 502") {
		t.Errorf("detail error = %q", errText)
	}
	shoot(t, ctx, "detail")

	// Export the filtered calls as CSV through the page's link.
	dir := t.TempDir()
	progress := chromedp.Events(ctx, browser.DownloadProgress)
	step("export CSV",
		chromedp.Navigate(filtered),
		chromedp.WaitVisible(chromedp.CSS("table.calls")),
		chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
			_, err := chromedp.Call(ctx, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{
				Behavior:      browser.SetDownloadBehaviorBehaviorAllowAndName,
				DownloadPath:  dir,
				EventsEnabled: ptr(true),
			})
			return err
		}),
		chromedp.Click(chromedp.CSS(`a[href^="/admin/export.csv"]`)),
	)
	var file string
	for ev, err := range progress {
		if err != nil {
			t.Fatalf("waiting for the CSV download: %v", err)
		}
		if ev.State == browser.DownloadProgressStateCompleted {
			file = filepath.Join(dir, ev.GUID)
			break
		}
		if ev.State == browser.DownloadProgressStateCanceled {
			t.Fatal("the CSV download was cancelled")
		}
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(f).ReadAll()
	f.Close()
	if err != nil {
		t.Fatalf("downloaded CSV: %v", err)
	}
	if len(recs) != 3 || recs[0][11] != "tool_name" || recs[1][14] != "error" || recs[2][14] != "error" {
		t.Errorf("downloaded CSV = %v, want the header and the two errors", recs)
	}

	// Stats and servers render, for the screenshots and as a smoke check.
	step("stats", chromedp.Navigate(ts.URL+"/admin/stats"), chromedp.WaitVisible(chromedp.CSS("svg.chart")))
	shoot(t, ctx, "stats")
	step("servers", chromedp.Navigate(ts.URL+"/admin/servers"), chromedp.WaitVisible(chromedp.CSS("table.servers")))
	shoot(t, ctx, "servers")
	// Turns is in the navigation: the latest turns across chats, each opening its timeline.
	step("turns from the navigation",
		chromedp.Click(chromedp.CSS(`header nav a[href="/admin/turns"]`)),
		chromedp.WaitVisible(chromedp.CSS("table.turns")),
	)
	shoot(t, ctx, "turns")
	step("a turn's timeline from the turns page",
		chromedp.Click(chromedp.CSS(`table.turns a.timeline`)),
		chromedp.WaitVisible(chromedp.CSS("svg.timeline")),
	)

	// The web chat, behind the same login: the reply streams in, edited in place.
	step("open the chat", chromedp.Navigate(ts.URL+"/chat"), chromedp.WaitVisible(chromedp.ID("text")))
	step("send a message",
		chromedp.SendKeys(chromedp.ID("text"), "weather in Paris?"),
		chromedp.Click(chromedp.ID("send")),
	)
	poll("the user's message", `[...document.querySelectorAll(".msg.user .body")].some(e => e.textContent === "weather in Paris?")`)
	for i, s := range h.steps[:len(h.steps)-1] {
		poll(fmt.Sprintf("preview %d", i), fmt.Sprintf(`(() => { const b = document.querySelectorAll(".msg.bot .body"); return b.length === 1 && b[0].innerText.trim() === %q; })()`, s))
		if i == 1 {
			poll("the working indicator", `!document.getElementById("status").hidden`)
			shoot(t, ctx, "chat-streaming")
		}
		h.seen <- struct{}{}
	}
	// The final answer's Markdown renders (bold, a code block); the HTML the model wrote around it
	// is sanitised: no script runs, no event handler is left on the image.
	poll("the final answer", `(() => { const b = document.querySelectorAll(".msg.bot .body"); return b.length === 1 && b[0].innerText.includes("(you said: weather in Paris?)"); })()`)
	for _, c := range []struct{ what, expr string }{
		{"bold renders as <strong>", `document.querySelector(".msg.bot .body strong")?.textContent === "sunny"`},
		{"the fence renders as a code block", `document.querySelector(".msg.bot .body pre code")?.textContent.trim() === "uv index 3"`},
		{"no script element reaches the page", `document.querySelector(".msg.bot script") === null`},
		{"no onerror attribute reaches the page", `document.querySelector(".msg.bot [onerror]") === null`},
		{"no injected script ran", `window.pwned === undefined`},
	} {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](c.expr))
		if err != nil || !ok {
			html, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector(".msg.bot .body").innerHTML`))
			t.Errorf("web chat: %s is false (%v); the bot's message is %s", c.what, err, html)
		}
	}
	shoot(t, ctx, "chat")
}

func ptr[T any](v T) *T { return &v }
