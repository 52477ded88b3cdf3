package adapters

import "context"

// FieldKind is the input a field of a Form is answered with.
type FieldKind string

// Kinds of a Form's fields.
const (
	FieldText    FieldKind = "text"
	FieldNumber  FieldKind = "number"
	FieldInteger FieldKind = "integer"
	FieldBoolean FieldKind = "boolean"
	FieldEnum    FieldKind = "enum"
	// FieldMulti is a multi-select: any number of Options, shown as checkboxes.
	FieldMulti FieldKind = "multi"
)

// FormField is one input of a Form, with the bounds the asker's schema sets (the platform may
// show them as input constraints; the asker checks the values itself).
type FormField struct {
	Name        string
	Title       string
	Description string
	Kind        FieldKind
	Required    bool
	// Options are an enum's values (Choice.ID, the value sent back) and their labels.
	Options []Choice
	// Min and Max bound a number or integer; MinLength and MaxLength (0: none) a text's
	// characters. Format is a text's format (email, uri, date, date-time).
	Min, Max             *float64
	MinLength, MaxLength int
	Format               string
	// MinItems and MaxItems (0: none) bound how many options a multi-select takes.
	MinItems, MaxItems int
	// Default is what the field starts with, as FormAnswer.Values holds it (a multi-select's
	// chosen option IDs, several); empty: nothing.
	Default []string
}

// Form is a question with several fields the bot shows in the chat as one form (a tool's
// elicitation), with Submit and Decline.
type Form struct {
	Text   string
	Fields []FormField
	// Stray is Question.Stray for the form's submissions.
	Stray func(Answer) `json:"-"`
}

// FormAnswer is one submission of a Form.
type FormAnswer struct {
	// Decline says the form was refused; Values is then empty.
	Decline bool
	// Values are the fields' values as typed, by field name: a boolean is "yes" or "no", an
	// enum its option's ID, a multi-select its chosen option IDs as a JSON array of strings; a
	// field left empty is absent.
	Values    map[string]string
	UserID    string
	UserName  string
	ChatAdmin bool
}

// FormAsker is an optional capability of a Responder whose platform shows a whole form in a
// question (the web chat). Responders without it are asked a form's fields one at a time.
type FormAsker interface {
	// AskForm shows f in the chat and hands each submission (or decline) to decide, one at a
	// time, until decide accepts one or ctx ends, as Asker.Ask does with presses: decide's text
	// is the question's new text for an accepted submission (its form goes away) or the reason
	// for a refused one, shown to the submitter alone. When ctx ends first the form goes away and
	// the question says it closed unanswered (ClosedText). decide must not block.
	AskForm(ctx context.Context, f Form, decide func(FormAnswer) (accept bool, text string)) (FormAnswer, error)
}
