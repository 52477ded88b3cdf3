package adapters

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"relaybot/chat"
)

func approveOnly(a Answer) (bool, string) {
	if a.UserID != "admin" {
		return false, "Only an admin may answer."
	}
	return true, "Approved by " + a.UserID
}

var yesNo = Question{Text: "Run fetch_url?", Choices: []Choice{{ID: "approve", Label: "Approve"}, {ID: "deny", Label: "Deny"}}}

// A press that reaches the bot before the platform answered the post is taken: the question is
// open from before it is posted, and the pressed message becomes its message.
func TestAPressBeforeThePostIsAnsweredCounts(t *testing.T) {
	var qs Questions
	ref := chat.Ref{Platform: chat.Telegram, ChatID: "5"}
	id, oq := qs.Open(ref, yesNo, approveOnly)
	if got, accepted, _ := qs.Press(id, "approve", "77", Answer{UserID: "admin", Chat: ref}); got == nil || !accepted {
		t.Fatalf("a press before the post's answer was refused")
	}
	qs.Posted(oq, "77")
	ans, closed, err := qs.Wait(context.Background(), id, oq)
	if err != nil || closed || ans.Choice != "approve" || ans.UserID != "admin" {
		t.Fatalf("Wait = %+v closed=%v err=%v, want admin's approval", ans, closed, err)
	}
	if qs.MessageOf(oq) != "77" {
		t.Errorf("message id = %q, want the pressed message 77", qs.MessageOf(oq))
	}
}

func TestPressesAreRefusedOrClosedAsTheUserWouldSee(t *testing.T) {
	for _, tc := range []struct {
		name         string
		choice, user string
		cancelFirst  bool
		wantOpen     bool
		wantAccepted bool
		wantText     string
	}{
		{"a bystander is told why", "approve", "bob", false, true, false, "Only an admin may answer."},
		{"a choice the question lacks is closed", "always", "admin", false, false, false, ""},
		{"a press after the question closed", "approve", "admin", true, false, false, ""},
		{"the admin settles it", "deny", "admin", false, true, true, "Approved by admin"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var qs Questions
			ref := chat.Ref{Platform: chat.Discord, ChatID: "9"}
			id, oq := qs.Open(ref, yesNo, approveOnly)
			qs.Posted(oq, "m1")
			if tc.cancelFirst {
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				if _, closed, err := qs.Wait(ctx, id, oq); !closed || err == nil {
					t.Fatalf("Wait after the end of the turn: closed=%v err=%v, want closed with the context's error", closed, err)
				}
			}
			got, accepted, text := qs.Press(id, tc.choice, "m1", Answer{UserID: tc.user, Chat: ref})
			if (got != nil) != tc.wantOpen || accepted != tc.wantAccepted || text != tc.wantText {
				t.Fatalf("Press = open %v, accepted %v, %q; want open %v, accepted %v, %q", got != nil, accepted, text, tc.wantOpen, tc.wantAccepted, tc.wantText)
			}
		})
	}
}

// A question takes presses made in its own chat and thread only: its button's data replayed
// from a bot message in another chat, another forum topic, or a message the platform names no
// chat of is refused without reaching decide, even from someone decide would accept (an admin
// of the other chat), and the question's Stray is told who tried. The question stays open.
func TestAPressFromOutsideTheQuestionsChatIsRefused(t *testing.T) {
	asked := chat.Ref{Platform: chat.Telegram, ChatID: "-100", ThreadID: "7"}
	for _, tc := range []struct {
		name    string
		pressed chat.Ref
	}{
		{"another group", chat.Ref{Platform: chat.Telegram, ChatID: "-200"}},
		{"another topic of the group", chat.Ref{Platform: chat.Telegram, ChatID: "-100", ThreadID: "8"}},
		{"the group outside its topics", chat.Ref{Platform: chat.Telegram, ChatID: "-100"}},
		{"another platform", chat.Ref{Platform: chat.Discord, ChatID: "-100", ThreadID: "7"}},
		{"no chat named", chat.Ref{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var qs Questions
			var strays []Answer
			q := yesNo
			q.Stray = func(a Answer) { strays = append(strays, a) }
			decided := false
			id, oq := qs.Open(asked, q, func(a Answer) (bool, string) { decided = true; return approveOnly(a) })
			qs.Posted(oq, "m1")
			if !qs.Stray(id, tc.pressed) {
				t.Errorf("Stray(%v) = false: the adapter would ask the other chat about the presser's rights", tc.pressed)
			}
			got, accepted, text := qs.Press(id, "approve", "m9", Answer{UserID: "admin", ChatAdmin: true, Chat: tc.pressed})
			if got == nil || accepted || text != StrayPress {
				t.Fatalf("Press from %v = open %v, accepted %v, %q; want refused with %q", tc.pressed, got != nil, accepted, text, StrayPress)
			}
			if decided {
				t.Error("the stray press reached decide")
			}
			if len(strays) != 1 || strays[0].UserID != "admin" || strays[0].Chat != tc.pressed || strays[0].Choice != "approve" {
				t.Errorf("Stray told %+v, want the admin's press from %v", strays, tc.pressed)
			}
			if got, accepted, _ := qs.Press(id, "approve", "m1", Answer{UserID: "admin", Chat: asked}); got == nil || !accepted {
				t.Error("the question did not stay open for a press in its own chat")
			}
		})
	}
}

// poster is a QuestionMessenger that records the questions' messages; post, when set, answers
// PostQuestion instead.
type poster struct {
	mu    sync.Mutex
	post  func(ctx context.Context, id string) (string, error)
	edits []string
	ids   chan string // receives each posted question's id
}

func (p *poster) PostQuestion(ctx context.Context, _ chat.Ref, id string, _ Question) (string, error) {
	p.ids <- id
	if p.post != nil {
		return p.post(ctx, id)
	}
	return "m-" + id, nil
}

func (p *poster) EditQuestion(ctx context.Context, _ chat.Ref, messageID, text string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if ctx.Err() != nil {
		text = "(not edited: " + ctx.Err().Error() + ")"
	}
	p.edits = append(p.edits, messageID+": "+text)
}

func (p *poster) edited() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.edits)
}

// Ask's flow as the user sees it: a press settles the question (the adapter shows the
// decision); a question nobody answers before the turn ends is edited to say it closed, even
// when the turn ended while its post was still on its way; a post that fails leaves no
// question to press.
func TestAskPostsWaitsAndClosesTheQuestion(t *testing.T) {
	ref := chat.Ref{Platform: chat.Telegram, ChatID: "5"}
	for _, tc := range []struct {
		name      string
		post      func(cancel context.CancelFunc) func(ctx context.Context, id string) (string, error)
		press     bool
		wantErr   bool
		wantEdits []string
	}{
		{name: "a press settles it", press: true},
		{name: "the turn ends first", wantErr: true, wantEdits: []string{"m-ID: " + yesNo.Text + ClosedText}},
		{name: "the turn ends while the post is on its way", wantErr: true,
			post: func(cancel context.CancelFunc) func(context.Context, string) (string, error) {
				return func(_ context.Context, id string) (string, error) {
					cancel() // the post went out whole (delivery.Request.Detached)
					return "m-" + id, nil
				}
			},
			wantEdits: []string{"m-ID: " + yesNo.Text + ClosedText}},
		{name: "the post fails", wantErr: true,
			post: func(context.CancelFunc) func(context.Context, string) (string, error) {
				return func(context.Context, string) (string, error) { return "", errors.New("403 Forbidden") }
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var qs Questions
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			p := &poster{ids: make(chan string, 1)}
			if tc.post != nil {
				p.post = tc.post(cancel)
			}
			type result struct {
				ans Answer
				err error
			}
			done := make(chan result, 1)
			go func() {
				ans, err := Ask(ctx, &qs, p, ref, yesNo, approveOnly)
				done <- result{ans, err}
			}()
			id := <-p.ids
			if tc.press {
				if oq, accepted, _ := qs.Press(id, "approve", "", Answer{UserID: "admin", Chat: ref}); oq == nil || !accepted {
					t.Fatal("the admin's press was not taken")
				}
			} else if tc.post == nil {
				cancel()
			}
			r := <-done
			if (r.err != nil) != tc.wantErr || tc.press && r.ans.UserID != "admin" {
				t.Fatalf("Ask = %+v, %v; want an error: %v", r.ans, r.err, tc.wantErr)
			}
			var want []string
			for _, e := range tc.wantEdits {
				want = append(want, strings.ReplaceAll(e, "ID", id))
			}
			if got := p.edited(); !slices.Equal(got, want) {
				t.Errorf("edits %q, want %q", got, want)
			}
			if oq, _, _ := qs.Press(id, "approve", "", Answer{UserID: "admin"}); oq != nil {
				t.Error("the question still takes presses after Ask returned")
			}
		})
	}
}
