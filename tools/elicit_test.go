package tools_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"relaybot/tools"
)

func fp(f float64) *float64 { return &f }

// Every field kind of MCP's current elicitation schema is read into the field a form shows,
// with its options, labels, bounds and default; what the spec forbids is refused naming the
// field.
func TestParseFormReadsEveryFieldKindTheSpecDefines(t *testing.T) {
	for _, tc := range []struct {
		name   string
		prop   string
		want   tools.Field
		refuse string // a word of the refusal; empty: read
	}{
		{name: "text", prop: `{"type":"string","title":"Name","description":"Your name","minLength":2,"maxLength":40,"default":"Ann"}`,
			want: tools.Field{Title: "Name", Description: "Your name", Type: tools.FieldString, MinLength: 2, MaxLength: 40, Default: "Ann"}},
		{name: "email", prop: `{"type":"string","format":"email"}`, want: tools.Field{Type: tools.FieldString, Format: "email"}},
		{name: "uri", prop: `{"type":"string","format":"uri"}`, want: tools.Field{Type: tools.FieldString, Format: "uri"}},
		{name: "date", prop: `{"type":"string","format":"date"}`, want: tools.Field{Type: tools.FieldString, Format: "date"}},
		{name: "date-time", prop: `{"type":"string","format":"date-time"}`, want: tools.Field{Type: tools.FieldString, Format: "date-time"}},
		{name: "integer", prop: `{"type":"integer","minimum":1,"maximum":100,"default":42}`,
			want: tools.Field{Type: tools.FieldInteger, Minimum: fp(1), Maximum: fp(100), Default: 42.0}},
		{name: "number", prop: `{"type":"number","minimum":0,"maximum":1000,"default":3.14}`,
			want: tools.Field{Type: tools.FieldNumber, Minimum: fp(0), Maximum: fp(1000), Default: 3.14}},
		{name: "boolean", prop: `{"type":"boolean","default":true}`, want: tools.Field{Type: tools.FieldBoolean, Default: true}},
		{name: "untitled single-select", prop: `{"type":"string","enum":["a","b"],"default":"b"}`,
			want: tools.Field{Type: tools.FieldString, Enum: []string{"a", "b"}, Default: "b"}},
		{name: "titled single-select", prop: `{"type":"string","oneOf":[{"const":"h1","title":"Superman"},{"const":"h2","title":"Wonder Woman"}],"default":"h1"}`,
			want: tools.Field{Type: tools.FieldString, Enum: []string{"h1", "h2"}, EnumNames: []string{"Superman", "Wonder Woman"}, Default: "h1"}},
		{name: "legacy enumNames", prop: `{"type":"string","enum":["p1","p2"],"enumNames":["Cats","Dogs"]}`,
			want: tools.Field{Type: tools.FieldString, Enum: []string{"p1", "p2"}, EnumNames: []string{"Cats", "Dogs"}}},
		{name: "untitled multi-select", prop: `{"type":"array","minItems":1,"maxItems":3,"items":{"type":"string","enum":["Guitar","Piano"]},"default":["Guitar"]}`,
			want: tools.Field{Type: tools.FieldArray, Enum: []string{"Guitar", "Piano"}, MinItems: 1, MaxItems: 3, Default: []string{"Guitar"}}},
		{name: "titled multi-select", prop: `{"type":"array","items":{"anyOf":[{"const":"f1","title":"Tuna"},{"const":"f2","title":"Salmon"}]},"default":["f1"]}`,
			want: tools.Field{Type: tools.FieldArray, Enum: []string{"f1", "f2"}, EnumNames: []string{"Tuna", "Salmon"}, Default: []string{"f1"}}},
		{name: "a default outside the options is left out", prop: `{"type":"string","enum":["a"],"default":"z"}`,
			want: tools.Field{Type: tools.FieldString, Enum: []string{"a"}}},
		{name: "a default of the wrong type is left out", prop: `{"type":"integer","default":"many"}`,
			want: tools.Field{Type: tools.FieldInteger}},
		{name: "nested object", prop: `{"type":"object","properties":{"x":{"type":"string"}}}`, refuse: "nested object"},
		{name: "unknown type", prop: `{"type":"null"}`, refuse: `type "null"`},
		{name: "no type", prop: `{"title":"x"}`, refuse: `type ""`},
		{name: "list of free text", prop: `{"type":"array","items":{"type":"string"}}`, refuse: "needs options"},
		{name: "list of numbers", prop: `{"type":"array","items":{"type":"number","enum":[1,2]}}`, refuse: "not a primitive"},
		{name: "list of objects", prop: `{"type":"array","items":{"type":"object"}}`, refuse: "string options"},
		{name: "list of lists", prop: `{"type":"array","items":{"type":"array","items":{"enum":["a"]}}}`, refuse: "string options"},
		{name: "list without items", prop: `{"type":"array"}`, refuse: "string options"},
		{name: "enum of a number", prop: `{"type":"number","enum":["1"]}`, refuse: "enum must be of strings"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			schema := `{"type":"object","properties":{"f":` + tc.prop + `},"required":["f"]}`
			fields, err := tools.ParseForm(json.RawMessage(schema))
			if tc.refuse != "" {
				if err == nil || !strings.Contains(err.Error(), tc.refuse) || !strings.Contains(err.Error(), `"f"`) {
					t.Fatalf("ParseForm = %+v, %v; want a refusal naming the field and saying %q", fields, err, tc.refuse)
				}
				return
			}
			if err != nil {
				t.Fatalf("the form was refused: %v", err)
			}
			want := tc.want
			want.Name, want.Required = "f", true
			if len(fields) != 1 || !reflect.DeepEqual(fields[0], want) {
				t.Fatalf("field = %+v\nwant    %+v", fields, want)
			}
		})
	}
}

// A form with more fields or options than any chat shows is refused rather than cut short.
func TestParseFormRefusesWhatNoChatShows(t *testing.T) {
	var props, opts []string
	for i := range tools.MaxFormFields + 1 {
		props = append(props, `"f`+strings.Repeat("x", i)+`":{"type":"string"}`)
	}
	for i := range tools.MaxEnumOptions + 1 {
		opts = append(opts, `"o`+strings.Repeat("x", i)+`"`)
	}
	for name, schema := range map[string]string{
		"fields":  `{"type":"object","properties":{` + strings.Join(props, ",") + `}}`,
		"options": `{"type":"object","properties":{"f":{"type":"array","items":{"enum":[` + strings.Join(opts, ",") + `]}}}}`,
		"top":     `{"type":"array"}`,
	} {
		if _, err := tools.ParseForm(json.RawMessage(schema)); err == nil {
			t.Errorf("a form with too many %s was read", name)
		}
	}
}

// An answer is checked against the field it fills: a multi-select takes a list of its own
// options, each once, within its bounds; the other kinds as before.
func TestCheckAnswerHoldsEveryKindToItsSchema(t *testing.T) {
	multi := tools.Field{Name: "m", Type: tools.FieldArray, Enum: []string{"a", "b", "c"}, MinItems: 1, MaxItems: 2, Required: true}
	for _, tc := range []struct {
		name  string
		field tools.Field
		value any
		bad   string
	}{
		{"multi as decoded JSON", multi, []any{"a", "c"}, ""},
		{"multi as strings", multi, []string{"b"}, ""},
		{"multi too few", multi, []string{}, "at least 1"},
		{"multi too many", multi, []string{"a", "b", "c"}, "at most 2"},
		{"multi twice", multi, []string{"a", "a"}, "twice"},
		{"multi foreign option", multi, []string{"z"}, "not one of"},
		{"multi not a list", multi, "a", "list of options"},
		{"multi of numbers", multi, []any{1.0}, "list of options"},
		{"email", tools.Field{Name: "e", Type: tools.FieldString, Format: "email"}, "not-an-email", "valid email"},
		{"date", tools.Field{Name: "d", Type: tools.FieldString, Format: "date"}, "2026-12-07", ""},
		{"integer", tools.Field{Name: "i", Type: tools.FieldInteger, Maximum: fp(10)}, 11.0, "at most 10"},
		{"single-select", tools.Field{Name: "s", Type: tools.FieldString, Enum: []string{"x"}}, "y", "one of x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tools.CheckAnswer([]tools.Field{tc.field}, map[string]any{tc.field.Name: tc.value})
			if tc.bad == "" && err != nil || tc.bad != "" && (err == nil || !strings.Contains(err.Error(), tc.bad)) {
				t.Fatalf("CheckAnswer(%v) = %v; want %q", tc.value, err, tc.bad)
			}
		})
	}
}

// FuzzParseForm: a server's schema never panics the parser, and a form it reads has no more
// fields or options than the limits and only the kinds a chat shows.
func FuzzParseForm(f *testing.F) {
	f.Add(`{"type":"object","properties":{"a":{"type":"array","items":{"anyOf":[{"const":"x","title":"X"}]},"default":["x"]}}}`)
	f.Add(`{"type":"object","properties":{"b":{"type":"string","enum":["p"],"enumNames":["P"],"default":"p"}},"required":["b"]}`)
	f.Add(`{"properties":{"n":{"type":"integer","minimum":1,"default":2}}}`)
	f.Fuzz(func(t *testing.T, schema string) {
		fields, err := tools.ParseForm(json.RawMessage(schema))
		if err != nil {
			return
		}
		if len(fields) > tools.MaxFormFields {
			t.Fatalf("%d fields read", len(fields))
		}
		for _, fl := range fields {
			if len(fl.Enum) > tools.MaxEnumOptions || fl.Multi() && len(fl.Enum) == 0 {
				t.Fatalf("field %+v", fl)
			}
			if fl.Default != nil {
				if err := tools.CheckAnswer([]tools.Field{fl}, map[string]any{fl.Name: fl.Default}); err != nil {
					t.Fatalf("default %v of %+v breaks its own field: %v", fl.Default, fl, err)
				}
			}
		}
	})
}
