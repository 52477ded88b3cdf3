package agent

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"

	openai "github.com/sashabaranov/go-openai"

	"relaybot/chat"
	"relaybot/tools"
)

// emptyToolResult replaces an empty tool result upstream: providers reject tool messages
// without content.
const emptyToolResult = "(no output)"

var emptyObjectSchema = json.RawMessage(`{"type":"object","properties":{}}`)

// toolSpecs converts tool specs to the function tools of the chat completions API.
func toolSpecs(specs []tools.Spec) []openai.Tool {
	if len(specs) == 0 {
		return nil
	}
	out := make([]openai.Tool, len(specs))
	for i, s := range specs {
		params := s.Parameters
		if len(params) == 0 {
			params = emptyObjectSchema
		}
		out[i] = openai.Tool{
			Type: openai.ToolTypeFunction,
			Function: &openai.FunctionDefinition{
				Name:        s.Name,
				Description: s.Description,
				Parameters:  params,
			},
		}
	}
	return out
}

// toUpstream converts the transcript to wire messages carrying only role, content, name, tool
// calls, tool call id, and reasoning on the assistant messages of user turns that called tools.
// The second result holds, per wire message, the raw fields the provider sent with it, for the
// transport to add (see wireTransport). Images become data
// URLs for vision models; other models get a note that images were left out. Assistant messages
// with neither text nor tool calls are skipped, since providers reject them. Two user messages in
// a row (a turn that failed before the model answered, or whose answer was empty) are joined into
// one, since providers whose chat templates require alternating roles reject them.
func toUpstream(msgs []chat.Message, vision bool) ([]openai.ChatCompletionMessage, []wireExtras) {
	out := make([]openai.ChatCompletionMessage, 0, len(msgs))
	extras := make([]wireExtras, 0, len(msgs))
	withReasoning := turnsWithToolCalls(msgs)
	for i := range msgs {
		m := &msgs[i]
		if m.Role == chat.RoleAssistant && m.Content == "" && len(m.ToolCalls) == 0 {
			continue
		}
		om := openai.ChatCompletionMessage{
			Role:       string(m.Role),
			Content:    m.Content,
			Name:       m.Name,
			ToolCallID: m.ToolCallID,
		}
		if m.Role == chat.RoleTool && om.Content == "" {
			om.Content = emptyToolResult
		}
		if len(m.Images) > 0 {
			if vision {
				om.Content = ""
				om.MultiContent = imageParts(m)
			} else {
				om.Content = withImageNote(m.Content, len(m.Images))
			}
		}
		ex := wireExtras{Message: m.Extra}
		if len(m.ToolCalls) > 0 {
			om.ToolCalls = make([]openai.ToolCall, len(m.ToolCalls))
			for j, tc := range m.ToolCalls {
				om.ToolCalls[j] = openai.ToolCall{
					ID:       tc.ID,
					Type:     openai.ToolTypeFunction,
					Function: openai.FunctionCall{Name: tc.Name, Arguments: normalizeArgs(tc.Arguments)},
				}
				if len(tc.Extra) > 0 {
					if ex.Calls == nil {
						ex.Calls = map[string]json.RawMessage{}
					}
					ex.Calls[callKey(tc.ID, j)] = tc.Extra
				}
			}
		}
		if m.Role == chat.RoleAssistant && withReasoning[i] && m.ReasoningField == reasoningContentField {
			om.ReasoningContent = m.Reasoning
		}
		if n := len(out); n > 0 && om.Role == string(chat.RoleUser) && out[n-1].Role == string(chat.RoleUser) {
			joinUser(&out[n-1], om)
			continue
		}
		out = append(out, om)
		extras = append(extras, ex)
	}
	return out, extras
}

// reasoningContentField is the wire field of DeepSeek-style reasoning, the only form of reasoning
// sent back upstream.
const reasoningContentField = "reasoning_content"

// turnsWithToolCalls marks the messages of the user turns (from one user message to the next)
// in which the model called a tool.
func turnsWithToolCalls(msgs []chat.Message) []bool {
	marks := make([]bool, len(msgs))
	start := 0
	for i := 0; i <= len(msgs); i++ {
		if i < len(msgs) && msgs[i].Role != chat.RoleUser {
			continue
		}
		called := false
		for j := start; j < i; j++ {
			called = called || len(msgs[j].ToolCalls) > 0
		}
		for j := start; j < i; j++ {
			marks[j] = called
		}
		start = i + 1
	}
	return marks
}

// joinUser appends the user message next to the user message prev, keeping both texts (and
// images) in order.
func joinUser(prev *openai.ChatCompletionMessage, next openai.ChatCompletionMessage) {
	if prev.Name != next.Name {
		prev.Name = ""
	}
	if len(prev.MultiContent) == 0 && len(next.MultiContent) == 0 {
		switch {
		case prev.Content == "":
			prev.Content = next.Content
		case next.Content != "":
			prev.Content += "\n\n" + next.Content
		}
		return
	}
	parts := prev.MultiContent
	if len(parts) == 0 && prev.Content != "" {
		parts = []openai.ChatMessagePart{{Type: openai.ChatMessagePartTypeText, Text: prev.Content}}
	}
	if len(next.MultiContent) > 0 {
		parts = append(parts, next.MultiContent...)
	} else if next.Content != "" {
		parts = append(parts, openai.ChatMessagePart{Type: openai.ChatMessagePartTypeText, Text: next.Content})
	}
	prev.Content = ""
	prev.MultiContent = parts
}

func imageParts(m *chat.Message) []openai.ChatMessagePart {
	parts := make([]openai.ChatMessagePart, 0, len(m.Images)+1)
	if m.Content != "" {
		parts = append(parts, openai.ChatMessagePart{Type: openai.ChatMessagePartTypeText, Text: m.Content})
	}
	for _, img := range m.Images {
		parts = append(parts, openai.ChatMessagePart{
			Type:     openai.ChatMessagePartTypeImageURL,
			ImageURL: &openai.ChatMessageImageURL{URL: dataURL(img)},
		})
	}
	return parts
}

func dataURL(img chat.Image) string {
	mime := img.MIME
	if mime == "" {
		mime = http.DetectContentType(img.Data)
	}
	return "data:" + mime + ";base64," + base64.StdEncoding.EncodeToString(img.Data)
}

func withImageNote(text string, n int) string {
	note := "[" + strconv.Itoa(n) + " image(s) attached; this model cannot see images]"
	if text == "" {
		return note
	}
	return text + "\n" + note
}
