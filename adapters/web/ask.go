package web

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"relaybot/adapters"
)

// question is an approval question waiting for a press of one of its buttons.
type question struct {
	msg     *message
	choices []adapters.Choice
	decide  func(adapters.Answer) (bool, string)
	done    chan adapters.Answer // receives the accepted answer; buffered
	settled bool
}

// askResponder is the web chat's Responder with buttons (adapters.Asker).
type askResponder struct {
	adapters.Responder
	chat   *Chat
	chatID string
}

var _ adapters.Asker = askResponder{}

// Ask shows q as a bot message with buttons; a press reaches POST /chat/answer.
func (r askResponder) Ask(ctx context.Context, q adapters.Question, decide func(adapters.Answer) (bool, string)) (adapters.Answer, error) {
	conv := r.chat.byID(r.chatID)
	if conv == nil {
		return adapters.Answer{}, fmt.Errorf("web chat %s is closed: %w", r.chatID, adapters.ErrMessageGone)
	}
	pq := &question{choices: slices.Clone(q.Choices), decide: decide, done: make(chan adapters.Answer, 1)}
	id := randomString(12)
	conv.mu.Lock()
	if conv.questions == nil {
		conv.questions = make(map[string]*question)
	}
	pq.msg = conv.addLocked("bot", q.Text, nil)
	pq.msg.Question, pq.msg.Choices = id, pq.choices
	conv.questions[id] = pq
	conv.mu.Unlock()

	select {
	case ans := <-pq.done:
		return ans, nil
	case <-ctx.Done():
	}
	conv.mu.Lock()
	defer conv.mu.Unlock()
	if pq.settled { // answered as the context ended: the answer stands
		return <-pq.done, nil
	}
	pq.settled = true
	delete(conv.questions, id)
	conv.rev++
	pq.msg.Text += adapters.ClosedText
	pq.msg.Choices, pq.msg.rev = nil, conv.rev
	conv.notifyLocked()
	return adapters.Answer{}, ctx.Err()
}

// answer takes a press of a question's button: form fields q (the question) and choice.
func (c *Chat) answer(w http.ResponseWriter, r *http.Request) {
	conv := c.conversationOf(r)
	if conv == nil {
		http.Error(w, "no chat session: reload /chat", http.StatusUnauthorized)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4096)
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
	ans := adapters.Answer{Choice: r.PostForm.Get("choice"), UserID: conv.id, UserName: name}
	if q := r.PostForm.Get("q"); c.opts.Relay != nil && conv.remoteQuestion(q) {
		// Asked by a turn on another replica: the press goes there, and the question's
		// message shows the decision when that replica settles it.
		c.pressElsewhere(r.Context(), w, conv.id, relayPress{Question: q, Answer: ans})
		return
	}
	err := conv.press(r.PostForm.Get("q"), ans)
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

// press hands a press to its question; an accepted one settles it and shows the decision.
func (c *conversation) press(id string, ans adapters.Answer) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	pq := c.questions[id]
	if pq == nil || pq.settled {
		return errors.New("this question is closed")
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

// pressElsewhere sends a press to the replica that asked the question.
func (c *Chat) pressElsewhere(ctx context.Context, w http.ResponseWriter, chatID string, p relayPress) {
	b, err := json.Marshal(relayEvent{Press: &p})
	if err == nil {
		err = c.opts.Relay.Broadcast(ctx, chatID, b)
	}
	if err != nil {
		c.log.Warn("web chat: press not sent to the replica that asked", "chat", chatID, "err", err)
		http.Error(w, "the answer cannot be passed on now: try again", http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}
