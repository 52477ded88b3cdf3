package web

import (
	"cmp"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"relaybot/adapters"
	"relaybot/chat"
)

// question is an approval question waiting for a press of one of its buttons, or a form
// (AskForm) waiting for a submission.
type question struct {
	msg     *message
	choices []adapters.Choice
	decide  func(adapters.Answer) (bool, string)
	done    chan adapters.Answer // receives the accepted answer; buffered
	// stray is told of a press made in another chat (Question.Stray, Form.Stray).
	stray func(adapters.Answer)
	// form, decideForm and formDone are a form's fields, decide hook and accepted answer.
	form       []adapters.FormField
	decideForm func(adapters.FormAnswer) (bool, string)
	formDone   chan adapters.FormAnswer
	settled    bool
}

// Choices of a form's question as the page posts them.
const (
	formSubmit  = "submit"
	formDecline = "decline"
)

// askResponder is the web chat's Responder with buttons (adapters.Asker).
type askResponder struct {
	adapters.Responder
	chat   *Chat
	chatID string
}

var (
	_ adapters.Asker     = askResponder{}
	_ adapters.FormAsker = askResponder{}
)

// Ask shows q as a bot message with buttons; a press reaches POST /chat/answer.
func (r askResponder) Ask(ctx context.Context, q adapters.Question, decide func(adapters.Answer) (bool, string)) (adapters.Answer, error) {
	pq := &question{choices: slices.Clone(q.Choices), decide: decide, stray: q.Stray, done: make(chan adapters.Answer, 1)}
	conv, id, err := r.open(ctx, q.Text, pq)
	if err != nil {
		return adapters.Answer{}, err
	}
	select {
	case ans := <-pq.done:
		r.closeBooked(ctx, id, true)
		return ans, nil
	case <-ctx.Done():
	}
	if conv.closeUnanswered(id, pq) {
		r.closeBooked(ctx, id, false)
		return adapters.Answer{}, ctx.Err()
	}
	r.closeBooked(ctx, id, true)
	return <-pq.done, nil // answered as the context ended: the answer stands
}

// AskForm shows f as a bot message with a form; a submission (or decline) reaches POST
// /chat/answer with choice "submit" (the values as fields "v.NAME") or "decline".
func (r askResponder) AskForm(ctx context.Context, f adapters.Form, decide func(adapters.FormAnswer) (bool, string)) (adapters.FormAnswer, error) {
	pq := &question{form: slices.Clone(f.Fields), decideForm: decide, stray: f.Stray, formDone: make(chan adapters.FormAnswer, 1)}
	conv, id, err := r.open(ctx, f.Text, pq)
	if err != nil {
		return adapters.FormAnswer{}, err
	}
	select {
	case ans := <-pq.formDone:
		r.closeBooked(ctx, id, true)
		return ans, nil
	case <-ctx.Done():
	}
	if conv.closeUnanswered(id, pq) {
		r.closeBooked(ctx, id, false)
		return adapters.FormAnswer{}, ctx.Err()
	}
	r.closeBooked(ctx, id, true)
	return <-pq.formDone, nil
}

// open shows pq's message in the chat and registers it under a new id, in the question book too
// where several replicas serve the bot (before it shows: a page on another replica may press at
// once).
func (r askResponder) open(ctx context.Context, text string, pq *question) (*conversation, string, error) {
	conv := r.chat.byID(r.chatID)
	if conv == nil {
		return nil, "", fmt.Errorf("web chat %s is closed: %w", r.chatID, adapters.ErrMessageGone)
	}
	id := randomString(12)
	if book := r.chat.opts.Questions; book != nil {
		bq := adapters.BookedQuestion{ID: id, Chat: chat.Ref{Platform: chat.Web, ChatID: r.chatID}, Text: text}
		if err := book.Open(ctx, bq, conv.settle); err != nil {
			return nil, "", fmt.Errorf("web chat: record the question for the other replicas: %w", err)
		}
	}
	conv.mu.Lock()
	defer conv.mu.Unlock()
	if conv.questions == nil {
		conv.questions = make(map[string]*question)
	}
	pq.msg = conv.addLocked("bot", text, nil)
	pq.msg.Question, pq.msg.Choices = id, pq.choices
	conv.placeAboveStreamingLocked(pq.msg)
	if pq.form != nil {
		pq.msg.Form = &adapters.Form{Text: text, Fields: pq.form}
	}
	conv.questions[id] = pq
	return conv, id, nil
}

// placeAboveStreamingLocked moves q, the message just added, above the reply still streaming in
// the chat since its user's message (the last with a Stop button), which waits for q's answer: the
// user reads the question before what it unblocks, and the answer goes on below it. c.mu must be
// held.
func (c *conversation) placeAboveStreamingLocked(q *message) {
	for i := len(c.msgs) - 2; i >= 0; i-- {
		m := c.msgs[i]
		if m.Role == "user" {
			return
		}
		if !m.Stop {
			continue
		}
		q.Pos, m.Pos = m.Pos, q.Pos
		slices.SortStableFunc(c.msgs, func(a, b *message) int { return cmp.Compare(a.Pos, b.Pos) })
		c.rev++
		m.rev = c.rev
		c.notifyLocked()
		return
	}
}

// closeBooked records in the question book (where there is one) that question id is over,
// within a deadline of its own: ctx may have ended.
func (r askResponder) closeBooked(ctx context.Context, id string, answered bool) {
	book := r.chat.opts.Questions
	if book == nil {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	book.Close(cctx, id, answered)
}

// settle takes a press or form another replica's page submitted (the question book's settle).
func (c *conversation) settle(p adapters.Press) adapters.Verdict {
	ans := p.Answer
	ans.Choice = p.Choice
	err := c.press(p.Question, ans, p.Values)
	var refused refusedError
	switch {
	case err == nil:
		return adapters.Verdict{Accepted: true}
	case errors.As(err, &refused):
		return adapters.Verdict{Text: refused.text}
	default:
		return adapters.Verdict{Closed: true}
	}
}

// ref names the conversation as a chat: questions asked in it take presses made in it only.
func (c *conversation) ref() chat.Ref { return chat.Ref{Platform: chat.Web, ChatID: c.id} }

// closeUnanswered closes question id after its asker stopped waiting, unless an answer settled
// it meanwhile (false: that answer stands and is waiting in the question's channel).
func (c *conversation) closeUnanswered(id string, pq *question) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if pq.settled {
		return false
	}
	pq.settled = true
	delete(c.questions, id)
	c.rev++
	pq.msg.Text += adapters.ClosedText
	pq.msg.Choices, pq.msg.Form, pq.msg.rev = nil, nil, c.rev
	c.notifyLocked()
	return true
}

// answer takes a press of a question's button: form fields q (the question) and choice.
func (c *Chat) answer(w http.ResponseWriter, r *http.Request) {
	conv := c.conversationOf(r)
	if conv == nil {
		http.Error(w, "no chat session: reload /chat", http.StatusUnauthorized)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxAnswerBytes)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form: "+err.Error(), http.StatusBadRequest)
		return
	}
	token := r.Header.Get("X-CSRF-Token")
	if token == "" {
		token = r.PostForm.Get("csrf")
	}
	if subtle.ConstantTimeCompare([]byte(token), []byte(conv.csrf)) != 1 {
		http.Error(w, "missing or wrong CSRF token: reload /chat", http.StatusForbidden)
		return
	}
	name := c.opts.UserName
	if name == "" {
		name = "web"
	}
	ans := adapters.Answer{Choice: r.PostForm.Get("choice"), UserID: conv.id, UserName: name, Chat: conv.ref()}
	if q := r.PostForm.Get("q"); c.opts.Questions != nil && !conv.holds(q) {
		// Not asked here (or closed): the press goes to the replica whose turn asked, and the
		// question's message shows the decision when that replica settles it.
		c.pressElsewhere(r.Context(), w, conv.id, adapters.Press{Question: q, Choice: ans.Choice, Answer: ans,
			Values: formValues(r.PostForm)})
		return
	}
	err := conv.press(r.PostForm.Get("q"), ans, formValues(r.PostForm))
	var refused refusedError
	switch {
	case err == nil:
		w.WriteHeader(http.StatusNoContent)
	case errors.As(err, &refused):
		http.Error(w, refused.text, http.StatusForbidden)
	default:
		http.Error(w, err.Error(), http.StatusGone)
	}
}

// refusedError is a press the question's decide refused; text says why.
type refusedError struct{ text string }

func (e refusedError) Error() string { return e.text }

// maxAnswerBytes bounds the body of a press or a form's submission.
const maxAnswerBytes = 64 << 10

// formValues are the posted values of a form's fields (form fields "v.NAME"); nil when none.
func formValues(form url.Values) map[string]string {
	var out map[string]string
	for k, vs := range form {
		name, ok := strings.CutPrefix(k, "v.")
		if !ok || len(vs) == 0 {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[name] = vs[0]
	}
	return out
}

// press hands a press to its question (values are a form's submitted values); an accepted one
// settles it and shows the decision. A press made in another chat (one carried from another
// replica's page) is refused and told to the question's stray.
func (c *conversation) press(id string, ans adapters.Answer, values map[string]string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	pq := c.questions[id]
	if pq == nil || pq.settled {
		return errors.New("this question is closed")
	}
	if !adapters.PressedIn(c.ref(), ans.Chat) {
		if pq.stray != nil {
			pq.stray(ans)
		}
		return refusedError{text: adapters.StrayPress}
	}
	if pq.form != nil {
		return c.submitLocked(id, pq, ans, values)
	}
	if !slices.ContainsFunc(pq.choices, func(ch adapters.Choice) bool { return ch.ID == ans.Choice }) {
		return fmt.Errorf("unknown choice %q", ans.Choice)
	}
	ok, text := pq.decide(ans)
	if !ok {
		return refusedError{text: text}
	}
	pq.settled = true
	delete(c.questions, id)
	c.rev++
	pq.msg.Text, pq.msg.Choices, pq.msg.rev = text, nil, c.rev
	c.notifyLocked()
	pq.done <- ans
	return nil
}

// submitLocked hands a form's submission or decline to its question. Values of fields the
// form does not have and empty values are left out. c.mu must be held.
func (c *conversation) submitLocked(id string, pq *question, ans adapters.Answer, values map[string]string) error {
	if ans.Choice != formSubmit && ans.Choice != formDecline {
		return fmt.Errorf("unknown choice %q", ans.Choice)
	}
	fa := adapters.FormAnswer{Decline: ans.Choice == formDecline, UserID: ans.UserID, UserName: ans.UserName, ChatAdmin: ans.ChatAdmin}
	if !fa.Decline {
		fa.Values = map[string]string{}
		for _, f := range pq.form {
			if v := values[f.Name]; strings.TrimSpace(v) != "" {
				fa.Values[f.Name] = v
			}
		}
	}
	ok, text := pq.decideForm(fa)
	if !ok {
		return refusedError{text: text}
	}
	pq.settled = true
	delete(c.questions, id)
	c.rev++
	pq.msg.Text, pq.msg.Form, pq.msg.rev = text, nil, c.rev
	c.notifyLocked()
	pq.formDone <- fa
	return nil
}

// pressElsewhere carries a press to the replica whose turn asked the question and answers with
// its verdict, as a press taken here would be answered.
func (c *Chat) pressElsewhere(ctx context.Context, w http.ResponseWriter, chatID string, p adapters.Press) {
	pctx, cancel := context.WithTimeout(ctx, adapters.PressTimeout)
	defer cancel()
	v, err := c.opts.Questions.Press(pctx, p)
	switch {
	case err != nil:
		c.log.Warn("web chat: press not carried to the replica that asked", "chat", chatID, "err", err)
		http.Error(w, "the answer cannot be passed on now: try again", http.StatusServiceUnavailable)
	case v.Closed:
		http.Error(w, "this question is closed", http.StatusGone)
	case !v.Accepted:
		http.Error(w, v.Text, http.StatusForbidden)
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

// holds reports whether question id was asked here and is open.
func (c *conversation) holds(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	pq := c.questions[id]
	return pq != nil && !pq.settled
}
