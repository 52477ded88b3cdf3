package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/mail"
	"net/url"
	"relaybot/policy"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// DefaultElicitationTimeout is how long a tool's question waits for an answer when
// ManagerOptions.ElicitationTimeout is 0.
const DefaultElicitationTimeout = 5 * time.Minute

// ElicitMode is how a question is answered: a form in the chat, or a page the user opens.
type ElicitMode string

// Elicitation modes (MCP elicitation/create "mode").
const (
	ElicitForm ElicitMode = "form"
	// ElicitURL shows a link the user opens themselves; the bot never follows it.
	ElicitURL ElicitMode = "url"
)

// ElicitAction is how the user answered (MCP ElicitResult "action").
type ElicitAction string

// Answers to a question, as the MCP specification defines them: accept submits the content;
// decline refuses explicitly; cancel dismisses it without a choice (nobody answered in time, the
// turn ended, the chat cannot ask).
const (
	ElicitAccept  ElicitAction = "accept"
	ElicitDecline ElicitAction = "decline"
	ElicitCancel  ElicitAction = "cancel"
)

// FieldType is the JSON type of one field of a form.
type FieldType string

// Field types a form may ask for: MCP elicitation allows a flat object of primitives.
const (
	FieldString  FieldType = "string"
	FieldNumber  FieldType = "number"
	FieldInteger FieldType = "integer"
	FieldBoolean FieldType = "boolean"
	// FieldArray is a multi-select: a list of the field's Enum values (MCP 2025-11-25).
	FieldArray FieldType = "array"
)

// Field is one property of a form's schema.
type Field struct {
	Name        string
	Title       string
	Description string
	Type        FieldType
	// Enum, when not empty, are the only values a string field takes (a multi-select's items);
	// EnumNames, when as long, are their labels.
	Enum      []string
	EnumNames []string
	Required  bool
	// Minimum and Maximum bound a number or integer; MinLength and MaxLength (0: none) a
	// string's characters. Format is a string's format (email, uri, date, date-time).
	Minimum, Maximum     *float64
	MinLength, MaxLength int
	Format               string
	// MinItems and MaxItems (0: none) bound how many values a multi-select takes.
	MinItems, MaxItems int
	// Default is the value the form starts with (nil: none), of the field's type: a string,
	// a float64, a bool, or a multi-select's []string.
	Default any
}

// Multi reports whether the field is a multi-select.
func (f Field) Multi() bool {
	return f.Type == FieldArray
}

// Label is how the field is named to the user.
func (f Field) Label() string {
	if f.Title != "" {
		return f.Title
	}
	return f.Name
}

// Choice reports whether the field is answered by buttons: a boolean or an enum (single- or
// multi-select).
func (f Field) Choice() bool {
	return f.Type == FieldBoolean || len(f.Enum) > 0
}

// EnumLabel returns the label of enum value i.
func (f Field) EnumLabel(i int) string {
	if len(f.EnumNames) == len(f.Enum) && f.EnumNames[i] != "" {
		return f.EnumNames[i]
	}
	return f.Enum[i]
}

// Elicitation is a question a running tool puts to the user of the turn.
type Elicitation struct {
	// Tool and Server name who asks; the Manager fills them in.
	Tool   string
	Server string
	// Message is the server's text of the question.
	Message string
	Mode    ElicitMode
	// Fields are the form's fields in the schema's order (form mode).
	Fields []Field
	// URL is the page to open (URL mode).
	URL string
	// Answerers are who may answer (ApproverAsker, ApproverChatAdmins, ApproverAdmins): the
	// asker, and the approvers of an ask rule covering the tool.
	Answerers []string
	// Problem says what was wrong with the first answer when the question is asked again.
	Problem string
	// Unshowable, when set, says why the bot cannot show the form (a schema it does not take):
	// the elicitor only tells the chat so, without waiting, and the answer is decline.
	Unshowable string
}

// ElicitAnswer is the answer to an Elicitation.
type ElicitAnswer struct {
	Action ElicitAction
	// Content holds the fields' values on accept (form mode).
	Content map[string]any
	// By names who answered; empty when nobody did.
	By string
	At time.Time
	// Note says why the answer is not the user's own (timeout, the turn ended, schema
	// violation); empty for an answer someone gave.
	Note string
}

// Elicitor asks the chat of a turn a tool's question. Elicit blocks until someone allowed to
// answer did (or declined), or ctx ended; then it returns ctx's error. Questions of one turn are
// asked one at a time.
type Elicitor interface {
	Elicit(ctx context.Context, q Elicitation) (ElicitAnswer, error)
}

// SetElicitor gives the turn the way to ask its chat tools' questions. Without one, questions are
// answered cancel. Call it before Execute.
func (t *Turn) SetElicitor(e Elicitor) {
	t.elicitor = e
}

// Asked is one question of a call as its audit row keeps it.
type Asked struct {
	Message string       `json:"message"`
	Mode    ElicitMode   `json:"mode"`
	URL     string       `json:"url,omitempty"`
	Action  ElicitAction `json:"action"`
	// Answer is the content given, redacted.
	Answer string    `json:"answer,omitempty"`
	By     string    `json:"by,omitempty"`
	At     time.Time `json:"at"`
	Note   string    `json:"note,omitempty"`
}

// errElicitTimeout ends a question nobody answered in time.
var errElicitTimeout = errors.New("nobody answered in time")

// Elicit asks the question through the turn's elicitor, one question of the turn at a time,
// checks the answer against the form (a violation is asked again once, then declined) and keeps
// question and answer for the audit row.
func (r *running) Elicit(ctx context.Context, q Elicitation) ElicitAnswer {
	q.Tool, q.Server = r.tool, r.srv
	q.Answerers = r.t.answerers(r.tool)
	ans := r.ask(ctx, q)
	if ans.At.IsZero() {
		ans.At = time.Now()
	}
	if ans.Action != ElicitAccept {
		ans.Content = nil
	}
	a := Asked{Message: Truncate(q.Message, AuditMaxChars/4), Mode: q.Mode, URL: q.URL, Action: ans.Action,
		By: ans.By, At: ans.At.UTC(), Note: ans.Note}
	if ans.Content != nil {
		b, _ := json.Marshal(ans.Content)
		a.Answer = Truncate(RedactJSONText(string(b)), AuditMaxChars/4)
	}
	r.note(a)
	return ans
}

func (r *running) ask(ctx context.Context, q Elicitation) ElicitAnswer {
	r.mu.Lock()
	ended := r.ended
	r.mu.Unlock()
	if ended {
		return ElicitAnswer{Action: ElicitCancel, Note: "the call had ended"}
	}
	el := r.t.elicitor
	if q.Unshowable != "" {
		// Declined, never silently: the chat is told, and the audit keeps the reason.
		if el != nil {
			r.t.askMu.Lock()
			_, _ = el.Elicit(ctx, q)
			r.t.askMu.Unlock()
		}
		return ElicitAnswer{Action: ElicitDecline, Note: "the form cannot be shown: " + q.Unshowable}
	}
	if el == nil {
		return ElicitAnswer{Action: ElicitCancel, Note: "nobody can answer in this chat"}
	}
	r.t.askMu.Lock()
	defer r.t.askMu.Unlock()
	qctx, cancel := context.WithTimeoutCause(ctx, r.t.m.elicitTimeout, errElicitTimeout)
	defer cancel()
	for attempt := 0; ; attempt++ {
		ans, err := el.Elicit(qctx, q)
		switch {
		case err == nil:
		case ctx.Err() == nil && errors.Is(context.Cause(qctx), errElicitTimeout):
			return ElicitAnswer{Action: ElicitCancel, Note: "timeout"}
		case ctx.Err() != nil:
			return ElicitAnswer{Action: ElicitCancel, Note: "the call ended before anyone answered"}
		default:
			return ElicitAnswer{Action: ElicitCancel, Note: "the question could not be asked: " + err.Error()}
		}
		if ans.Action != ElicitAccept || q.Mode == ElicitURL {
			if ans.Action == "" {
				ans.Action = ElicitCancel
			}
			return ans
		}
		verr := CheckAnswer(q.Fields, ans.Content)
		if verr == nil {
			return ans
		}
		if attempt > 0 {
			return ElicitAnswer{Action: ElicitDecline, By: ans.By, At: ans.At, Note: "the answer broke the form twice: " + verr.Error()}
		}
		q.Problem = verr.Error()
	}
}

// answerers are who may answer a tool's question: the asker, and the approvers of an ask rule
// covering the tool.
func (t *Turn) answerers(tool string) []string {
	out := []string{ApproverAsker}
	if d := t.decisions[tool]; d.Action == policy.ActionAsk {
		for _, a := range d.Approvers {
			if !slices.Contains(out, a) {
				out = append(out, a)
			}
		}
	}
	return out
}

// Limits of a form ParseForm takes: no platform shows more, and the schema comes from a server.
const (
	MaxFormFields  = 64
	MaxEnumOptions = 100
)

// ParseForm reads an elicitation's requested schema as MCP's current revision defines it: an
// object whose properties are strings (formats email, uri, date, date-time), numbers,
// integers, booleans, single-select enums (enum, titled oneOf, legacy enumNames) and
// multi-select enums (type array, items with enum or titled anyOf), each with an optional
// default. Anything else (a nested object, an array of free values, an unknown type) is
// refused, with the field named. Fields keep the schema's order.
func ParseForm(schema json.RawMessage) ([]Field, error) {
	var top struct {
		Type       string          `json:"type"`
		Properties json.RawMessage `json:"properties"`
		Required   []string        `json:"required"`
	}
	if err := json.Unmarshal(schema, &top); err != nil {
		return nil, fmt.Errorf("requested schema is not a JSON object: %w", err)
	}
	if top.Type != "" && top.Type != "object" {
		return nil, fmt.Errorf("requested schema has type %q, want object", top.Type)
	}
	names, props, err := orderedObject(top.Properties)
	if err != nil {
		return nil, fmt.Errorf("requested schema's properties: %w", err)
	}
	if len(names) > MaxFormFields {
		return nil, fmt.Errorf("requested schema has %d fields; a form takes at most %d", len(names), MaxFormFields)
	}
	fields := make([]Field, 0, len(names))
	for _, name := range names {
		f, err := parseField(name, props[name])
		if err != nil {
			return nil, err
		}
		f.Required = slices.Contains(top.Required, name)
		fields = append(fields, f)
	}
	return fields, nil
}

// fieldSchema is one property of a requested schema, as far as a form reads it.
type fieldSchema struct {
	Type        string          `json:"type"`
	Title       string          `json:"title"`
	Description string          `json:"description"`
	Enum        []string        `json:"enum"`
	EnumNames   []string        `json:"enumNames"`
	Minimum     *float64        `json:"minimum"`
	Maximum     *float64        `json:"maximum"`
	MinLength   int             `json:"minLength"`
	MaxLength   int             `json:"maxLength"`
	MinItems    int             `json:"minItems"`
	MaxItems    int             `json:"maxItems"`
	Format      string          `json:"format"`
	OneOf       []titled        `json:"oneOf"`
	AnyOf       []titled        `json:"anyOf"`
	Items       *fieldSchema    `json:"items"`
	Properties  json.RawMessage `json:"properties"`
	Default     json.RawMessage `json:"default"`
}

// options are the schema's enum values and labels: enum (with enumNames), or titled oneOf or
// anyOf.
func (p *fieldSchema) options() (vals, labels []string) {
	vals, labels = p.Enum, p.EnumNames
	for _, o := range append(p.OneOf, p.AnyOf...) { // titled enums: [{const, title}]
		vals = append(vals, o.Const)
		labels = append(labels, o.Title)
	}
	if len(labels) != len(vals) {
		labels = nil
	}
	return vals, labels
}

func parseField(name string, raw json.RawMessage) (Field, error) {
	var p fieldSchema
	if err := json.Unmarshal(raw, &p); err != nil {
		return Field{}, fmt.Errorf("field %q is not a primitive or enum schema: %w", name, err)
	}
	f := Field{Name: name, Title: p.Title, Description: p.Description, Type: FieldType(p.Type),
		Minimum: p.Minimum, Maximum: p.Maximum, MinLength: p.MinLength, MaxLength: p.MaxLength,
		Format: p.Format}
	f.Enum, f.EnumNames = p.options()
	switch f.Type {
	case FieldString, FieldNumber, FieldInteger, FieldBoolean:
		if len(f.Enum) > 0 && f.Type != FieldString {
			return Field{}, fmt.Errorf("field %q: an enum must be of strings", name)
		}
	case FieldArray:
		if p.Items == nil || (p.Items.Type != "" && p.Items.Type != "string") || p.Items.Items != nil {
			return Field{}, fmt.Errorf("field %q: a list must be of string options (items with enum or anyOf)", name)
		}
		if len(f.Enum) > 0 {
			return Field{}, fmt.Errorf("field %q: a multi-select's options belong in items", name)
		}
		f.Enum, f.EnumNames = p.Items.options()
		if len(f.Enum) == 0 {
			return Field{}, fmt.Errorf("field %q: a list of free text is not a form field; a multi-select needs options", name)
		}
		f.MinItems, f.MaxItems = p.MinItems, p.MaxItems
	case "object":
		return Field{}, fmt.Errorf("field %q is a nested object; a form is flat", name)
	default:
		return Field{}, fmt.Errorf("field %q has type %q; a form takes string, number, integer, boolean or a multi-select", name, p.Type)
	}
	if len(f.Enum) > MaxEnumOptions {
		return Field{}, fmt.Errorf("field %q has %d options; a form shows at most %d", name, len(f.Enum), MaxEnumOptions)
	}
	f.Default = parseDefault(f, p.Default)
	return f, nil
}

// parseDefault reads a field's default; one that does not fit the field is left out (the form
// then starts empty) rather than refusing the form.
func parseDefault(f Field, raw json.RawMessage) any {
	if len(raw) == 0 {
		return nil
	}
	var v any
	if json.Unmarshal(raw, &v) != nil || v == nil {
		return nil
	}
	if list, ok := v.([]any); ok {
		strs := make([]string, 0, len(list))
		for _, e := range list {
			s, isStr := e.(string)
			if !isStr {
				return nil
			}
			strs = append(strs, s)
		}
		v = strs
	}
	if checkValue(f, v) != nil {
		return nil
	}
	return v
}

type titled struct {
	Const string `json:"const"`
	Title string `json:"title"`
}

// orderedObject decodes a JSON object keeping its keys' order.
func orderedObject(raw json.RawMessage) ([]string, map[string]json.RawMessage, error) {
	vals := map[string]json.RawMessage{}
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return nil, vals, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, nil, errors.New("not an object")
	}
	var names []string
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return nil, nil, err
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, nil, err
		}
		name := fmt.Sprint(k)
		if _, dup := vals[name]; !dup {
			names = append(names, name)
		}
		vals[name] = v
	}
	return names, vals, nil
}

// CheckAnswer reports whether content fills the form: every required field present, every value
// of its field's type, in its enum and bounds, and no field the form does not have.
func CheckAnswer(fields []Field, content map[string]any) error {
	for name := range content {
		if !slices.ContainsFunc(fields, func(f Field) bool { return f.Name == name }) {
			return fmt.Errorf("%q is not a field of the form", name)
		}
	}
	for _, f := range fields {
		v, ok := content[f.Name]
		if !ok || v == nil {
			if f.Required {
				return fmt.Errorf("%s is required", f.Label())
			}
			continue
		}
		if err := checkValue(f, v); err != nil {
			return fmt.Errorf("%s: %w", f.Label(), err)
		}
	}
	return nil
}

func checkValue(f Field, v any) error {
	switch f.Type {
	case FieldBoolean:
		if _, ok := v.(bool); !ok {
			return errors.New("must be yes or no")
		}
	case FieldNumber, FieldInteger:
		n, ok := number(v)
		if !ok {
			return errors.New("must be a number")
		}
		if f.Type == FieldInteger && n != math.Trunc(n) {
			return errors.New("must be a whole number")
		}
		if f.Minimum != nil && n < *f.Minimum {
			return fmt.Errorf("must be at least %v", *f.Minimum)
		}
		if f.Maximum != nil && n > *f.Maximum {
			return fmt.Errorf("must be at most %v", *f.Maximum)
		}
	case FieldArray:
		return checkList(f, v)
	case FieldString:
		s, ok := v.(string)
		if !ok {
			return errors.New("must be text")
		}
		if len(f.Enum) > 0 && !slices.Contains(f.Enum, s) {
			return fmt.Errorf("must be one of %s", strings.Join(f.Enum, ", "))
		}
		n := utf8.RuneCountInString(s)
		if f.MinLength > 0 && n < f.MinLength {
			return fmt.Errorf("must have at least %d characters", f.MinLength)
		}
		if f.MaxLength > 0 && n > f.MaxLength {
			return fmt.Errorf("must have at most %d characters", f.MaxLength)
		}
		return checkFormat(f.Format, s)
	}
	return nil
}

// checkList checks a multi-select's value: a list of distinct options within its bounds.
func checkList(f Field, v any) error {
	var list []string
	switch vs := v.(type) {
	case []string:
		list = vs
	case []any:
		for _, e := range vs {
			s, ok := e.(string)
			if !ok {
				return errors.New("must be a list of options")
			}
			list = append(list, s)
		}
	default:
		return errors.New("must be a list of options")
	}
	for i, s := range list {
		if !slices.Contains(f.Enum, s) {
			return fmt.Errorf("%q is not one of %s", s, strings.Join(f.Enum, ", "))
		}
		if slices.Contains(list[:i], s) {
			return fmt.Errorf("%q is chosen twice", s)
		}
	}
	if f.MinItems > 0 && len(list) < f.MinItems {
		return fmt.Errorf("choose at least %d", f.MinItems)
	}
	if f.MaxItems > 0 && len(list) > f.MaxItems {
		return fmt.Errorf("choose at most %d", f.MaxItems)
	}
	return nil
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}

func checkFormat(format, s string) error {
	var err error
	switch format {
	case "email":
		_, err = mail.ParseAddress(s)
	case "uri":
		var u *url.URL
		u, err = url.Parse(s)
		if err == nil && u.Scheme == "" {
			err = errors.New("no scheme")
		}
	case "date":
		_, err = time.Parse(time.DateOnly, s)
	case "date-time":
		_, err = time.Parse(time.RFC3339, s)
	default:
		return nil
	}
	if err != nil {
		return fmt.Errorf("must be a valid %s", format)
	}
	return nil
}

// ParseValue reads a typed reply as the value of field f: a number for number and integer
// fields, yes/no (true/false) for booleans, a JSON array of strings for a multi-select, the
// text itself for strings. It does not check bounds (CheckAnswer does).
func ParseValue(f Field, text string) (any, error) {
	text = strings.TrimSpace(text)
	switch f.Type {
	case FieldNumber, FieldInteger:
		n, err := strconv.ParseFloat(strings.ReplaceAll(text, ",", "."), 64)
		if err != nil {
			return nil, fmt.Errorf("%s must be a number", f.Label())
		}
		return n, nil
	case FieldBoolean:
		switch strings.ToLower(text) {
		case "yes", "y", "true":
			return true, nil
		case "no", "n", "false":
			return false, nil
		}
		return nil, fmt.Errorf("%s must be yes or no", f.Label())
	case FieldArray:
		var list []string
		if err := json.Unmarshal([]byte(text), &list); err != nil {
			return nil, fmt.Errorf("%s must be a list of options", f.Label())
		}
		return list, nil
	}
	return text, nil
}
