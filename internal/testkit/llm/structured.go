package llm

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// schemaName is what the API accepts as a json_schema's name.
var schemaName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// JSON is a reply whose content is v encoded as JSON: a structured-output answer.
func JSON(v any) Reply {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("llm fake: encoding a JSON reply: %v", err))
	}
	return Text(string(b))
}

// checkResponseFormat applies the API's rules to a response_format and returns the schema's name
// for json_schema: the type is text, json_object or json_schema; json_object needs the word
// "json" in the messages; json_schema needs a name of letters, digits, '_' and '-' (at most 64)
// and a schema; a strict schema's every object lists all its properties as required and sets
// additionalProperties to false.
func checkResponseFormat(raw json.RawMessage, msgs []Message) (string, error) {
	if len(raw) == 0 {
		return "", nil
	}
	var rf struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Name   string          `json:"name"`
			Strict bool            `json:"strict"`
			Schema json.RawMessage `json:"schema"`
		} `json:"json_schema"`
	}
	if err := json.Unmarshal(raw, &rf); err != nil {
		return "", fmt.Errorf("response_format: %w", err)
	}
	switch rf.Type {
	case "text":
		return "", nil
	case "json_object":
		for _, m := range msgs {
			if strings.Contains(strings.ToLower(m.Content), "json") {
				return "", nil
			}
		}
		return "", fmt.Errorf("'messages' must contain the word 'json' in some form, to use 'response_format' of type 'json_object'")
	case "json_schema":
	default:
		return "", fmt.Errorf("response_format.type: %q is not one of text, json_object, json_schema", rf.Type)
	}
	js := rf.JSONSchema
	if js == nil {
		return "", fmt.Errorf("response_format.json_schema: missing required parameter")
	}
	if !schemaName.MatchString(js.Name) {
		return "", fmt.Errorf("response_format.json_schema.name: %q must be 1-64 letters, digits, underscores or dashes", js.Name)
	}
	if len(js.Schema) == 0 {
		return js.Name, fmt.Errorf("response_format.json_schema.schema: missing required parameter")
	}
	var schema any
	if err := json.Unmarshal(js.Schema, &schema); err != nil {
		return js.Name, fmt.Errorf("response_format.json_schema.schema: %w", err)
	}
	if js.Strict {
		if err := strictSchema(schema, "schema"); err != nil {
			return js.Name, fmt.Errorf("Invalid schema for response_format '%s': %w", js.Name, err)
		}
	}
	return js.Name, nil
}

// strictSchema checks strict mode's rules on every object schema within v.
func strictSchema(v any, path string) error {
	switch v := v.(type) {
	case map[string]any:
		if props, ok := v["properties"].(map[string]any); ok || v["type"] == "object" {
			if v["additionalProperties"] != false {
				return fmt.Errorf("In context=(%s), 'additionalProperties' is required to be supplied and to be false", path)
			}
			required := map[string]bool{}
			if list, ok := v["required"].([]any); ok {
				for _, r := range list {
					if s, ok := r.(string); ok {
						required[s] = true
					}
				}
			}
			names := make([]string, 0, len(props))
			for name := range props {
				names = append(names, name)
			}
			sort.Strings(names)
			for _, name := range names {
				if !required[name] {
					return fmt.Errorf("In context=(%s), 'required' is required to be supplied and to be an array including every key in properties. Missing '%s'", path, name)
				}
			}
		}
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if err := strictSchema(v[k], path+"."+k); err != nil {
				return err
			}
		}
	case []any:
		for i, e := range v {
			if err := strictSchema(e, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	}
	return nil
}
