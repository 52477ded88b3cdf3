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

	"relaybot/store/storetest"
)

// On a phone's 390 px every admin page fits the screen: no page is wider than it (tables stack,
// long texts wrap), and every navigation entry is on the screen, not scrolled out of sight.
func TestBrowserEveryPageFitsAPhone(t *testing.T) {
	bctx := newBrowser(t)
	st := storetest.Open(t, storetest.SQLite)
	seed := seedStore(t, st)
	turn := seedStory(t, st)
	timeline := seedTimeline(t, st)
	_, ts := newTestServer(t, st, "")
	ctx, cancel := context.WithTimeout(bctx, 2*time.Minute)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile)); err != nil {
		t.Fatal(err)
	}
	pages := []string{"/admin/", "/admin/?range=month", "/admin/calls", fmt.Sprintf("/admin/calls/%d", seed.calls[1].ID),
		"/admin/turns", fmt.Sprintf("/admin/turns/%d", turn), fmt.Sprintf("/admin/turns/%d", timeline),
		"/admin/stats", "/admin/servers", "/admin/replicas", "/admin/usage", "/admin/consents", "/admin/memories",
		"/admin/tasks", "/admin/conversations", "/admin/conversations/1", "/admin/knowledge", "/admin/settings"}
	for _, path := range pages {
		if err := chromedp.Do(ctx, chromedp.Navigate(ts.URL+path), chromedp.WaitVisible(chromedp.CSS("main"))); err != nil {
			t.Fatalf("open %s: %v", path, err)
		}
		wide, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`(() => {
			const w = window.innerWidth;
			const over = [...document.querySelectorAll("main *, header *")].filter(e => {
				const r = e.getBoundingClientRect();
				return r.width > 0 && (r.right > w + 1 || r.left < -1) && !e.closest("details:not([open]), thead");
			});
			return (document.documentElement.scrollWidth > w ? ["the page (" + document.documentElement.scrollWidth + " px)"] : [])
				.concat(over.slice(0, 5).map(e => e.tagName.toLowerCase() + "." + e.className + " " + Math.round(e.getBoundingClientRect().right) + " px"));
		})()`))
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(wide) > 0 {
			t.Errorf("at 390 px %s is wider than the screen: %s", path, strings.Join(wide, ", "))
		}
		off, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("header.top nav a")].filter(a => {
			const r = a.getBoundingClientRect();
			return r.width === 0 || r.left < 0 || r.right > window.innerWidth;
		}).map(a => a.textContent)`))
		if err != nil || len(off) > 0 {
			t.Errorf("at 390 px %s's navigation has entries off the screen: %v (%v)", path, off, err)
		}
		if dir := os.Getenv("BOT_SCREENSHOT_DIR"); dir != "" {
			png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
			if err != nil {
				t.Fatal(err)
			}
			name := "phone" + strings.NewReplacer("/", "-", "?", "-", "=", "-").Replace(path) + ".png"
			if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}
