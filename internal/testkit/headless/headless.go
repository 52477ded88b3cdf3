// Package headless starts a headless Chromium for the chromedp browser tests.
package headless

import (
	"context"
	"os"
	"testing"

	"github.com/chromedp/chromedp"
)

// ChromiumPath finds the browser: $BOT_TEST_CHROMIUM, else Debian's /usr/bin/chromium; the test
// is skipped when there is none.
func ChromiumPath(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("BOT_TEST_CHROMIUM"); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("BOT_TEST_CHROMIUM=%s: %v", p, err)
		}
		return p
	}
	const debian = "/usr/bin/chromium"
	if _, err := os.Stat(debian); err != nil {
		t.Skip("browser test skipped: no chromium found (install Debian's chromium with `apt-get install -y chromium`, or set BOT_TEST_CHROMIUM to a Chromium binary)")
	}
	return debian
}

// Start starts a headless Chromium with a fresh profile and returns its chromedp context; the
// browser ends with the test.
func Start(t testing.TB) context.Context {
	t.Helper()
	path := ChromiumPath(t)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("password-store", "basic"),
		chromedp.Flag("use-mock-keychain", true),
		chromedp.WindowSize(1280, 900),
	)
	ctx, cancelCtx := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancelCtx()
		cancelAlloc()
	})
	// The first Run starts the browser; it must not carry the test's timeout.
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start chromium %s: %v", path, err)
	}
	return ctx
}
