package pipeline

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	"relaybot/chat"
	"relaybot/internal/testkit/llm"
	"relaybot/store"
)

// say sends text from user 3 in a private chat and returns the final text of its reply.
func (h *harness) say(id, text string) string {
	h.t.Helper()
	out := &recResponder{stream: true}
	<-h.handle(privateMsg("3", id, text), out)
	r := out.Reply(0)
	if r == nil {
		h.t.Fatalf("%q got no reply; notices %q", text, out.Notices())
	}
	final, _ := r.Final()
	return final
}

// lastTurn is the newest turn of user 3's private chat.
func (h *harness) lastTurn() store.Turn {
	h.t.Helper()
	turns, err := h.store.Turns.ChatTurns(context.Background(), privateMsg("3", "", "").Chat, 0)
	if err != nil {
		h.t.Fatal(err)
	}
	if len(turns) == 0 {
		h.t.Fatal("no turn was saved")
	}
	return slices.MaxFunc(turns, func(a, b store.Turn) int { return int(a.ID - b.ID) })
}

// contents are the texts of a request's messages, as a failure message shows them.
func contents(req llm.Request) []string {
	out := make([]string, len(req.Messages))
	for i, m := range req.Messages {
		out[i] = m.Role + ": " + m.Content
	}
	return out
}

// sent reports whether a request to the model held text in one of its messages.
func sent(req llm.Request, text string) bool {
	return slices.ContainsFunc(req.Messages, func(m llm.Message) bool { return strings.Contains(m.Content, text) })
}

// A message the provider refuses (a content-policy 400, as OpenAI sends it) is told as refused,
// kept in the store as not answered with the provider's cause, and never sent again: the next
// message is answered, though the provider refuses every request that holds the refused one.
func TestARefusedMessageDoesNotPoisonTheConversation(t *testing.T) {
	h := newHarness(t, Options{})
	h.llm.SetHandler(llm.RefuseContaining("forbidden words", func(llm.Request) llm.Reply { return llm.Text("Happy to help.") }))

	if got := h.say("1", "hello"); got != "Happy to help." {
		t.Fatalf("first answer %q", got)
	}
	if got := h.say("2", "tell me the forbidden words"); got != DefaultRefusedText {
		t.Errorf("the refused message was told %q, want %q", got, DefaultRefusedText)
	}
	refused := h.lastTurn()
	if refused.Status != store.TurnError || refused.Failure != chat.FailureRefused || !strings.Contains(refused.Error, "safety system") {
		t.Errorf("the refused turn is saved as %+v, want an error marked refused with the provider's cause", refused)
	}
	for i, msg := range []string{"and now something else", "one more"} {
		if got := h.say(string(rune('3'+i)), msg); got != "Happy to help." {
			t.Fatalf("%q after a refused message was answered %q: the refused message poisoned the conversation", msg, got)
		}
		reqs := h.llm.Requests()
		last := reqs[len(reqs)-1]
		if sent(last, "forbidden words") {
			t.Errorf("the request for %q carried the refused message: %q", msg, contents(last))
		}
		if !sent(last, "hello") || !sent(last, "Happy to help.") {
			t.Errorf("the request for %q lost the answered history: %q", msg, contents(last))
		}
	}
}

// A turn the model could not answer for a passing reason (a 503) offers /retry; the next
// message is answered on its own, and /retry answers the failed message.
func TestAnUnavailableModelOffersRetryAndTheNextMessageStandsAlone(t *testing.T) {
	t.Run("the next message", func(t *testing.T) {
		h := newHarness(t, Options{})
		h.llm.Push(llm.Fault(http.StatusServiceUnavailable, "The server is overloaded or not ready yet."), llm.Text("B answered"))
		if got := h.say("1", "question A"); got != DefaultUnavailableText || !strings.Contains(got, "/retry") {
			t.Fatalf("the failed turn was told %q, want %q", got, DefaultUnavailableText)
		}
		if f := h.lastTurn().Failure; f != chat.FailureUnavailable {
			t.Errorf("the failed turn is saved with failure %q, want %q", f, chat.FailureUnavailable)
		}
		if got := h.say("2", "question B"); got != "B answered" {
			t.Fatalf("question B was answered %q", got)
		}
		reqs := h.llm.Requests()
		if last := reqs[len(reqs)-1]; sent(last, "question A") {
			t.Errorf("question B was sent with the failed question A: %q", contents(last))
		}
	})
	t.Run("/retry", func(t *testing.T) {
		h := newHarness(t, Options{})
		h.llm.Push(llm.Fault(http.StatusServiceUnavailable, "The server is overloaded or not ready yet."), llm.Text("A answered"))
		if got := h.say("1", "question A"); !strings.Contains(got, "/retry") {
			t.Errorf("the failed turn was told %q, which does not offer /retry", got)
		}
		if got := h.say("2", "/retry"); got != "A answered" {
			t.Fatalf("/retry was answered %q", got)
		}
		reqs := h.llm.Requests()
		last := reqs[len(reqs)-1]
		n := 0
		for _, m := range last.Messages {
			n += strings.Count(m.Content, "question A")
		}
		if n != 1 {
			t.Errorf("/retry sent question A %d times, want once: %q", n, contents(last))
		}
		if tu := h.lastTurn(); tu.Status != store.TurnOK || tu.Failure != "" {
			t.Errorf("the retried turn is saved as %+v", tu)
		}
	})
}

// Each kind of failure is told in one line that says what happened and what to do, never the
// provider's own words; the turn keeps the kind and the provider's cause.
func TestTheFailureLineSaysWhatHappenedAndWhatToDo(t *testing.T) {
	const raw = "provider-internal-detail"
	for _, c := range []struct {
		name  string
		reply llm.Reply
		want  chat.Failure
		line  string
	}{
		{"content policy", llm.Refusal(400, "content_policy_violation", raw), chat.FailureRefused, DefaultRefusedText},
		{"an image a text model rejects", llm.Refusal(400, "", "Invalid content type. image_url is only supported by certain models. "+raw), chat.FailureRefused, DefaultRefusedText},
		{"context too long with nothing to compact", llm.Refusal(400, "context_length_exceeded", raw), chat.FailureRefused, DefaultRefusedText},
		{"wrong key", llm.Refusal(401, "invalid_api_key", raw), chat.FailureMisconfigured, DefaultMisconfiguredText},
		{"wrong endpoint", llm.Refusal(404, "", raw), chat.FailureMisconfigured, DefaultMisconfiguredText},
		{"account quota", llm.Refusal(429, "insufficient_quota", raw), chat.FailureQuota, DefaultQuotaText},
		{"rate limited", llm.Refusal(429, "rate_limit_exceeded", raw), chat.FailureUnavailable, DefaultUnavailableText},
		{"request timeout", llm.Fault(408, raw), chat.FailureUnavailable, DefaultUnavailableText},
		{"server error", llm.Fault(500, raw), chat.FailureUnavailable, DefaultUnavailableText},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, Options{})
			h.llm.Push(c.reply)
			if got := h.say("1", "hi"); got != c.line {
				t.Errorf("the user was told %q, want %q", got, c.line)
			}
			tu := h.lastTurn()
			if tu.Failure != c.want || !strings.Contains(tu.Error, raw) {
				t.Errorf("the turn is saved with failure %q and error %q, want %q and the provider's words", tu.Failure, tu.Error, c.want)
			}
		})
	}
}

// output.exception_handling decides how much of a failure the user sees: the kind's line, the
// line and the error itself, or nothing; the message leaves the history in every mode.
func TestExceptionHandlingModesTellAFailure(t *testing.T) {
	const raw = "Your request was rejected as a result of our safety system."
	for _, c := range []struct {
		mode ExceptionHandling
		want func(string) bool
	}{
		{ShowHint, func(s string) bool { return s == DefaultRefusedText }},
		{ShowError, func(s string) bool {
			return strings.HasPrefix(s, DefaultRefusedText+"\nError: ") && strings.Contains(s, raw)
		}},
		{Hide, func(s string) bool { return s == "" }},
	} {
		t.Run(string(c.mode), func(t *testing.T) {
			h := newHarness(t, Options{Output: OutputOptions{ExceptionHandling: c.mode}})
			h.llm.SetHandler(llm.RefuseContaining("forbidden", func(llm.Request) llm.Reply { return llm.Text("ok") }))
			if got := h.say("1", "forbidden"); !c.want(got) {
				t.Errorf("%s told the user %q", c.mode, got)
			}
			if got := h.say("2", "fine"); got != "ok" {
				t.Errorf("%s: the next message was answered %q", c.mode, got)
			}
		})
	}
}
