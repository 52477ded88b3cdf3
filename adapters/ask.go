package adapters

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"slices"
	"sync"
	"time"

	"relaybot/chat"
)

// Choice is one button of a Question.
type Choice struct {
	// ID comes back in Answer.Choice; it is short and plain (Telegram carries it in at most 64
	// bytes of callback data).
	ID    string
	Label string
	// URL, when set, makes the button a link the user opens in the browser; pressing it never
	// answers the question, and the bot never opens the link itself.
	URL string
}

// Question is a message with buttons the bot posts into the chat of a Responder (a tool call
// waiting for approval).
type Question struct {
	Text    string
	Choices []Choice
}

// Answer is one press of a Question's button.
type Answer struct {
	Choice   string
	UserID   string
	UserName string
	// ChatAdmin says the platform reports the presser as an administrator of the chat (a
	// Telegram group's administrators); false where the platform says nothing.
	ChatAdmin bool
}

// Asker is an optional capability of a Responder whose platform can post a question with
// buttons: a Telegram inline keyboard, Discord message buttons, web chat buttons.
type Asker interface {
	// Ask posts q in the chat and hands each press of its buttons to decide, one at a time,
	// until decide accepts one or ctx ends. decide returns whether the press settles the
	// question and a text: for an accepted press the question's new text (its buttons go away);
	// for a refused one the reason, shown to the presser alone where the platform can. When ctx
	// ends first the buttons go away and the question says it was closed unanswered. Ask
	// returns the accepted answer, or ctx's error. decide must not block.
	Ask(ctx context.Context, q Question, decide func(Answer) (accept bool, text string)) (Answer, error)
}

// ClosedText ends the text of a question nobody answered before it closed.
const ClosedText = "\n\nClosed without an answer."

// QuestionMessenger posts and edits the messages of questions for Ask. Each call is one
// request through the platform's delivery engine (delivery.Engine.Do), which paces it with the
// chat's other messages and waits out its 429s.
type QuestionMessenger interface {
	// PostQuestion posts q in chat with a button per choice whose data carries the question's
	// id, and returns the message's id.
	PostQuestion(ctx context.Context, chat chat.Ref, id string, q Question) (messageID string, err error)
	// EditQuestion sets the text of the question's message and takes its buttons off. It
	// reports nothing: a failure is the messenger's to log, since a question left showing its
	// buttons is no reason to fail the turn that asked it.
	EditQuestion(ctx context.Context, chat chat.Ref, messageID, text string)
}

// closeTimeout bounds the edit that closes a question nobody answered; it runs after the
// asker's context ended.
const closeTimeout = 10 * time.Second

// Ask is Asker.Ask for a platform whose questions are messages with buttons (Telegram, Discord):
// it opens q in qs before posting it with m (a press can reach the bot before the post's
// answer), waits for an accepted press or the end of ctx, and when ctx ends first edits the
// message to say it closed unanswered (ClosedText) and to lose its buttons, within a deadline
// of its own. The press that settles a question is the adapter's: it takes it with qs.Press
// and shows the decision.
func Ask(ctx context.Context, qs *Questions, m QuestionMessenger, chat chat.Ref, q Question, decide func(Answer) (bool, string)) (Answer, error) {
	id, oq := qs.Open(chat, q, decide)
	msgID, err := m.PostQuestion(ctx, chat, id, q)
	if err != nil {
		qs.Drop(id)
		return Answer{}, err
	}
	qs.Posted(oq, msgID)
	ans, closed, err := qs.Wait(ctx, id, oq)
	if !closed {
		return ans, err
	}
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
	defer cancel()
	m.EditQuestion(ectx, chat, qs.MessageOf(oq), oq.Text+ClosedText)
	return Answer{}, err
}

// OpenQuestion is a posted Question waiting for an accepted press, as a platform adapter tracks
// it. Its fields are read under the Questions lock.
type OpenQuestion struct {
	Chat chat.Ref
	// MessageID is the platform's id of the question's message; empty until the post is answered.
	MessageID string
	Text      string
	choices   []Choice
	decide    func(Answer) (bool, string)
	done      chan Answer // buffered: the accepted answer
	settled   bool
}

// Questions are an adapter's open questions by id, safe for concurrent use. The zero value is
// ready to use. A question is opened before it is posted, so a press that reaches the bot before
// the platform's answer to the post is taken, not refused as closed.
type Questions struct {
	mu   sync.Mutex
	open map[string]*OpenQuestion
}

// Open registers a question about to be posted in chat and returns its id (random, 16 hex
// characters, for button data) and the question.
func (qs *Questions) Open(chat chat.Ref, q Question, decide func(Answer) (bool, string)) (string, *OpenQuestion) {
	b := make([]byte, 8)
	rand.Read(b) // crypto/rand.Read never fails on supported platforms
	id := hex.EncodeToString(b)
	oq := &OpenQuestion{Chat: chat, Text: q.Text, choices: slices.Clone(q.Choices), decide: decide, done: make(chan Answer, 1)}
	qs.mu.Lock()
	defer qs.mu.Unlock()
	if qs.open == nil {
		qs.open = map[string]*OpenQuestion{}
	}
	qs.open[id] = oq
	return id, oq
}

// Posted records the message id of a posted question.
func (qs *Questions) Posted(oq *OpenQuestion, messageID string) {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	oq.MessageID = messageID
}

// Drop forgets a question whose post failed.
func (qs *Questions) Drop(id string) {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	delete(qs.open, id)
}

// MessageOf returns the question's message id (empty until posted).
func (qs *Questions) MessageOf(oq *OpenQuestion) string {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	return oq.MessageID
}

// Press hands a press of choice on question id to its decide function. It returns the question
// (nil when there is no such open question or choice: the question is closed), whether the press
// settled it, and the text decide gave. An accepted answer is delivered to Wait. messageID, when
// not empty, is the pressed message, recorded if the post's answer has not come yet.
func (qs *Questions) Press(id, choice, messageID string, ans Answer) (oq *OpenQuestion, accepted bool, text string) {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	oq = qs.open[id]
	if oq == nil || oq.settled || !slices.ContainsFunc(oq.choices, func(c Choice) bool { return c.ID == choice }) {
		return nil, false, ""
	}
	ans.Choice = choice
	accepted, text = oq.decide(ans)
	if !accepted {
		return oq, false, text
	}
	oq.settled = true
	delete(qs.open, id)
	if oq.MessageID == "" {
		oq.MessageID = messageID
	}
	oq.done <- ans
	return oq, true, text
}

// Wait returns the accepted answer of question id, or ctx's error when ctx ends first; closed
// then says the question was closed unanswered here and its message should say so (ClosedText)
// and lose its buttons.
func (qs *Questions) Wait(ctx context.Context, id string, oq *OpenQuestion) (ans Answer, closed bool, err error) {
	select {
	case ans := <-oq.done:
		return ans, false, nil
	case <-ctx.Done():
	}
	qs.mu.Lock()
	defer qs.mu.Unlock()
	if oq.settled { // answered as ctx ended: the answer stands
		return <-oq.done, false, nil
	}
	oq.settled = true
	delete(qs.open, id)
	return Answer{}, true, ctx.Err()
}
