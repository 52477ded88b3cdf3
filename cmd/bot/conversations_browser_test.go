package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"relaybot/internal/testkit/headless"
	"relaybot/internal/testkit/llm"
	"relaybot/internal/testkit/wait"
)

// conversationsModel thinks and calls echo for "weather", answers from the tool's result, and
// refuses "fail".
func conversationsModel(r llm.Request) llm.Reply {
	last := r.Messages[len(r.Messages)-1]
	if last.Role == "tool" {
		return llm.Text("Lisbon is sunny, the tool says: " + last.Content)
	}
	switch text := last.Content; {
	case strings.Contains(text, "weather"):
		return llm.Reply{Chunks: []llm.Chunk{{Reasoning: "I should ask the echo tool about Lisbon."},
			{ToolCalls: []llm.ToolCallDelta{{ID: "call_w", Name: "echo", Arguments: `{"text":"clear skies"}`}}}}}
	case strings.Contains(text, "fail"):
		return llm.Reply{Status: 400, Error: "this request is refused"}
	}
	return llm.Text("plain")
}

// In a real browser, after real turns through the pipeline (one with reasoning and a tool call,
// one the model refused): the conversations page's search finds a member's message, its hit
// opens the conversation at that message, and the page shows the tool's line, the reasoning
// folded (its text not shown until opened), the refused turn's "not answered" line and each
// turn's timeline link.
func TestTheConversationsSearchFindsAMessageAndItsPageShowsTheToolAndTheFoldedReasoning(t *testing.T) {
	bctx := headless.Start(t)
	e := newEnv(t)
	cfg := e.toml().set("admin", webChatAdmin...).parse(t)
	e.llm.SetHandler(conversationsModel)
	e.start(cfg)
	base := adminBase(t, e)

	eval := func(expr string) (string, error) {
		return chromedp.Run(bctx, chromedp.Evaluate[string](expr))
	}
	poll := func(what, expr, shown string) {
		t.Helper()
		wait.Until(t, what, func() error {
			ok, err := chromedp.Run(bctx, chromedp.Evaluate[bool](expr))
			if err == nil && !ok {
				text, _ := eval(shown)
				err = fmt.Errorf("the page shows:\n%s", text)
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
	const chatLog = `document.getElementById("log").innerText`
	say := func(text, answer string) {
		t.Helper()
		step("say "+text, chromedp.SendKeys(chromedp.ID("text"), text), chromedp.Click(chromedp.ID("send")))
		poll("the answer to "+text, fmt.Sprintf(`[...document.querySelectorAll(".msg.bot")].some(m => m.textContent.includes(%q))`, answer), chatLog)
	}

	step("open the chat", chromedp.Navigate(base+"/chat"), chromedp.WaitVisible(chromedp.ID("text")))
	say("what is the weather in Lisbon today?", "Lisbon is sunny")
	say("please fail now", "refused")
	// The turn's record is written after its answer is delivered: wait for the answer's row.
	const page = `document.querySelector("main").innerText`
	wait.Until(t, "the turns in the list", func() error {
		step("open the conversations", chromedp.Navigate(base+"/admin/conversations"), chromedp.WaitVisible(chromedp.ID("q")))
		text, err := eval(page)
		if err == nil && (!strings.Contains(text, "1 answered") || !strings.Contains(text, "1 failed")) {
			err = fmt.Errorf("the list shows:\n%s", text)
		}
		return err
	})

	step("search", chromedp.SendKeys(chromedp.ID("q"), "lisbon weather"), chromedp.Submit(chromedp.ID("q")))
	poll("the hit", `[...document.querySelectorAll(".hit")].some(h => h.querySelector("mark") && h.textContent.includes("what is the weather in Lisbon today?"))`, page)
	if n, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll(".hit").length`)); err != nil || n != 1 {
		text, _ := eval(page)
		t.Fatalf("the search lists %d hits (%v), want the member's message only (the answer says Lisbon, not weather):\n%s", n, err, text)
	}
	href, err := eval(`document.querySelector(".hit a.hitlink").getAttribute("href")`)
	if err != nil || !strings.HasPrefix(href, "/admin/conversations/") || !strings.Contains(href, "#m") {
		t.Fatalf("the hit links to %q (%v), want the conversation page at the message", href, err)
	}
	step("open the hit", chromedp.Navigate(base+href))
	poll("the conversation page", `!!document.querySelector(".transcript")`, `document.body.innerText`)

	poll("the hit's message is the page's target", `(() => { const m = document.querySelector(location.hash);
		return !!m && m.classList.contains("member") && m.textContent.includes("weather in Lisbon"); })()`, page)
	poll("the tool's line", `[...document.querySelectorAll(".toolline .tool")].some(t => t.textContent === "echo")`, page)
	poll("the reasoning folded", `(() => {
		const d = [...document.querySelectorAll("details.reasoning")].find(d => d.textContent.includes("ask the echo tool"));
		return !!d && !d.open && !document.querySelector("main").innerText.includes("ask the echo tool");
	})()`, page)
	text, err := eval(page)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Lisbon is sunny, the tool says: clear skies", "not answered: refused", "please fail now"} {
		if !strings.Contains(text, want) {
			t.Errorf("the conversation page lacks %q:\n%s", want, text)
		}
	}
	if n, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll('.turn a.timeline[href^="/admin/turns/"]').length`)); err != nil || n != 2 {
		t.Errorf("%d turns link to their timeline (%v), want 2", n, err)
	}
	step("open the reasoning", chromedp.Click(chromedp.CSS("details.reasoning summary")))
	poll("the reasoning shown once opened", `document.querySelector("main").innerText.includes("ask the echo tool")`, page)
}
