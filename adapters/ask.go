package adapters

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
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
	// Stray, when set, is told of each press of the question's buttons made outside its chat
	// (another chat, another thread, or a chat the platform does not name): such a press is
	// refused (StrayPress) without reaching decide, and Stray records who tried (the audit
	// log). It must not block.
	Stray func(Answer) `json:"-"`
}

// Answer is one press of a Question's button.
type Answer struct {
	Choice   string
	UserID   string
	UserName string
	// ChatAdmin says the platform reports the presser as an administrator of Chat (a Telegram
	// group's administrators); false where the platform says nothing. A press is taken only
	// in its question's chat, so the rights decide sees are always the question chat's.
	ChatAdmin bool
	// Chat is the chat, and thread, the press was made in, as the platform reports it (zero when
	// it does not say). A question takes only the presses made in its own chat and thread: a
	// button's data can be replayed from any message the bot posted.
	Chat chat.Ref
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

// Decision is what a question makes of one press of its buttons (RedrawAsker).
type Decision struct {
	// Accept says the press settles the question; Text is then its new text (its buttons go
	// away).
	Accept bool
	// Redraw, when Accept is false and Redraw is not nil, takes the press without settling the
	// question: its buttons become Redraw, shown on the same message (never a new one), the
	// question waits on, and the presser is told nothing.
	Redraw []Choice
	// Text is the settled question's text, or why the press was refused, shown to the presser
	// alone; unused by a redraw.
	Text string
}

// RedrawAsker is an optional capability of an Asker whose platform can change a question's
// buttons in place (a Telegram inline keyboard, Discord message buttons): a press may redraw
// the question instead of settling it, as a multi-select's toggles do.
type RedrawAsker interface {
	// AskRedraw is Ask whose decide may also redraw the question (Decision.Redraw): the
	// question's message then shows the new buttons, edited in the answer to the press where
	// the platform has one (Telegram's editMessageReplyMarkup, Discord's UPDATE_MESSAGE), and
	// the question waits on. decide must not block.
	AskRedraw(ctx context.Context, q Question, decide func(Answer) Decision) (Answer, error)
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

// QuestionRedrawer is an optional capability of a QuestionMessenger whose questions can be
// redrawn (RedrawAsker): it sets the buttons of question id's message, keeping its text, when a
// redrawing press reached this replica from another one, which answered the press itself. A
// failure is the redrawer's to log.
type QuestionRedrawer interface {
	RedrawQuestion(ctx context.Context, chat chat.Ref, id, messageID string, choices []Choice)
}

// closeTimeout bounds the edit that closes a question nobody answered; it runs after the
// asker's context ended.
const closeTimeout = 10 * time.Second

// Ask is Asker.Ask for a platform whose questions are messages with buttons (Telegram, Discord):
// it opens q in qs (and in qs.Book, where several replicas serve the bot) before posting it
// with m (a press can reach the bot before the post's answer), waits for an accepted press or
// the end of ctx, and when ctx ends first edits the message to say it closed unanswered
// (ClosedText) and to lose its buttons, within a deadline of its own. The press that settles a
// question here is the adapter's: it takes it with qs.Press and shows the decision. A press
// another replica received and carried here (QuestionBook) is shown here: Ask edits the
// message to the decision.
func Ask(ctx context.Context, qs *Questions, m QuestionMessenger, chat chat.Ref, q Question, decide func(Answer) (bool, string)) (Answer, error) {
	return AskRedraw(ctx, qs, m, chat, q, settleOnly(decide))
}

// settleOnly is a decide of Ask as a RedrawAsker's: a press settles the question or is refused.
func settleOnly(decide func(Answer) (bool, string)) func(Answer) Decision {
	return func(a Answer) Decision {
		ok, text := decide(a)
		return Decision{Accept: ok, Text: text}
	}
}

// AskRedraw is Ask whose decide may also redraw the question (RedrawAsker): the adapter that
// takes a redrawing press edits the message's buttons in the answer to it (Questions.Redraw),
// and a redraw carried here from another replica is drawn with m, where m is a
// QuestionRedrawer.
func AskRedraw(ctx context.Context, qs *Questions, m QuestionMessenger, chat chat.Ref, q Question, decide func(Answer) Decision) (Answer, error) {
	id, oq := qs.OpenRedraw(chat, q, decide)
	book := qs.Book
	if book != nil {
		if err := book.Open(ctx, BookedQuestion{ID: id, Chat: chat, Text: q.Text}, qs.settle); err != nil {
			qs.Drop(id)
			return Answer{}, fmt.Errorf("record the question for the other replicas: %w", err)
		}
	}
	msgID, err := m.PostQuestion(ctx, chat, id, q)
	if err != nil {
		qs.Drop(id)
		closeBooked(ctx, book, id, false)
		return Answer{}, err
	}
	qs.Posted(oq, msgID)
	if book != nil {
		book.Posted(ctx, id, msgID)
	}
	var redrawn func()
	if r, ok := m.(QuestionRedrawer); ok {
		redrawn = func() {
			qs.Redraw(oq, func(choices []Choice) { r.RedrawQuestion(ctx, chat, id, qs.MessageOf(oq), choices) })
		}
	}
	ans, closed, err := qs.wait(ctx, id, oq, redrawn)
	closeBooked(ctx, book, id, !closed)
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
	defer cancel()
	if !closed {
		if text, elsewhere := qs.settledElsewhere(oq); elsewhere {
			qs.Show(oq, func() { m.EditQuestion(ectx, chat, qs.MessageOf(oq), text) })
		}
		return ans, err
	}
	qs.Show(oq, func() { m.EditQuestion(ectx, chat, qs.MessageOf(oq), oq.Text+ClosedText) })
	return Answer{}, err
}

// closeBooked records in book (when there is one) that question id is over, within a deadline
// of its own: ctx may have ended.
func closeBooked(ctx context.Context, book QuestionBook, id string, answered bool) {
	if book == nil {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
	defer cancel()
	book.Close(cctx, id, answered)
}

// Press is one press of a question's button as it travels from the replica that received it
// to the replica whose turn asked (QuestionBook).
type Press struct {
	// Question is the question's id, from the button's data. Where the press was made is
	// Answer.Chat: the book carries the press only to an open question of that chat, and the
	// question's replica checks it again.
	Question string
	Choice   string
	// MessageID is the pressed message, when the platform says.
	MessageID string
	Answer    Answer
	// Values are a form's submitted values (the web chat's FormAsker), by field name.
	Values map[string]string
}

// Verdict is what the replica that asked a question made of a Press.
type Verdict struct {
	// Closed says no open question took the press: its turn ended, or its replica was taken
	// over. The presser is told "This question is closed."
	Closed bool
	// Accepted says the press settled the question; Text is then its new text (the replica
	// that asked shows it), else the reason it was refused, for the presser alone. A press
	// that redrew the question (Decision.Redraw) is neither accepted nor given a text: the
	// replica that asked redraws the message, and the presser is told nothing.
	Accepted bool
	Text     string
}

// ClosedPress is the answer to a press of a question that no turn waits for any more.
const ClosedPress = "This question is closed."

// StrayPress is the answer to a press of a question's button made outside the question's chat.
const StrayPress = "This button belongs to a question in another chat: it was not taken."

// UnrelayedPress is the answer to a press the replica that asked could not be reached for.
const UnrelayedPress = "The answer could not be passed on: press again."

// PressTimeout bounds how long a replica waits for the verdict on a press it carried to the
// replica that asked (Questions.Elsewhere); it leaves room within Telegram's answer to a
// callback query (about 15 s) and Discord's follow-up.
const PressTimeout = 10 * time.Second

// BookedQuestion is a question as a QuestionBook records it.
type BookedQuestion struct {
	ID   string
	Chat chat.Ref
	Text string
}

// QuestionBook records the open questions of this replica's turns where several replicas
// serve the bot (coord.Replica), so that a press of their buttons another replica receives is
// carried to the turn that asked, settled there, and its verdict carried back. A single
// process has none (nil): every press reaches it.
type QuestionBook interface {
	// Open records q, about to be posted by the turn whose context is ctx (the epoch it runs
	// under), with settle, which the book calls with each press of q another replica carried
	// here; settle must not block. An error means q cannot be pressed elsewhere: it is not
	// asked.
	Open(ctx context.Context, q BookedQuestion, settle func(Press) Verdict) error
	// Posted records the message question id was posted in; a failure is the book's to log.
	Posted(ctx context.Context, id, messageID string)
	// Close records that question id was answered here or closed unanswered, and forgets its
	// settle; a failure is the book's to log.
	Close(ctx context.Context, id string, answered bool)
	// Press carries p, a press of a question this replica does not hold, to the replica that
	// asked it and returns that replica's verdict; Verdict.Closed when no live turn holds the
	// question open. It returns an error when no verdict came within ctx.
	Press(ctx context.Context, p Press) (Verdict, error)
}

// QuestionCloser edits the message of a question whose turn ended on a replica that was taken
// over (the adapters implement it): it sets text and takes the buttons off; a failure is the
// closer's to log.
type QuestionCloser interface {
	CloseQuestion(ctx context.Context, chat chat.Ref, messageID, text string)
}

// OpenQuestion is a posted Question waiting for an accepted press, as a platform adapter tracks
// it. Its fields are read under the Questions lock.
type OpenQuestion struct {
	Chat chat.Ref
	// MessageID is the platform's id of the question's message; empty until the post is answered.
	MessageID string
	Text      string
	choices   []Choice
	decide    func(Answer) Decision
	stray     func(Answer)
	done      chan Answer // buffered: the accepted answer
	// redrawn (buffered) wakes the asker when a press carried from another replica redrew the
	// question: the asker draws it (QuestionRedrawer).
	redrawn chan struct{}
	// drawing is held across each edit of the question's message (Redraw, Show), so the edits
	// land in the order the presses were decided.
	drawing sync.Mutex
	settled bool
	// elsewhere says the accepted press was carried here from another replica, which answered
	// it: the asker shows settledText on the message.
	elsewhere   bool
	settledText string
}

// Questions are an adapter's open questions by id, safe for concurrent use. The zero value is
// ready to use. A question is opened before it is posted, so a press that reaches the bot before
// the platform's answer to the post is taken, not refused as closed.
type Questions struct {
	// Book, when set (before the first question), records the questions for the other
	// replicas: a press one of them receives is carried to the question here.
	Book QuestionBook

	mu   sync.Mutex
	open map[string]*OpenQuestion
}

// Open registers a question about to be posted in chat and returns its id (random, 16 hex
// characters, for button data) and the question.
func (qs *Questions) Open(chat chat.Ref, q Question, decide func(Answer) (bool, string)) (string, *OpenQuestion) {
	return qs.OpenRedraw(chat, q, settleOnly(decide))
}

// OpenRedraw is Open for a question whose presses may redraw it (RedrawAsker).
func (qs *Questions) OpenRedraw(chat chat.Ref, q Question, decide func(Answer) Decision) (string, *OpenQuestion) {
	b := make([]byte, 8)
	rand.Read(b) // crypto/rand.Read never fails on supported platforms
	id := hex.EncodeToString(b)
	oq := &OpenQuestion{Chat: chat, Text: q.Text, choices: slices.Clone(q.Choices), decide: decide, stray: q.Stray,
		done: make(chan Answer, 1), redrawn: make(chan struct{}, 1)}
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
// (nil when there is no such open question or choice here: closed, or asked on another replica,
// see Elsewhere), whether the press settled it, and the text decide gave. A press made outside
// the question's chat (ans.Chat, see PressedIn) never reaches decide: it is refused with
// StrayPress and told to the question's Stray. An accepted answer is delivered to Wait.
// messageID, when not empty, is the pressed message, recorded if the post's answer has not
// come yet.
func (qs *Questions) Press(id, choice, messageID string, ans Answer) (oq *OpenQuestion, accepted bool, text string) {
	oq, d := qs.press(id, choice, messageID, ans, false)
	return oq, d.Accept, d.Text
}

// Take is Press for a question that may be redrawn: the decision says whether the press
// settled the question, redrew it (the adapter then shows Decision.Redraw on the pressed
// message, through Redraw) or was refused.
func (qs *Questions) Take(id, choice, messageID string, ans Answer) (*OpenQuestion, Decision) {
	return qs.press(id, choice, messageID, ans, false)
}

func (qs *Questions) press(id, choice, messageID string, ans Answer, elsewhere bool) (*OpenQuestion, Decision) {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	oq := qs.open[id]
	if oq == nil || oq.settled || !slices.ContainsFunc(oq.choices, func(c Choice) bool { return c.ID == choice }) {
		return nil, Decision{}
	}
	ans.Choice = choice
	if !PressedIn(oq.Chat, ans.Chat) {
		if oq.stray != nil {
			oq.stray(ans)
		}
		return oq, Decision{Text: StrayPress}
	}
	if oq.MessageID == "" {
		oq.MessageID = messageID
	}
	d := oq.decide(ans)
	switch {
	case !d.Accept && d.Redraw != nil:
		oq.choices = slices.Clone(d.Redraw)
		if elsewhere {
			select {
			case oq.redrawn <- struct{}{}:
			default: // the asker will draw the latest buttons anyway
			}
		}
		return oq, Decision{Redraw: slices.Clone(d.Redraw)}
	case !d.Accept:
		return oq, Decision{Text: d.Text}
	}
	oq.settled = true
	oq.elsewhere, oq.settledText = elsewhere, d.Text
	delete(qs.open, id)
	oq.done <- ans
	return oq, Decision{Accept: true, Text: d.Text}
}

// Redraw runs draw with the question's buttons as they are now, unless the question is settled
// (its settling edit takes the buttons away); it reports whether draw ran. One edit of a
// question's message runs at a time (Redraw, Show), and each draws the latest buttons, so an
// edit that lands late never shows older ones.
func (qs *Questions) Redraw(oq *OpenQuestion, draw func(choices []Choice)) bool {
	oq.drawing.Lock()
	defer oq.drawing.Unlock()
	qs.mu.Lock()
	settled, choices := oq.settled, slices.Clone(oq.choices)
	qs.mu.Unlock()
	if settled {
		return false
	}
	draw(choices)
	return true
}

// Show runs edit, an edit of the question's message that settles or closes it, after any
// redraw of it in flight (Redraw).
func (qs *Questions) Show(oq *OpenQuestion, edit func()) {
	oq.drawing.Lock()
	defer oq.drawing.Unlock()
	edit()
}

// PressedIn reports whether a press made in chat pressed (Answer.Chat) may answer a question
// asked in chat asked: the same platform, chat and thread, and a chat the platform named.
func PressedIn(asked, pressed chat.Ref) bool {
	return pressed.ChatID != "" && pressed == asked
}

// Stray reports whether question id is open here and was asked outside chat pressed: a press
// made there is refused (Press), so nothing about the presser needs asking.
func (qs *Questions) Stray(id string, pressed chat.Ref) bool {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	oq := qs.open[id]
	return oq != nil && !PressedIn(oq.Chat, pressed)
}

// settle takes a press another replica received (QuestionBook's settle); a redraw is drawn here
// by the asker (AskRedraw).
func (qs *Questions) settle(p Press) Verdict {
	oq, d := qs.press(p.Question, p.Choice, p.MessageID, p.Answer, true)
	if oq == nil {
		return Verdict{Closed: true}
	}
	return Verdict{Accepted: d.Accept, Text: d.Text}
}

// settledElsewhere returns the decision's text when the accepted press was carried here from
// another replica.
func (qs *Questions) settledElsewhere(oq *OpenQuestion) (string, bool) {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	return oq.settledText, oq.elsewhere
}

// Shared reports whether another replica may hold the questions this one does not (Book is set).
func (qs *Questions) Shared() bool { return qs.Book != nil }

// Elsewhere carries a press of a question this replica does not hold to the replica that asked
// it, within PressTimeout, and returns its verdict; closed when no replica serves the bot but
// this one. An error says no verdict came: the presser should press again.
func (qs *Questions) Elsewhere(ctx context.Context, p Press) (Verdict, error) {
	if qs.Book == nil {
		return Verdict{Closed: true}, nil
	}
	pctx, cancel := context.WithTimeout(ctx, PressTimeout)
	defer cancel()
	v, err := qs.Book.Press(pctx, p)
	if err != nil {
		return Verdict{}, fmt.Errorf("press of question %s: %w", p.Question, err)
	}
	return v, nil
}

// Wait returns the accepted answer of question id, or ctx's error when ctx ends first; closed
// then says the question was closed unanswered here and its message should say so (ClosedText)
// and lose its buttons.
func (qs *Questions) Wait(ctx context.Context, id string, oq *OpenQuestion) (ans Answer, closed bool, err error) {
	return qs.wait(ctx, id, oq, nil)
}

// wait is Wait that calls redrawn (when not nil) each time a press carried from another
// replica redrew the question.
func (qs *Questions) wait(ctx context.Context, id string, oq *OpenQuestion, redrawn func()) (ans Answer, closed bool, err error) {
	for waiting := true; waiting; {
		select {
		case ans := <-oq.done:
			return ans, false, nil
		case <-oq.redrawn:
			if redrawn != nil {
				redrawn()
			}
		case <-ctx.Done():
			waiting = false
		}
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
