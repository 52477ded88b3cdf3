package mcp

import (
	"strings"
	"testing"
	"unicode"
)

// FuzzParseExtTask feeds a server's task answers (CreateTaskResult, tasks/get) to the parser:
// whatever the bytes, it never panics, and a task it accepts stays within the bounds the bot
// relies on (an id it may send back in a header, a short status and message, a bounded
// number of questions with short keys, a poll interval and TTL that are never negative).
func FuzzParseExtTask(f *testing.F) {
	for _, s := range []string{
		`{"resultType":"task","taskId":"786512e2","status":"working","statusMessage":"started","createdAt":"2025-11-25T10:30:00Z","lastUpdatedAt":"2025-11-25T10:40:00Z","ttlMs":60000,"pollIntervalMs":5000}`,
		`{"resultType":"complete","taskId":"t","status":"completed","ttlMs":null,"result":{"content":[{"type":"text","text":"ok"}],"isError":false}}`,
		`{"resultType":"complete","taskId":"t","status":"failed","error":{"code":-32603,"message":"rate limit"}}`,
		`{"resultType":"complete","taskId":"t","status":"input_required","inputRequests":{"name":{"method":"elicitation/create","params":{"mode":"form","message":"Name?","requestedSchema":{"type":"object","properties":{"name":{"type":"string"}}}}}}}`,
		`{"taskId":"t","status":"paused","pollIntervalMs":-5,"ttlMs":1e308}`,
		`{"taskId":"a\u0000b","status":"working"}`,
		`[]`, `null`, `{"status":"completed","taskId":"t","result":[]}`,
	} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, raw []byte, create bool) {
		task, err := parseExtTask(raw, create)
		if err != nil {
			return
		}
		if task.ID == "" || len(task.ID) > maxTaskIDLen || strings.IndexFunc(task.ID, unicode.IsControl) >= 0 {
			t.Fatalf("accepted task id %q", task.ID)
		}
		if task.Status == "" || len(task.Status) > maxTaskStatusLen || len([]rune(task.Message)) > maxTaskMessage+1 {
			t.Fatalf("accepted status %q, message of %d bytes", task.Status, len(task.Message))
		}
		if task.Poll < 0 || task.TTL < 0 || taskPoll(task.Poll) < minTaskPoll || taskPoll(task.Poll) > maxTaskPoll {
			t.Fatalf("poll %s, ttl %s", task.Poll, task.TTL)
		}
		if len(task.Inputs) > maxTaskInputs {
			t.Fatalf("%d questions kept", len(task.Inputs))
		}
		for k := range task.Inputs {
			if k == "" || len(k) > maxTaskInputKey {
				t.Fatalf("question key %q kept", k)
			}
		}
		if task.Status == taskCompleted && !isObject(task.Result) {
			t.Fatalf("completed without an object result: %s", task.Result)
		}
		if task.Status == taskFailed && task.Err == nil {
			t.Fatal("failed without an error")
		}
	})
}
