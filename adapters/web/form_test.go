package web

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"relaybot/adapters"
	"relaybot/adapters/adapterstest"
	"relaybot/store/storetest"
)

// formHandler asks a form with a text and a number field; an age out of bounds asks the form
// once more (as the pipeline's schema check does), and a second bad answer is declined.
type formHandler struct{ t *testing.T }

func (h formHandler) Handle(ctx context.Context, in adapters.Inbound, out adapters.Responder) {
	if in.Placed != nil {
		in.Placed() // as the pipeline says once the message has its place, before it asks
	}
	fa, ok := out.(adapters.FormAsker)
	if !ok {
		h.t.Error("the web chat's responder cannot ask forms")
		return
	}
	lo, hi := 1.0, 150.0
	form := adapters.Form{Text: "Who are you?", Fields: []adapters.FormField{
		{Name: "name", Title: "Name", Kind: adapters.FieldText, Required: true},
		{Name: "age", Kind: adapters.FieldInteger, Required: true, Min: &lo, Max: &hi},
	}}
	for attempt := 0; ; attempt++ {
		ans, err := fa.AskForm(ctx, form, func(a adapters.FormAnswer) (bool, string) {
			if a.UserID != in.UserID {
				return false, "not yours"
			}
			return true, form.Text + " Answered by " + a.UserName
		})
		if err != nil {
			h.t.Errorf("ask form: %v", err)
			return
		}
		if ans.Decline {
			out.NewReply(ctx).Finish(ctx, "declined by the user", nil)
			return
		}
		age, err := strconv.Atoi(ans.Values["age"])
		if err == nil && age >= 1 && age <= 150 {
			out.NewReply(ctx).Finish(ctx, fmt.Sprintf("hello %s, %d", ans.Values["name"], age), nil)
			return
		}
		if attempt > 0 {
			out.NewReply(ctx).Finish(ctx, "declined: the age broke the form twice", nil)
			return
		}
		form.Text = "Who are you? The age must be 1 to 150."
	}
}

// postAnswer posts to /chat/answer as the page's script does; it returns the status and body.
func (b *browser) postAnswer(csrf string, vals url.Values) (int, string) {
	b.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, b.srv.URL+"/chat/answer", strings.NewReader(vals.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Csrf-Token", csrf)
	resp, err := b.client.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// A tool's form in the web chat, through two replicas joined by a relay (the page on one, the
// turn on the other): the page gets the form's fields with their bounds; another browser's
// session (another chat) and a post without the CSRF token are refused and the form stays open; the values
// posted reach the turn, and the page shows the decided state. A bad value gets a second form,
// and a second bad value is declined.
func TestAToolFormIsAnsweredFromThePage(t *testing.T) {
	for _, tc := range []struct {
		name    string
		answers []url.Values // per form shown
		reply   string
	}{
		{"accepted", []url.Values{{"v.name": {"Ann"}, "v.age": {"33"}}}, "hello Ann, 33"},
		{"asked again", []url.Values{{"v.name": {"Ann"}, "v.age": {"300"}}, {"v.name": {"Ann"}, "v.age": {"30"}}}, "hello Ann, 30"},
		{"bad twice", []url.Values{{"v.name": {"Ann"}, "v.age": {"300"}}, {"v.name": {"Ann"}, "v.age": {"x"}}}, "declined: the age broke the form twice"},
		{"declined", []url.Values{{"choice": {"decline"}}}, "declined by the user"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := storetest.Open(t, storetest.SQLite)
			hub, book := &relayHub{}, &adapterstest.Book{}
			srvs := twoReplicas(t, func() Options {
				return Options{Handler: formHandler{t: t}, Sessions: st.WebChat, Relay: hub.relay(), Questions: book}
			})
			b := newBrowser(t, srvs[0])
			other := newBrowser(t, srvs[0])
			events := b.events(t.Context())
			b.srv = srvs[1]
			b.send("who am I")
			if m := nextMsg(t, events, nil); m.Role != "user" {
				t.Fatalf("the page shows %+v, want the message", m)
			}
			b.srv = srvs[0]
			for i, vals := range tc.answers {
				q := nextMsg(t, events, nil)
				if q.Question == "" || len(q.Form) != 2 || len(q.Choices) != 0 {
					t.Fatalf("form %d: the page shows %+v, want a form", i, q)
				}
				if f := q.Form[1]; f.Name != "age" || f.Kind != "integer" || !f.Required || *f.Min != 1 || *f.Max != 150 || q.Form[0].Label != "Name" {
					t.Fatalf("form %d fields %+v", i, q.Form)
				}
				if i == 1 && !strings.Contains(q.Text, "must be 1 to 150") {
					t.Fatalf("the second form says %q, want what was wrong", q.Text)
				}
				post := url.Values{"q": {q.Question}, "choice": {"submit"}}
				for k, v := range vals {
					post[k] = v
				}
				// Carried to the replica that asked, which refuses it: not its chat's question.
				if code, body := other.postAnswer(other.csrf, post); code != http.StatusForbidden || !strings.Contains(body, adapters.StrayPress) {
					t.Fatalf("another browser's submission: %d %q, want 403 (not its chat's question)", code, body)
				}
				if code, _ := b.postAnswer("wrong", post); code != http.StatusForbidden {
					t.Fatalf("a submission without the session's token: %d, want 403", code)
				}
				if code, body := b.postAnswer(b.csrf, post); code/100 != 2 {
					t.Fatalf("the submission: %d %s", code, body)
				}
				m := nextMsg(t, events, nil)
				if m.ID != q.ID || len(m.Form) != 0 || !strings.HasSuffix(m.Text, "Answered by web") {
					t.Fatalf("after the submission the page shows %+v, want the form decided", m)
				}
			}
			if m := nextMsg(t, events, nil); m.Role != "bot" || m.Text != tc.reply {
				t.Fatalf("the reply is %+v, want %q", m, tc.reply)
			}
		})
	}
}
