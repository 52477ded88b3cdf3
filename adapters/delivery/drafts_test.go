package delivery

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"relaybot/adapters"
	"relaybot/chat"
)

// draftRecorder is a recorder whose chats stream as drafts (a Telegram private chat).
type draftRecorder struct{ recorder }

func (d *draftRecorder) DraftsIn(chat.Ref) bool { return true }

func (d *draftRecorder) Draft(_ context.Context, _ chat.Ref, _ int64, text string, _ bool) error {
	d.add("draft " + text)
	return nil
}

// An answer that fits one message, streamed as drafts with a preview every few hundred
// milliseconds, ends as one message: a draft is no message that could overflow, so it is not
// finished early the way an edited message about to outgrow its size is (a 3,200-character
// answer reached Telegram as 2,047 + 1,151 characters once previews came every second).
func TestADraftedAnswerThatFitsOneMessageIsSentAsOne(t *testing.T) {
	for _, total := range []int{550, 700, 850, 990} {
		t.Run(fmt.Sprint(total), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := &draftRecorder{recorder{first: make(chan struct{})}}
				e := New(m, adapters.Limits{MaxLen: 1000, Unit: adapters.Runes, PerChat: adapters.Rate{N: 3, Per: time.Second}}, Options{})
				defer e.Close()
				r := e.NewReply(context.Background(), chat.Ref{Platform: "test", ChatID: "1"}, adapters.SendOptions{})
				var b strings.Builder
				for b.Len() < total-10 {
					b.WriteString("word word ") // 10 characters every 50 ms
					r.Update(b.String())
					time.Sleep(50 * time.Millisecond)
				}
				synctest.Wait()
				if err := r.Finish(context.Background(), b.String(), nil); err != nil {
					t.Fatal(err)
				}
				var sends, drafts []string
				for _, l := range m.lines() {
					if strings.HasPrefix(l, "draft ") {
						drafts = append(drafts, l)
					} else {
						sends = append(sends, l)
					}
				}
				if len(drafts) < 3 {
					t.Fatalf("only %d drafts: the test needs previews while the answer grows", len(drafts))
				}
				if len(sends) != 1 || strings.TrimSpace(sends[0]) != "send "+strings.TrimSpace(b.String()) {
					t.Fatalf("the %d-character answer was sent as %d messages (%d drafts before), want one whole message", b.Len(), len(sends), len(drafts))
				}
			})
		})
	}
}
