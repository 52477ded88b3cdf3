package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"relaybot/internal/testkit/wait"
)

// startFakes runs the command on loopback and returns its ready file's assignments.
func startFakes(t *testing.T) map[string]string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := filepath.Join(t.TempDir(), "fakes.env")
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"-ready", ready}) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
	var env map[string]string
	wait.Until(t, "the ready file", func() error {
		b, err := os.ReadFile(ready)
		if err != nil {
			return err
		}
		env = map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			k, v, _ := strings.Cut(line, "=")
			env[k] = v
		}
		return nil
	})
	return env
}

func call(t *testing.T, method, url, body string, out any) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: %s: %s", method, url, resp.Status, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, url, err, b)
		}
	}
}

// TestControlAPI drives the fakes the way .ci/docker does: a message sent over the control API
// reaches a Bot API client's getUpdates, a sendMessage shows in /telegram/messages, and the
// model answers by its script and records the request.
func TestControlAPI(t *testing.T) {
	env := startFakes(t)
	ctl, token := env["CONTROL_URL"], env["TELEGRAM_TOKEN"]
	api := func(method string) string { return fmt.Sprintf(env["TELEGRAM_ENDPOINT"], token, method) }

	var sent struct {
		MessageID int `json:"message_id"`
	}
	call(t, "POST", ctl+"/telegram/send", `{"chat_id": 42, "text": "hello"}`, &sent)
	var updates struct {
		OK     bool `json:"ok"`
		Result []struct {
			Message struct {
				MessageID int    `json:"message_id"`
				Text      string `json:"text"`
			} `json:"message"`
		} `json:"result"`
	}
	call(t, "POST", api("getUpdates"), `{"timeout": 0}`, &updates)
	if len(updates.Result) != 1 || updates.Result[0].Message.Text != "hello" || updates.Result[0].Message.MessageID != sent.MessageID {
		t.Fatalf("getUpdates = %+v, want the message sent over the control API", updates)
	}
	call(t, "POST", api("sendMessage"), `{"chat_id": 42, "text": "echo: hello"}`, nil)
	var msgs []sentMessage
	call(t, "GET", ctl+"/telegram/messages?chat_id=42", "", &msgs)
	if len(msgs) != 1 || msgs[0].Text != "echo: hello" {
		t.Fatalf("/telegram/messages = %+v, want the bot's one message", msgs)
	}

	cases := []struct {
		name     string
		messages string
		want     string // the streamed content, or "tool:NAME ARGS"
	}{
		{"text is echoed", `[{"role": "user", "content": "hi there"}]`, "echo: hi there"},
		{"call makes a tool call", `[{"role": "user", "content": "call greet {\"name\":\"x\"}"}]`, `tool:greet {"name":"x"}`},
		{"a tool result is quoted", `[{"role": "user", "content": "call greet"}, {"role": "assistant", "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "greet", "arguments": "{}"}}]}, {"role": "tool", "tool_call_id": "call_1", "content": "hello x"}]`, "tool said: hello x"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body := `{"model": "m", "stream": true, "tools": [{"type": "function", "function": {"name": "greet", "parameters": {"type": "object"}}}], "messages": ` + tc.messages + `}`
			resp, err := http.Post(env["LLM_URL"]+"/chat/completions", "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var content, tool, args string
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				data, ok := strings.CutPrefix(sc.Text(), "data: ")
				if !ok || data == "[DONE]" {
					continue
				}
				var chunk struct {
					Choices []struct {
						Delta struct {
							Content   string `json:"content"`
							ToolCalls []struct {
								Function struct{ Name, Arguments string } `json:"function"`
							} `json:"tool_calls"`
						} `json:"delta"`
					} `json:"choices"`
				}
				if err := json.Unmarshal([]byte(data), &chunk); err != nil {
					t.Fatalf("chunk %s: %v", data, err)
				}
				for _, c := range chunk.Choices {
					content += c.Delta.Content
					for _, tc := range c.Delta.ToolCalls {
						tool += tc.Function.Name
						args += tc.Function.Arguments
					}
				}
			}
			got := content
			if tool != "" {
				got = "tool:" + tool + " " + args
			}
			if got != tc.want {
				t.Fatalf("the model answered %q, want %q", got, tc.want)
			}
		})
	}
	var reqs []recordedRequest
	call(t, "GET", ctl+"/llm/requests", "", &reqs)
	if len(reqs) != len(cases) || reqs[0].Messages[0].Content != "hi there" || len(reqs[0].Tools) != 1 {
		t.Fatalf("/llm/requests = %+v, want the %d requests made", reqs, len(cases))
	}
}
