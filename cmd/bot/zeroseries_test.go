package main

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// A fresh bot's /metrics already has the series a dashboard draws: every tool (the MCP kit's
// included) by status, every model (also as the GenAI client metrics) and every platform, at 0.
func TestAFreshBotsMetricsHaveEveryToolModelAndPlatformAtZero(t *testing.T) {
	e := newEnv(t)
	e.start(e.toml().set("admin", webChatAdmin...).parse(t))
	e.waitLog("admin listening")
	m := regexp.MustCompile(`admin listening" addr=(\S+)`).FindStringSubmatch(e.logs.String())
	if m == nil {
		t.Fatalf("no admin address in the logs")
	}
	resp, err := http.Get("http://" + m[1] + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	lines := strings.Split(string(body), "\n")
	has := func(name string, labels ...string) bool {
		for _, l := range lines {
			if !strings.HasPrefix(l, name+"{") || !strings.HasSuffix(l, "} 0") {
				continue
			}
			all := true
			for _, lb := range labels {
				all = all && strings.Contains(l, lb)
			}
			if all {
				return true
			}
		}
		return false
	}
	for _, c := range []struct {
		name   string
		labels []string
	}{
		{"relaybot_tool_calls_total", []string{`tool="echo"`, `status="ok"`}},
		{"relaybot_tool_calls_total", []string{`tool="current_time"`, `status="error"`}},
		{"relaybot_model_calls_total", []string{`model="primary"`, `status="ok"`}},
		{"relaybot_rate_limited_total", []string{`platform="telegram"`}},
		{"relaybot_message_sends_total", []string{`platform="web"`}},
		{"gen_ai_client_token_usage_count", []string{`gen_ai_request_model="test-model"`, `gen_ai_token_type="output"`}},
		{"gen_ai_client_operation_duration_seconds_count", []string{`gen_ai_request_model="test-model"`, `gen_ai_provider_name="openai"`}},
	} {
		if !has(c.name, c.labels...) {
			t.Errorf("a fresh bot's /metrics has no %s{%s} at 0", c.name, strings.Join(c.labels, ","))
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", body)
	}
}
