package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"relaybot/internal/testkit/headless"
	"relaybot/internal/testkit/llm"
	"relaybot/internal/testkit/wait"
)

// overviewModel answers "tool" with a call of the kit's echo, "fail" with a refusal, and
// anything else in words.
func overviewModel(r llm.Request) llm.Reply {
	last := r.Messages[len(r.Messages)-1]
	switch {
	case last.Role == "tool":
		return llm.Text("tool said: " + last.Content)
	case strings.HasSuffix(last.Content, "tool"):
		return llm.ToolCalls(llm.Call{ID: "call_1", Name: "echo", Args: []string{`{"text":"hi"}`}})
	case strings.HasSuffix(last.Content, "fail"):
		return llm.Reply{Status: http.StatusBadRequest, Error: "this request is refused"}
	}
	return llm.Text("A plain answer.")
}

// overviewTotals is the part of /api/v1/overview the test waits for.
type overviewTotals struct {
	Total struct {
		Turns      int `json:"turns"`
		TurnErrors int `json:"turn_errors"`
		Final      struct {
			N int `json:"n"`
		} `json:"final"`
	} `json:"total"`
}

// In a real browser, after a few real turns through the pipeline (the testkit's model, the
// kit's MCP tool, a refused one): the overview's charts draw them, the turns chart's bars add up
// to the turns, and a bar opens the turns behind it; at a phone's 390 px every navigation entry
// is within the screen, the narrow charts show, and a turn's timeline reads as a list that does
// not overflow the screen.
func TestOverviewInTheBrowserChartsRealTurnsAndFitsAPhone(t *testing.T) {
	bctx := headless.Start(t)
	e := newEnv(t)
	cfg := e.toml().set("admin", webChatAdmin...).parse(t)
	e.llm.SetHandler(overviewModel)
	e.start(cfg)
	base := adminBase(t, e)
	w := openWebChat(t, base)
	for _, say := range []struct{ text, reply string }{
		{"hello", "A plain answer."}, {"use the tool", "tool said:"}, {"again", "A plain answer."}, {"please fail", "refused"},
	} {
		answers := func() int {
			return w.count(func(m webMsg) bool { return m.Role != "user" && strings.Contains(m.Text, say.reply) })
		}
		before := answers()
		w.say(say.text)
		wait.For(t, "the answer to "+say.text, func() bool { return answers() > before })
	}
	// The turns are saved after their replies: wait for the four, the three answered with a final.
	wait.Until(t, "the overview counting the four turns", func() error {
		resp, err := http.Get(base + "/api/v1/overview")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		var ov overviewTotals
		if err := json.NewDecoder(resp.Body).Decode(&ov); err != nil {
			return err
		}
		if ov.Total.Turns != 4 || ov.Total.TurnErrors != 1 || ov.Total.Final.N < 3 {
			return fmt.Errorf("the overview has %+v", ov.Total)
		}
		return nil
	})

	eval := func(expr string, into any) {
		t.Helper()
		raw, err := chromedp.Run(bctx, chromedp.Evaluate[json.RawMessage](expr))
		if err == nil {
			err = json.Unmarshal(raw, into)
		}
		if err != nil {
			t.Fatalf("evaluate %s: %v", expr, err)
		}
	}
	step := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(bctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	step("open the overview", chromedp.EmulateViewport(1280, 900), chromedp.Navigate(base+"/admin/"),
		chromedp.WaitVisible(chromedp.ID("chart-turns-wide")))
	screenshot(t, bctx, "overview-desktop")
	var drawn struct {
		Turns    float64 `json:"turns"`
		Failed   float64 `json:"failed"`
		Tall     bool    `json:"tall"`
		Charts   int     `json:"charts"`
		FirstURL string  `json:"first_url"`
	}
	eval(`(() => {
		const svg = document.getElementById("chart-turns-wide");
		const bars = [...svg.querySelectorAll("rect.bar")];
		const sum = cls => bars.filter(b => b.classList.contains(cls)).reduce((n, b) => n + Number(b.dataset.value), 0);
		const shown = [...document.querySelectorAll("svg.chart.ov")].filter(s => s.getBoundingClientRect().height > 0);
		return {turns: sum("ok") + sum("err"), failed: sum("err"),
			tall: bars.every(b => b.getBoundingClientRect().height >= 1),
			charts: shown.length, first_url: bars[0].parentElement.getAttribute("href")};
	})()`, &drawn)
	if drawn.Turns != 4 || drawn.Failed != 1 || !drawn.Tall || drawn.Charts != 9 {
		t.Fatalf("the overview draws %+v, want bars for 4 turns (1 failed), each visible, in 9 charts", drawn)
	}
	step("open a bar's turns", chromedp.Navigate(base+drawn.FirstURL), chromedp.WaitVisible(chromedp.CSS("table.turns")))
	var rows int
	eval(`document.querySelectorAll("table.turns tbody tr").length`, &rows)
	if rows < 1 {
		t.Fatalf("the bar %s opens no turns", drawn.FirstURL)
	}
	var turnURL string
	eval(`document.querySelector("table.turns a.timeline").getAttribute("href")`, &turnURL)

	// A phone.
	step("a phone's screen", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile),
		chromedp.Navigate(base+"/admin/"), chromedp.WaitVisible(chromedp.ID("chart-turns-narrow")))
	screenshot(t, bctx, "overview-phone")
	var off []string
	eval(`[...document.querySelectorAll("header.top nav a, header.top .brand")].filter(a => {
		const r = a.getBoundingClientRect();
		return r.width === 0 || r.left < 0 || r.right > window.innerWidth;
	}).map(a => a.textContent)`, &off)
	if len(off) > 0 {
		t.Errorf("at 390 px these navigation entries are off the screen or hidden: %v", off)
	}
	var wide bool
	eval(`document.getElementById("chart-turns-wide").getBoundingClientRect().height > 0`, &wide)
	if wide {
		t.Error("at 390 px the overview shows its wide charts, not the narrow ones")
	}
	step("a turn's timeline on the phone", chromedp.Navigate(base+turnURL), chromedp.WaitVisible(chromedp.CSS("table.timeline")))
	screenshot(t, bctx, "timeline-phone")
	var timeline struct {
		Overflow bool `json:"overflow"`
		Rows     int  `json:"rows"`
		Narrow   bool `json:"narrow"`
	}
	eval(`(() => {
		const rows = [...document.querySelectorAll("table.timeline tbody tr")];
		return {overflow: document.documentElement.scrollWidth > window.innerWidth,
			rows: rows.length,
			narrow: rows.every(r => r.getBoundingClientRect().right <= window.innerWidth && r.getBoundingClientRect().height > 0)};
	})()`, &timeline)
	if timeline.Overflow || timeline.Rows == 0 || !timeline.Narrow {
		t.Errorf("at 390 px the timeline = %+v, want its rows as a list within the screen", timeline)
	}
}

// screenshot saves the browser's page to BOT_SCREENSHOT_DIR, when set, to look at.
func screenshot(t *testing.T, bctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv("BOT_SCREENSHOT_DIR")
	if dir == "" {
		return
	}
	png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}
