package adapters

import "context"

// Choice is one button of a Question.
type Choice struct {
	// ID comes back in Answer.Choice; it is short and plain (Telegram carries it in at most 64
	// bytes of callback data).
	ID    string
	Label string
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
