package main

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"relaybot/config"
	"relaybot/internal/testkit/headless"
	"relaybot/internal/testkit/llm"
	"relaybot/internal/testkit/wait"
)

// In a real browser: the Settings page shows the system prompt the bot runs with and no token;
// after the file is edited, pressing Reload applies the new prompt (the next turn is asked with
// it) and names the key that needs a restart; a broken file is refused with its key and reason,
// and the prompt in force stays.
func TestSettingsReloadInTheBrowser(t *testing.T) {
	bctx := headless.Start(t)
	e := newEnv(t)
	c := e.toml().set("admin", webChatAdmin...).set("chat", "shutdown_grace_sec", 0)
	cfg, err := config.Load(c.write(t))
	if err != nil {
		t.Fatal(err)
	}
	e.start(cfg)
	e.waitLog("admin listening")
	m := regexp.MustCompile(`admin listening" addr=(\S+)`).FindStringSubmatch(e.logs.String())
	if m == nil {
		t.Fatalf("no admin address in the logs:\n%s", e.logs.String())
	}
	base := "http://" + m[1]
	page := func() string {
		text, err := chromedp.Run(bctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
		if err != nil {
			return err.Error()
		}
		return text
	}
	poll := func(what, expr string) {
		t.Helper()
		wait.Until(t, what, func() error {
			ok, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`(() => { try { return `+expr+`; } catch (e) { return false; } })()`))
			if err == nil && !ok {
				err = fmt.Errorf("the page shows %s", page())
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
	step("open Settings", chromedp.Navigate(base+"/admin/settings"), chromedp.WaitVisible(chromedp.CSS("table.settings")))
	text := page()
	if !strings.Contains(text, "You are a test bot.") || strings.Contains(text, e.tg.Token()) {
		t.Fatalf("the Settings page does not show the prompt, or shows the Telegram token:\n%s", text)
	}

	write := func(c *tomlConfig) {
		t.Helper()
		if err := os.WriteFile(cfg.File, []byte(c.String()), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(c.clone().set("agent", "system_prompt", "You are the reloaded bot.").set("chat", "queue_size", 3))
	step("press Reload", chromedp.Click(chromedp.CSS(`form.reload button`)))
	poll("the reload applied", `(() => {
		const r = document.querySelector(".reloaded.applied");
		return !!r && r.innerText.includes("agent.system_prompt") && r.innerText.includes("Needs a restart") && r.innerText.includes("chat.queue_size");
	})()`)
	if !strings.Contains(page(), "You are the reloaded bot.") {
		t.Fatalf("the Settings page does not show the new prompt after the reload:\n%s", page())
	}
	e.llm.Push(llm.Text("Fresh answer."))
	e.say(21, "hello")
	e.waitBotText(21, "the answer after the reload", contains("Fresh answer."))

	write(c.clone().set("agent", "system_prompt", "A prompt that never runs.", "max_tool_rounds", 0))
	step("press Reload again", chromedp.Click(chromedp.CSS(`form.reload button`)))
	poll("the broken file refused", `(() => {
		const r = document.querySelector(".reloaded.refused");
		return !!r && r.innerText.includes("agent.max_tool_rounds: must be between 1 and 1024, got 0");
	})()`)
	e.llm.Push(llm.Text("Same prompt."))
	e.say(21, "and now?")
	e.waitBotText(21, "the answer after the refusal", contains("Same prompt."))

	reqs := e.llm.Requests()
	for i, r := range reqs {
		if got := systemPrompt(r); !strings.HasPrefix(got, "You are the reloaded bot.") {
			t.Errorf("turn %d was asked with the system prompt %q, want the reloaded one", i+1, got)
		}
	}
	if len(reqs) != 2 {
		t.Errorf("%d model requests, want 2", len(reqs))
	}
}
