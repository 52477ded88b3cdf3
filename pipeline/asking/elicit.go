package asking

import (
	"context"
	"encoding/json"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"

	"relaybot/adapters"
	"relaybot/adapters/markdown"
	"relaybot/chat"
	"relaybot/tools"
)

// Choices of a tool's question (besides an enum's values, "v0", "v1", …).
const (
	choiceYes     = "yes"
	choiceNo      = "no"
	choiceSkip    = "skip"
	choiceDecline = "decline"
	choiceDone    = "done"
)

// Words a typed answer to a reply prompt may be instead of a value.
const (
	wordDecline = "decline"
	wordSkip    = "skip"
	wordDefault = "default"
)

// Elicit asks a tool's question in the chat: as one form where the platform shows forms
// (adapters.FormAsker, the web chat), else one field at a time: a boolean or an enum with
// buttons, text and numbers as a reply prompt the asker answers with their next message. A
// link (URL mode) is shown as a link button the user opens themselves; Done accepts. Only the
// question's answerers may answer; anyone else's press is refused and told why, and their
// messages are not taken as answers.
func (a *Approver) Elicit(ctx context.Context, q tools.Elicitation) (tools.ElicitAnswer, error) {
	a.reply.Working(false)
	defer a.reply.Working(true)
	head := elicitHead(q)
	if q.Unshowable != "" {
		a.say(head + "\n\nThe bot cannot show this form (" + q.Unshowable + "), so it answered decline.")
		return tools.ElicitAnswer{Action: tools.ElicitDecline, At: a.now(), Note: "the form cannot be shown: " + q.Unshowable}, nil
	}
	if q.Mode == tools.ElicitURL {
		choices := []adapters.Choice{{ID: choiceDone, Label: "Done"}, {ID: choiceDecline, Label: "Decline"}}
		if webLink(q.URL) {
			// Only http and https become a button; any other link is shown as its text.
			choices = append([]adapters.Choice{{ID: "open", Label: "Open " + linkHost(q.URL), URL: q.URL}}, choices...)
		}
		ans, err := a.ask(ctx, head+"\n\nOpen the link, then press Done.", q, choices)
		if err != nil {
			return tools.ElicitAnswer{}, err
		}
		act := tools.ElicitAccept
		if ans.Choice == choiceDecline {
			act = tools.ElicitDecline
		}
		return tools.ElicitAnswer{Action: act, By: who(ans), At: a.now()}, nil
	}
	if fa, ok := a.asker.(adapters.FormAsker); ok && len(q.Fields) > 0 {
		return a.elicitForm(ctx, fa, head, q)
	}
	content := map[string]any{}
	by := ""
	for _, f := range q.Fields {
		v, set, decline, name, err := a.field(ctx, head, q, f)
		if err != nil {
			return tools.ElicitAnswer{}, err
		}
		by = name
		if decline {
			return tools.ElicitAnswer{Action: tools.ElicitDecline, By: by, At: a.now()}, nil
		}
		if set {
			content[f.Name] = v
		}
	}
	if len(q.Fields) == 0 { // a form without fields is a confirmation
		ans, err := a.ask(ctx, head, q, []adapters.Choice{{ID: choiceDone, Label: "OK"}, {ID: choiceDecline, Label: "Decline"}})
		if err != nil {
			return tools.ElicitAnswer{}, err
		}
		if ans.Choice == choiceDecline {
			return tools.ElicitAnswer{Action: tools.ElicitDecline, By: who(ans), At: a.now()}, nil
		}
		by = who(ans)
	}
	return tools.ElicitAnswer{Action: tools.ElicitAccept, Content: content, By: by, At: a.now()}, nil
}

// elicitForm asks the whole form at once. Values are read as their fields' types; one that
// cannot be read is handed on as typed, so that the schema check names it and asks again.
func (a *Approver) elicitForm(ctx context.Context, fa adapters.FormAsker, head string, q tools.Elicitation) (tools.ElicitAnswer, error) {
	form := adapters.Form{Text: head, Stray: a.strays.stray(q.Tool, q.Server)}
	for _, f := range q.Fields {
		form.Fields = append(form.Fields, formField(f))
	}
	ans, err := fa.AskForm(ctx, form, func(ans adapters.FormAnswer) (bool, string) {
		pa := adapters.Answer{UserID: ans.UserID, UserName: ans.UserName, ChatAdmin: ans.ChatAdmin}
		if may, _ := a.mayAnswer(pa, q.Answerers); !may {
			return false, "You may not answer this: " + approversText(q.Answerers) + "."
		}
		if ans.Decline {
			return true, head + "\n\nDeclined (" + who(pa) + ")"
		}
		var lines []string
		for _, f := range form.Fields {
			if v, ok := ans.Values[f.Name]; ok {
				lines = append(lines, formLabel(f)+": "+shownValue(f, v))
			}
		}
		return true, head + "\n\n" + strings.Join(lines, "\n") + "\n(" + who(pa) + ")"
	})
	if err != nil {
		return tools.ElicitAnswer{}, err
	}
	by := who(adapters.Answer{UserID: ans.UserID, UserName: ans.UserName})
	if ans.Decline {
		return tools.ElicitAnswer{Action: tools.ElicitDecline, By: by, At: a.now()}, nil
	}
	content := map[string]any{}
	for _, f := range q.Fields {
		raw, ok := ans.Values[f.Name]
		if !ok {
			continue
		}
		v, perr := tools.ParseValue(f, raw)
		if perr != nil {
			v = raw
		}
		content[f.Name] = v
	}
	return tools.ElicitAnswer{Action: tools.ElicitAccept, Content: content, By: by, At: a.now()}, nil
}

// shownValue is a submitted value as the answered form shows it: an option's label for an
// enum, the labels of a multi-select's options.
func shownValue(f adapters.FormField, v string) string {
	label := func(id string) string {
		for _, o := range f.Options {
			if o.ID == id {
				return o.Label
			}
		}
		return id
	}
	if f.Kind != adapters.FieldMulti {
		return label(v)
	}
	var ids []string
	if json.Unmarshal([]byte(v), &ids) != nil {
		return v
	}
	for i, id := range ids {
		ids[i] = label(id)
	}
	return strings.Join(ids, ", ")
}

// formField is f as a platform's form shows it.
func formField(f tools.Field) adapters.FormField {
	ff := adapters.FormField{Name: f.Name, Title: f.Title, Description: f.Description, Required: f.Required,
		Min: f.Minimum, Max: f.Maximum, MinLength: f.MinLength, MaxLength: f.MaxLength, Format: f.Format,
		MinItems: f.MinItems, MaxItems: f.MaxItems, Default: defaultValues(f)}
	switch {
	case f.Multi():
		ff.Kind = adapters.FieldMulti
		for i, v := range f.Enum {
			ff.Options = append(ff.Options, adapters.Choice{ID: v, Label: f.EnumLabel(i)})
		}
	case len(f.Enum) > 0:
		ff.Kind = adapters.FieldEnum
		for i, v := range f.Enum {
			ff.Options = append(ff.Options, adapters.Choice{ID: v, Label: f.EnumLabel(i)})
		}
	case f.Type == tools.FieldBoolean:
		ff.Kind = adapters.FieldBoolean
	case f.Type == tools.FieldNumber:
		ff.Kind = adapters.FieldNumber
	case f.Type == tools.FieldInteger:
		ff.Kind = adapters.FieldInteger
	default:
		ff.Kind = adapters.FieldText
	}
	return ff
}

// defaultValues is f's default as a form's values hold it (FormAnswer.Values): a boolean as
// yes or no, a number as written, a multi-select's options one each.
func defaultValues(f tools.Field) []string {
	switch d := f.Default.(type) {
	case string:
		return []string{d}
	case bool:
		if d {
			return []string{choiceYes}
		}
		return []string{choiceNo}
	case float64:
		return []string{strconv.FormatFloat(d, 'f', -1, 64)}
	case []string:
		return d
	}
	return nil
}

func formLabel(f adapters.FormField) string {
	if f.Title != "" {
		return f.Title
	}
	return f.Name
}

// field asks for one field's value; set is false when an optional field was skipped.
func (a *Approver) field(ctx context.Context, head string, q tools.Elicitation, f tools.Field) (v any, set, decline bool, by string, err error) {
	text := head + "\n\n" + fieldText(f)
	if !f.Choice() {
		return a.prompt(ctx, text, q.Answerers, f)
	}
	if f.Multi() {
		return a.multi(ctx, text, q, f)
	}
	var choices []adapters.Choice
	if f.Type == tools.FieldBoolean {
		choices = []adapters.Choice{{ID: choiceYes, Label: "Yes"}, {ID: choiceNo, Label: "No"}}
	}
	for i := range f.Enum {
		label := f.EnumLabel(i)
		if f.Default == f.Enum[i] {
			label += " (default)"
		}
		choices = append(choices, adapters.Choice{ID: "v" + strconv.Itoa(i), Label: label})
	}
	if d, ok := f.Default.(bool); ok {
		choices[map[bool]int{true: 0, false: 1}[d]].Label += " (default)"
	}
	if !f.Required {
		choices = append(choices, adapters.Choice{ID: choiceSkip, Label: "Skip"})
	}
	choices = append(choices, adapters.Choice{ID: choiceDecline, Label: "Decline"})
	ans, err := a.ask(ctx, text, q, choices)
	if err != nil {
		return nil, false, false, "", err
	}
	by = who(ans)
	switch c := ans.Choice; {
	case c == choiceDecline:
		return nil, false, true, by, nil
	case c == choiceSkip:
		return nil, false, false, by, nil
	case c == choiceYes || c == choiceNo:
		return c == choiceYes, true, false, by, nil
	default:
		i, _ := strconv.Atoi(strings.TrimPrefix(c, "v"))
		return f.Enum[i], true, false, by, nil
	}
}

// multi asks for a multi-select with a button per option that toggles it (✓ marks the chosen
// ones, the default's options at first) and Done, Skip (optional fields) and Decline; Done with
// a choice the field's bounds refuse is refused and told to the presser. Where the platform
// redraws buttons in place (adapters.RedrawAsker: Telegram, Discord) the toggles change the one
// message's buttons; elsewhere each toggle settles that message, which then says what was
// chosen so far, and the buttons are asked again with the new marks.
func (a *Approver) multi(ctx context.Context, text string, q tools.Elicitation, f tools.Field) (v any, set, decline bool, by string, err error) {
	chosen := map[int]bool{}
	if d, ok := f.Default.([]string); ok {
		for i, e := range f.Enum {
			chosen[i] = slices.Contains(d, e)
		}
	}
	text += "\n\nPress options to choose them, then Done."
	if ra, ok := a.asker.(adapters.RedrawAsker); ok {
		ans, err := a.askInPlace(ctx, ra, text, q, f, chosen)
		if err != nil {
			return nil, false, false, "", err
		}
		return multiAnswer(ans, f, chosen)
	}
	for {
		ans, err := a.askMulti(ctx, text, q, multiChoices(f, chosen), f, chosenOf(f, chosen))
		if err != nil {
			return nil, false, false, "", err
		}
		if c := ans.Choice; c == choiceDone || c == choiceSkip || c == choiceDecline {
			return multiAnswer(ans, f, chosen)
		}
		i, _ := strconv.Atoi(strings.TrimPrefix(ans.Choice, "v"))
		chosen[i] = !chosen[i]
	}
}

// multiChoices are a multi-select's buttons: its options, ✓ on the chosen ones, then Done, Skip
// (optional fields) and Decline.
func multiChoices(f tools.Field, chosen map[int]bool) []adapters.Choice {
	choices := make([]adapters.Choice, 0, len(f.Enum)+3)
	for i := range f.Enum {
		label := f.EnumLabel(i)
		if chosen[i] {
			label = "✓ " + label
		}
		choices = append(choices, adapters.Choice{ID: "v" + strconv.Itoa(i), Label: label})
	}
	choices = append(choices, adapters.Choice{ID: choiceDone, Label: "Done"})
	if !f.Required {
		choices = append(choices, adapters.Choice{ID: choiceSkip, Label: "Skip"})
	}
	return append(choices, adapters.Choice{ID: choiceDecline, Label: "Decline"})
}

// chosenOf are the chosen options' values, in the field's order.
func chosenOf(f tools.Field, chosen map[int]bool) []string {
	var out []string
	for i, e := range f.Enum {
		if chosen[i] {
			out = append(out, e)
		}
	}
	return out
}

// multiAnswer is the value of a multi-select settled by ans (Done, Skip or Decline) with the
// options chosen; Done with nothing chosen skips an optional field.
func multiAnswer(ans adapters.Answer, f tools.Field, chosen map[int]bool) (v any, set, decline bool, by string, err error) {
	by = who(ans)
	switch ans.Choice {
	case choiceDecline:
		return nil, false, true, by, nil
	case choiceSkip:
		return nil, false, false, by, nil
	}
	l := chosenOf(f, chosen)
	if len(l) == 0 && !f.Required {
		return nil, false, false, by, nil
	}
	if l == nil {
		l = []string{}
	}
	return l, true, false, by, nil
}

// doneRefusal is why Done with the options chosen cannot settle field f; empty when it can.
func doneRefusal(f tools.Field, chosen []string) string {
	if err := tools.CheckAnswer([]tools.Field{f}, map[string]any{f.Name: chosen}); err != nil && (len(chosen) > 0 || f.Required) {
		return err.Error()
	}
	return ""
}

// chosenText ends a settled multi-select's text: what was chosen, or skipped or declined, and by
// whom.
func chosenText(text string, ans adapters.Answer, f tools.Field, chosen []string) string {
	if c := ans.Choice; c == choiceSkip || c == choiceDecline {
		return text + "\n\n" + map[string]string{choiceSkip: "Skipped", choiceDecline: "Declined"}[c] + " (" + who(ans) + ")"
	}
	labels := make([]string, 0, len(chosen))
	for _, v := range chosen {
		labels = append(labels, f.EnumLabel(slices.Index(f.Enum, v)))
	}
	shown := "nothing"
	if len(labels) > 0 {
		shown = strings.Join(labels, ", ")
	}
	return text + "\n\nChosen: " + shown + " (" + who(ans) + ")"
}

// askInPlace asks for a multi-select on one message: a press of an option toggles it and
// redraws the message's buttons in place; Done (within the field's bounds), Skip or Decline
// settle it. chosen is changed by each toggle (presses are decided one at a time) and holds the
// final choice once the answer is returned.
func (a *Approver) askInPlace(ctx context.Context, ra adapters.RedrawAsker, text string, el tools.Elicitation, f tools.Field, chosen map[int]bool) (adapters.Answer, error) {
	answerers := el.Answerers
	q := adapters.Question{Text: text, Choices: multiChoices(f, chosen), Stray: a.strays.stray(el.Tool, el.Server)}
	return ra.AskRedraw(ctx, q, func(ans adapters.Answer) adapters.Decision {
		if may, _ := a.mayAnswer(ans, answerers); !may {
			return adapters.Decision{Text: "You may not answer this: " + approversText(answerers) + "."}
		}
		switch c := ans.Choice; c {
		case choiceDone:
			if why := doneRefusal(f, chosenOf(f, chosen)); why != "" {
				return adapters.Decision{Text: why}
			}
			fallthrough
		case choiceSkip, choiceDecline:
			return adapters.Decision{Accept: true, Text: chosenText(text, ans, f, chosenOf(f, chosen))}
		}
		i, _ := strconv.Atoi(strings.TrimPrefix(ans.Choice, "v"))
		if i < 0 || i >= len(f.Enum) {
			return adapters.Decision{Text: "unknown option"}
		}
		chosen[i] = !chosen[i]
		return adapters.Decision{Redraw: multiChoices(f, chosen)}
	})
}

// askMulti is ask for one round of a multi-select on a platform that cannot redraw buttons:
// Done is refused while the choice breaks the field's bounds, and a toggle's message says what
// is chosen after it.
func (a *Approver) askMulti(ctx context.Context, text string, el tools.Elicitation, choices []adapters.Choice, f tools.Field, chosen []string) (adapters.Answer, error) {
	answerers := el.Answerers
	q := adapters.Question{Text: text, Choices: choices, Stray: a.strays.stray(el.Tool, el.Server)}
	return a.asker.Ask(ctx, q, func(ans adapters.Answer) (bool, string) {
		if may, _ := a.mayAnswer(ans, answerers); !may {
			return false, "You may not answer this: " + approversText(answerers) + "."
		}
		now := slices.Clone(chosen)
		switch c := ans.Choice; c {
		case choiceDone:
			if why := doneRefusal(f, chosen); why != "" {
				return false, why
			}
		case choiceSkip, choiceDecline:
		default:
			i, _ := strconv.Atoi(strings.TrimPrefix(c, "v"))
			if i < 0 || i >= len(f.Enum) {
				return false, "unknown option"
			}
			if j := slices.Index(now, f.Enum[i]); j >= 0 {
				now = slices.Delete(now, j, j+1)
			} else {
				now = append(now, f.Enum[i])
			}
		}
		return true, chosenText(text, ans, f, now)
	})
}

// ask posts a question of el's tool with buttons and waits for an answerer's press.
func (a *Approver) ask(ctx context.Context, text string, el tools.Elicitation, choices []adapters.Choice) (adapters.Answer, error) {
	answerers := el.Answerers
	q := adapters.Question{Text: text, Choices: choices, Stray: a.strays.stray(el.Tool, el.Server)}
	return a.asker.Ask(ctx, q, func(ans adapters.Answer) (bool, string) {
		if may, _ := a.mayAnswer(ans, answerers); !may {
			return false, "You may not answer this: " + approversText(answerers) + "."
		}
		label := ans.Choice
		for _, c := range choices {
			if c.ID == ans.Choice {
				label = c.Label
			}
		}
		return true, text + "\n\n" + label + " (" + who(ans) + ")"
	})
}

// prompt asks for a typed value: the question goes out as a message and the next message of an
// answerer in the chat is the answer ("decline" declines, "skip" skips an optional field). A
// value that cannot be read is asked for again.
func (a *Approver) prompt(ctx context.Context, text string, answerers []string, f tools.Field) (v any, set, decline bool, by string, err error) {
	hint := "Reply to this message with your answer, or \"" + wordDecline + "\" to refuse."
	if !f.Required {
		hint = "Reply to this message with your answer, \"" + wordSkip + "\" to leave it out, or \"" + wordDecline + "\" to refuse."
	}
	if d := defaultValues(f); len(d) == 1 {
		hint += " \"" + wordDefault + "\" answers " + d[0] + "."
	}
	ch := a.prompts.openPrompt(a.in.Chat, func(in adapters.Inbound) bool {
		may, _ := a.mayAnswer(adapters.Answer{UserID: in.UserID, UserName: in.UserName, ChatAdmin: in.ChatAdmin}, answerers)
		return may
	})
	defer a.prompts.close(a.in.Chat, ch)
	withdraw, err := a.prompts.announce(ctx, a.in.Chat, ch)
	if err != nil {
		return nil, false, false, "", err
	}
	defer withdraw()
	a.say(text + "\n\n" + hint)
	for {
		select {
		case <-ctx.Done():
			return nil, false, false, "", ctx.Err()
		case in := <-ch.answers:
			by = in.UserName
			if by == "" {
				by = in.UserID
			}
			reply := strings.TrimSpace(in.Text)
			if d := defaultValues(f); len(d) == 1 && strings.EqualFold(reply, wordDefault) {
				reply = d[0]
			}
			switch strings.ToLower(reply) {
			case wordDecline:
				return nil, false, true, by, nil
			case wordSkip:
				if !f.Required {
					return nil, false, false, by, nil
				}
			}
			val, perr := tools.ParseValue(f, reply)
			if perr == nil {
				return val, true, false, by, nil
			}
			a.say(perr.Error() + ". " + hint)
		}
	}
}

// say posts a message of the question into the chat, escaped: it carries the tool's words (its
// question, its fields, the problem with an answer), which must show as written.
func (a *Approver) say(text string) {
	a.notice(markdown.Escape(text))
}

func elicitHead(q tools.Elicitation) string {
	name := q.Tool
	if q.Server != "" {
		name += " (MCP server " + q.Server + ")"
	}
	head := "The tool " + name + " asks: " + strings.TrimSpace(q.Message)
	if q.URL != "" {
		head += "\n" + q.URL
	}
	if q.Problem != "" {
		head += "\n\nThe last answer did not fit: " + q.Problem + ". Please answer again."
	}
	return head
}

func fieldText(f tools.Field) string {
	s := f.Label()
	if f.Description != "" {
		s += ": " + f.Description
	}
	switch f.Type {
	case tools.FieldNumber:
		s += " (a number)"
	case tools.FieldInteger:
		s += " (a whole number)"
	case tools.FieldArray:
		s += " (any of the options" + itemBounds(f) + ")"
	}
	if d := defaultValues(f); len(d) == 1 && !f.Choice() {
		s += " (default: " + d[0] + ")"
	}
	if f.Required {
		s += " (required)"
	}
	return s
}

func itemBounds(f tools.Field) string {
	switch {
	case f.MinItems > 0 && f.MaxItems > 0:
		return ", " + strconv.Itoa(f.MinItems) + " to " + strconv.Itoa(f.MaxItems)
	case f.MinItems > 0:
		return ", at least " + strconv.Itoa(f.MinItems)
	case f.MaxItems > 0:
		return ", at most " + strconv.Itoa(f.MaxItems)
	}
	return ""
}

// webLink reports whether raw is an absolute http or https URL.
func webLink(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

func linkHost(raw string) string {
	if i := strings.Index(raw, "://"); i >= 0 {
		raw = raw[i+3:]
	}
	if i := strings.IndexAny(raw, "/?#"); i >= 0 {
		raw = raw[:i]
	}
	if raw == "" {
		return "link"
	}
	return raw
}

// prompts are the reply prompts open in chats: a tool's question waiting for a typed answer.
// Handle hands an answerer's message in that chat to the prompt instead of starting a turn.
type prompts struct {
	// relay, where several replicas serve the bot, carries answers landing elsewhere here.
	relay PromptRelay

	mu   sync.Mutex
	open map[chat.Ref]*openPrompt
}

type openPrompt struct {
	may     func(adapters.Inbound) bool
	answers chan adapters.Inbound
}

func (ps *prompts) openPrompt(ref chat.Ref, may func(adapters.Inbound) bool) *openPrompt {
	op := &openPrompt{may: may, answers: make(chan adapters.Inbound, 1)}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.open == nil {
		ps.open = map[chat.Ref]*openPrompt{}
	}
	ps.open[ref] = op
	return op
}

func (ps *prompts) close(ref chat.Ref, op *openPrompt) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.open[ref] == op {
		delete(ps.open, ref)
	}
}

// take hands in to the chat's open prompt when its sender may answer it; false when no prompt
// takes it (the message goes on as usual).
func (ps *prompts) take(in adapters.Inbound) bool {
	if in.Command != "" || strings.TrimSpace(in.Text) == "" {
		return false
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	op := ps.open[in.Chat]
	if op == nil || !op.may(in) {
		return false
	}
	select {
	case op.answers <- in:
		return true
	default:
		return false // an answer is waiting to be read already: this one is a message
	}
}
