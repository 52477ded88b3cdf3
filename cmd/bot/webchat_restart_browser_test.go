package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"relaybot/internal/testkit/headless"
	"relaybot/internal/testkit/wait"
)

// In a real browser: the chat's visible text is the same before and after the bot restarts on
// the same database, with the reasoning folded, the tool's line, the approval question above the
// answer it unblocked and the stopped marker; pressing Stop adds no bubble; the page has an
// icon and /favicon.ico answers.
func TestWebChatLooksTheSameInTheBrowserAfterARestart(t *testing.T) {
	bctx := headless.Start(t)
	e := newEnv(t)
	hang := make(chan struct{})
	defer close(hang)
	cfg, base, stop := startTranscriptBot(t, e, hang)

	eval := func(expr string) (string, error) {
		return chromedp.Run(bctx, chromedp.Evaluate[string](expr))
	}
	poll := func(what, expr string) {
		t.Helper()
		wait.Until(t, what, func() error {
			ok, err := chromedp.Run(bctx, chromedp.Evaluate[bool](expr))
			if err == nil && !ok {
				text, _ := eval(`document.getElementById("log").innerText`)
				err = fmt.Errorf("the chat shows:\n%s", text)
			}
			return err
		})
	}
	step := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(bctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	say := func(text string) {
		t.Helper()
		step("say "+text, chromedp.SendKeys(chromedp.ID("text"), text), chromedp.Click(chromedp.ID("send")))
	}
	const botSays = `[...document.querySelectorAll(".msg.bot")].some(m => !m.querySelector(".stop") && m.textContent.includes(%q))`
	const users = `document.querySelectorAll(".msg.user").length`

	step("open the chat", chromedp.Navigate(base+"/chat"), chromedp.WaitVisible(chromedp.ID("text")))
	say("think")
	poll("the answer with its reasoning", fmt.Sprintf(botSays, "Visible answer."))
	say("tool")
	step("approve", chromedp.Click(chromedp.CSS(`.msg.bot .choices button[data-choice="approve"]`)))
	poll("the tool's answer", fmt.Sprintf(botSays, "tool said: hi"))
	say("slow")
	step("the Stop button", chromedp.WaitVisible(chromedp.CSS(".msg.bot button.stop")))
	bubbles, err := chromedp.Run(bctx, chromedp.Evaluate[int](users))
	if err != nil {
		t.Fatal(err)
	}
	step("press Stop", chromedp.Click(chromedp.CSS(".msg.bot button.stop")))
	poll("the stopped answer", fmt.Sprintf(botSays, "[stopped]"))
	if n, err := chromedp.Run(bctx, chromedp.Evaluate[int](users)); err != nil || n != bubbles {
		text, _ := eval(`document.getElementById("log").innerText`)
		t.Fatalf("pressing Stop left %d bubbles of the user's, want %d (%v):\n%s", n, bubbles, err, text)
	}

	shows := func(what string) {
		t.Helper()
		poll(what+": the reasoning folded", `(() => {
			const d = [...document.querySelectorAll(".msg.bot details")].find(d => d.textContent.includes("Let me consider"));
			return !!d && !d.open && !document.getElementById("log").innerText.includes("Let me consider");
		})()`)
		text, err := eval(`document.getElementById("log").innerText`)
		if err != nil {
			t.Fatal(err)
		}
		q, a := strings.Index(text, "Approved by web."), strings.Index(text, "tool said: hi")
		if !strings.Contains(text, "✓ 1 tool") || !strings.Contains(text, "[stopped]") || q < 0 || a < q {
			t.Fatalf("%s the chat shows, without the tool's line, the stopped marker or the question above its answer:\n%s", what, text)
		}
	}
	shows("before the restart")
	before, err := eval(`document.getElementById("log").innerText`)
	if err != nil {
		t.Fatal(err)
	}

	base = restart(t, e, cfg, stop)
	step("open the chat again", chromedp.Navigate(base+"/chat"), chromedp.WaitVisible(chromedp.ID("text")))
	wait.Until(t, "the same text after the restart", func() error {
		after, err := eval(`document.getElementById("log").innerText`)
		if err == nil && after != before {
			err = fmt.Errorf("the chat's text changed.\nbefore:\n%s\n\nafter:\n%s", before, after)
		}
		return err
	})
	shows("after the restart")

	if icon, err := eval(`(document.querySelector('link[rel="icon"]') || {}).href || ""`); err != nil || !strings.HasSuffix(icon, "/favicon.ico") {
		t.Errorf("the page links the icon %q (%v), want /favicon.ico", icon, err)
	}
	resp, err := http.Get(base + "/favicon.ico")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "image/svg+xml" {
		t.Errorf("GET /favicon.ico: %s %q, want 200 with an SVG", resp.Status, resp.Header.Get("Content-Type"))
	}
}
