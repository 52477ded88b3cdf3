package telegram

import (
	"errors"
	"net/http"
	"net/url"
	"testing"
	"testing/synctest"

	tk "relaybot/internal/testkit/telegram"
	"relaybot/internal/testkit/wait"
)

// A getUpdates that fails (here a 409: another poller took over, as when a second instance
// starts for a moment) is retried after a pause, and messages sent afterwards are still answered.
func TestPollingGoesOnAfterAFailedGetUpdates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, tk.Options{InMemory: true}, nil)
		col := newCollector()
		stop := startRun(t, e.ad, col)
		defer stop()

		rival := e.srv.BaseURL() + "/bot" + e.srv.Token() + "/getUpdates"
		tr := &http.Transport{DialContext: e.srv.Dial}
		defer tr.CloseIdleConnections()
		client := &http.Client{Transport: tr}
		wait.Until(t, "the bot's getUpdates to be cut off by another poller", func() error {
			resp, err := client.PostForm(rival, url.Values{"timeout": {"0"}})
			if err != nil {
				return err
			}
			resp.Body.Close()
			for _, c := range e.srv.Calls() {
				if c.Method == "getUpdates" && c.Code == http.StatusConflict && c.Params["timeout"] != "0" {
					return nil
				}
			}
			return errors.New("no conflicting getUpdates of the bot's yet")
		})

		dm := tk.Chat{ID: 57}
		e.srv.Send(tk.Inbound{Chat: dm, From: ann, Text: "still there?"})
		if in := col.next(t); in.Text != "still there?" {
			t.Fatalf("the handler got %q after the failed poll, want the message sent after it", in.Text)
		}
		wait.For(t, "the answer to the message sent after the failed poll", func() bool {
			for _, m := range e.srv.BotMessages(dm.ID) {
				if m.Text == "ok: still there?" {
					return true
				}
			}
			return false
		})
	})
}
