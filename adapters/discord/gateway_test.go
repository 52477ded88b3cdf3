package discord_test

import (
	"testing"
	"testing/synctest"
	"time"

	dtk "relaybot/internal/testkit/discord"
)

func TestGatewayDropDuringStreamingLosesNothing(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		hs := startInBubble(t, nil, nil)
		ch := "500000000000000011"
		_, rc := hs.dm(ch, "stream please")
		full := text(1500)
		r := rc.out.NewReply(hs.ctx)
		runes := []rune(full)
		streamInto(r, string(runes[:600]), 30, 30*time.Millisecond)
		hs.srv.DropGateway()
		// A message sent while the bot is disconnected arrives after the resume.
		if _, err := hs.srv.Post(dtk.UserMessage{ChannelID: ch, AuthorID: userID, Content: "are you there?"}); err != nil {
			t.Fatal(err)
		}
		streamInto(r, full, 30, 30*time.Millisecond)
		if err := r.Finish(hs.ctx, full, nil); err != nil {
			t.Fatalf("Finish: %v", err)
		}
		if got := hs.botText(ch); got != full {
			t.Errorf("final text after a gateway drop:\n got %q\nwant %q", got, full)
		}
		later := hs.next()
		if later.in.Text != "are you there?" {
			t.Errorf("after the resume the handler got %q", later.in.Text)
		}
		if hs.srv.Resumes() < 1 || hs.srv.Identifies() != 1 {
			t.Errorf("resumes = %d, identifies = %d: want the session resumed, not re-identified", hs.srv.Resumes(), hs.srv.Identifies())
		}
		checkBudget(t, hs.srv, ch)
	})
}
