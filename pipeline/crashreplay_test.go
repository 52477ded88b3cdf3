package pipeline

import (
	"testing"

	"relaybot/internal/testkit/llm"
)

// A message handed over again once after a crash is answered again (a deploy or a killed
// replica cut it); one handed over a second time (it may be what takes the bot down: the runs
// died before its turn even started) gets one notice and never reaches the model.
func TestMessageThatCrashedTheBotTwiceIsNotTriedAgain(t *testing.T) {
	h := newHarness(t, Options{})
	redelivered := func(id string, n int) *recResponder {
		in := privateMsg("66", id, "read this cursed thing")
		in.Redelivered, in.Redeliveries = true, n
		out := &recResponder{}
		<-h.handle(in, out)
		return out
	}
	out := redelivered("1", 2)
	if got := out.Notices(); len(got) != 1 || got[0] != CrashedTwiceText {
		t.Fatalf("notices %q, want the one line saying it is not tried again", got)
	}
	if out.Reply(0) != nil || h.llm.RequestCount() != 0 {
		t.Fatal("a message that took the bot down twice was answered again")
	}
	h.llm.Push(llm.Text("Answered after the crash."))
	if out := redelivered("2", 1); out.Reply(0) == nil || len(out.Notices()) != 0 {
		t.Fatalf("a message handed over once after a crash was not answered again (notices %q)", out.Notices())
	}
}
