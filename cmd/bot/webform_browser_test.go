package main

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"relaybot/internal/testkit/headless"
	"relaybot/internal/testkit/wait"
)

// In a real browser: a tool's question with a text and a number field shows as one form in the
// question's bubble; the user fills it in and presses Submit, the values reach the MCP server
// typed, and the bubble shows what was answered instead of the form.
func TestWebChatToolFormInTheBrowser(t *testing.T) {
	bctx := headless.Start(t)
	e := newEnv(t)
	cfg := e.toml().set("admin", webChatAdmin...).parse(t)
	e.llm.SetHandler(roundModel)
	e.start(cfg)
	e.waitLog("admin listening")
	m := regexp.MustCompile(`admin listening" addr=(\S+)`).FindStringSubmatch(e.logs.String())
	if m == nil {
		t.Fatalf("no admin address in the logs:\n%s", e.logs.String())
	}
	base := "http://" + m[1]

	poll := func(what, expr string) {
		t.Helper()
		wait.Until(t, what, func() error {
			ok, err := chromedp.Run(bctx, chromedp.Evaluate[bool](expr))
			if err == nil && !ok {
				html, _ := chromedp.Run(bctx, chromedp.Evaluate[string](`document.getElementById("log").innerHTML`))
				err = fmt.Errorf("the chat shows %s", html)
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
	step("open the chat", chromedp.Navigate(base+"/chat"), chromedp.WaitVisible(chromedp.ID("text")))
	step("ask for the form", chromedp.SendKeys(chromedp.ID("text"), "ask text"), chromedp.Click(chromedp.ID("send")))
	step("the form shows", chromedp.WaitVisible(chromedp.CSS(".msg.bot form.qform")))
	poll("a text and a number input", `(() => {
		const f = document.querySelector(".msg.bot form.qform");
		const age = f.querySelector('input[name="v.age"]'), name = f.querySelector('input[name="v.name"]');
		return !!(age && age.type === "number" && age.min === "1" && age.max === "150" && age.required && name && name.type === "text" &&
			f.querySelector('button[data-choice="submit"]') && f.querySelector('button[data-choice="decline"]'));
	})()`)
	step("fill in and submit",
		chromedp.SendKeys(chromedp.CSS(`form.qform input[name="v.name"]`), "Ann"),
		chromedp.SendKeys(chromedp.CSS(`form.qform input[name="v.age"]`), "33"),
		chromedp.Click(chromedp.CSS(`form.qform button[data-choice="submit"]`)),
	)
	poll("the server's answer", fmt.Sprintf(`[...document.querySelectorAll(".msg.bot .body")].some(b => b.textContent.includes(%q))`,
		`tool said: accept {"age":33,"name":"Ann"}`))
	poll("the decided form", `document.querySelector("form.qform") === null &&
		[...document.querySelectorAll(".msg.bot .body")].some(b => b.textContent.includes("age: 33") && b.textContent.includes("Name: Ann"))`)
	if text, err := chromedp.Run(bctx, chromedp.Evaluate[string](`document.getElementById("error").textContent`)); err != nil || strings.TrimSpace(text) != "" {
		t.Fatalf("the page shows an error %q (%v)", text, err)
	}
}

// In a real browser: a multi-select is a checkbox per option with the default ticked; the
// user unticks it, ticks two others and submits, and the server gets the list of the two.
func TestWebChatMultiSelectCheckboxesInTheBrowser(t *testing.T) {
	bctx := headless.Start(t)
	e := newEnv(t)
	cfg := e.toml().set("admin", webChatAdmin...).parse(t)
	e.llm.SetHandler(roundModel)
	e.start(cfg)
	e.waitLog("admin listening")
	m := regexp.MustCompile(`admin listening" addr=(\S+)`).FindStringSubmatch(e.logs.String())
	if m == nil {
		t.Fatalf("no admin address in the logs:\n%s", e.logs.String())
	}
	poll := func(what, expr string) {
		t.Helper()
		wait.Until(t, what, func() error {
			ok, err := chromedp.Run(bctx, chromedp.Evaluate[bool](expr))
			if err == nil && !ok {
				html, _ := chromedp.Run(bctx, chromedp.Evaluate[string](`document.getElementById("log").innerHTML`))
				err = fmt.Errorf("the chat shows %s", html)
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
	step("open the chat", chromedp.Navigate("http://"+m[1]+"/chat"), chromedp.WaitVisible(chromedp.ID("text")))
	step("ask for the form", chromedp.SendKeys(chromedp.ID("text"), "ask multi"), chromedp.Click(chromedp.ID("send")))
	step("the form shows", chromedp.WaitVisible(chromedp.CSS(".msg.bot form.qform fieldset.multi")))
	poll("three checkboxes, Tuna ticked", `(() => {
		const boxes = [...document.querySelectorAll("form.qform fieldset.multi input[type=checkbox]")];
		return boxes.length === 3 && boxes.map(b => b.checked).join() === "true,false,false" &&
			document.querySelector("form.qform fieldset.multi").textContent.includes("Salmon");
	})()`)
	step("untick Tuna, tick Salmon and Trout, submit",
		chromedp.Click(chromedp.CSS(`form.qform fieldset.multi input[value="f1"]`)),
		chromedp.Click(chromedp.CSS(`form.qform fieldset.multi input[value="f2"]`)),
		chromedp.Click(chromedp.CSS(`form.qform fieldset.multi input[value="f3"]`)),
		chromedp.Click(chromedp.CSS(`form.qform button[data-choice="submit"]`)),
	)
	poll("the server's answer", fmt.Sprintf(`[...document.querySelectorAll(".msg.bot .body")].some(b => b.textContent.includes(%q))`,
		`tool said: accept {"fish":["f2","f3"]}`))
	poll("the decided form", `document.querySelector("form.qform") === null &&
		[...document.querySelectorAll(".msg.bot .body")].some(b => b.textContent.includes("Fish: Salmon, Trout"))`)
}
