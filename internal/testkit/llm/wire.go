package llm

import (
	"encoding/json"
	"fmt"
	"strings"
)

// created is the fixed "created" timestamp of every reply, for reproducible bodies.
const created = 1767225600

type wireChunk struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []wireChoice `json:"choices"`
	Usage   *wireUsage   `json:"usage,omitempty"`
}

type wireChoice struct {
	Index        int          `json:"index"`
	Delta        *wireDelta   `json:"delta,omitempty"`
	Message      *wireMessage `json:"message,omitempty"`
	FinishReason *string      `json:"finish_reason"`
}

type wireDelta struct {
	Role             string         `json:"role,omitempty"`
	Content          string         `json:"content,omitempty"`
	ReasoningContent string         `json:"reasoning_content,omitempty"`
	ToolCalls        []wireToolCall `json:"tool_calls,omitempty"`
}

type wireMessage struct {
	Role             string         `json:"role"`
	Content          *string        `json:"content"`
	ReasoningContent string         `json:"reasoning_content,omitempty"`
	ToolCalls        []wireToolCall `json:"tool_calls,omitempty"`
}

type wireToolCall struct {
	Index    *int         `json:"index,omitempty"`
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"`
	Function wireFunction `json:"function"`
}

type wireFunction struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

type wireUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
	Details          *struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details,omitempty"`
}

func wireUsageOf(u *Usage) *wireUsage {
	w := &wireUsage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens,
		TotalTokens: u.PromptTokens + u.CompletionTokens}
	if u.CachedTokens > 0 {
		w.Details = &struct {
			CachedTokens int `json:"cached_tokens"`
		}{u.CachedTokens}
	}
	return w
}

func wireToolCallDelta(d ToolCallDelta) wireToolCall {
	idx := d.Index
	tc := wireToolCall{Index: &idx, ID: d.ID, Function: wireFunction{Name: d.Name, Arguments: d.Arguments}}
	if d.ID != "" {
		tc.Type = "function"
	}
	return tc
}

// wireRequest is the part of a chat completions request the fake reads.
type wireRequest struct {
	Model         string `json:"model"`
	Stream        bool   `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	Messages []wireRequestMessage `json:"messages"`
	Tools    []struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
	ToolChoice     json.RawMessage `json:"tool_choice"`
	ResponseFormat json.RawMessage `json:"response_format"`
}

type wireRequestMessage struct {
	raw json.RawMessage
	wireRequestFields
}

type wireRequestFields struct {
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content"`
	Name             string          `json:"name"`
	ReasoningContent string          `json:"reasoning_content"`
	ToolCallID       string          `json:"tool_call_id"`
	ToolCalls        []wireToolCall  `json:"tool_calls"`
}

// UnmarshalJSON keeps the message's raw JSON next to its decoded fields.
func (m *wireRequestMessage) UnmarshalJSON(b []byte) error {
	m.raw = append(json.RawMessage(nil), b...)
	return json.Unmarshal(b, &m.wireRequestFields)
}

// decodeRequest reads a request body; on error the returned Request holds what could be read.
func decodeRequest(body []byte) (Request, error) {
	var wr wireRequest
	if err := json.Unmarshal(body, &wr); err != nil {
		return Request{}, fmt.Errorf("request body is not a chat completions request: %w", err)
	}
	req := Request{
		Model:      wr.Model,
		Stream:     wr.Stream,
		ToolChoice: wr.ToolChoice,
	}
	if len(wr.ResponseFormat) > 0 && string(wr.ResponseFormat) != "null" {
		req.ResponseFormat = wr.ResponseFormat
	}
	if wr.StreamOptions != nil {
		req.IncludeUsage = wr.StreamOptions.IncludeUsage
	}
	for _, t := range wr.Tools {
		req.Tools = append(req.Tools, t.Function.Name)
	}
	for i, wm := range wr.Messages {
		m := Message{Raw: wm.raw, Role: wm.Role, Name: wm.Name, ReasoningContent: wm.ReasoningContent, ToolCallID: wm.ToolCallID}
		if err := decodeContent(wm.Content, &m); err != nil {
			return req, fmt.Errorf("messages[%d].content: %w", i, err)
		}
		for _, tc := range wm.ToolCalls {
			m.ToolCalls = append(m.ToolCalls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
		}
		req.Messages = append(req.Messages, m)
	}
	if req.Model == "" {
		return req, fmt.Errorf("model: must not be empty")
	}
	name, err := checkResponseFormat(req.ResponseFormat, req.Messages)
	req.SchemaName = name
	return req, err
}

// decodeContent reads a message content: null, a string, or an array of text and image_url parts.
func decodeContent(raw json.RawMessage, m *Message) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	if raw[0] == '"' {
		return json.Unmarshal(raw, &m.Content)
	}
	var parts []struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		ImageURL *struct {
			URL string `json:"url"`
		} `json:"image_url"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return fmt.Errorf("neither a string nor an array of parts: %w", err)
	}
	var text []string
	for i, p := range parts {
		switch p.Type {
		case "text":
			text = append(text, p.Text)
		case "image_url":
			if p.ImageURL == nil || p.ImageURL.URL == "" {
				return fmt.Errorf("part %d: image_url without url", i)
			}
			m.ImageURLs = append(m.ImageURLs, p.ImageURL.URL)
		default:
			return fmt.Errorf("part %d: unknown type %q", i, p.Type)
		}
	}
	m.Content = strings.Join(text, "\n")
	return nil
}
