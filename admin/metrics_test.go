package admin

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestMetricsExposition(t *testing.T) {
	m := NewMetrics()
	m.TurnFinished("ok", 1500*time.Millisecond)
	m.TurnFinished("error", 200*time.Millisecond)
	m.ToolCallFinished("fetch_url", "ok", 300*time.Millisecond)
	m.ToolCallFinished("fetch_url", "timeout", 31*time.Second)
	m.ToolCallFinished(`we"ird\tool`, "error", time.Millisecond)
	m.DeliveryEvent("telegram", "edit")
	m.DeliveryEvent("telegram", "edit")
	m.DeliveryEvent("telegram", "rate_limited")
	m.DeliveryEvent("discord", "send")
	m.SetQueueDepth("turns", 3)
	health := []ServerHealth{{Name: "wx", State: "down"}, {Name: "docs", State: "up"}}
	m.mcpUp = func() []ServerHealth { return health }

	var b strings.Builder
	if _, err := m.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		`relaybot_turns_total{outcome="ok"} 1`,
		`relaybot_turns_total{outcome="error"} 1`,
		`relaybot_tool_calls_total{tool="fetch_url",status="timeout"} 1`,
		`relaybot_tool_call_duration_seconds_bucket{tool="fetch_url",le="0.5"} 1`,
		`relaybot_tool_call_duration_seconds_bucket{tool="fetch_url",le="60"} 2`,
		`relaybot_tool_call_duration_seconds_bucket{tool="fetch_url",le="+Inf"} 2`,
		`relaybot_tool_call_duration_seconds_sum{tool="fetch_url"} 31.3`,
		`relaybot_tool_call_duration_seconds_count{tool="fetch_url"} 2`,
		`relaybot_tool_calls_total{tool="we\"ird\\tool",status="error"} 1`,
		`relaybot_message_edits_total{platform="telegram"} 2`,
		`relaybot_rate_limited_total{platform="telegram"} 1`,
		`relaybot_message_sends_total{platform="discord"} 1`,
		`relaybot_queue_depth{queue="turns"} 3`,
		`relaybot_mcp_server_up{server="docs"} 1`,
		`relaybot_mcp_server_up{server="wx"} 0`,
		"# TYPE relaybot_turn_duration_seconds histogram",
		"# TYPE relaybot_turns_total counter",
		"# TYPE relaybot_queue_depth gauge",
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("exposition lacks %q", want)
		}
	}
	// Every sample line has the shape name{labels} value.
	sample := regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*",?)*\})? [-+0-9.eInf]+$`)
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		if !sample.MatchString(line) {
			t.Errorf("malformed sample line %q", line)
		}
	}
	// A server that comes up shows on the next scrape.
	health[0].State = "up"
	b.Reset()
	m.WriteTo(&b)
	if !strings.Contains(b.String(), `relaybot_mcp_server_up{server="wx"} 1`) {
		t.Error("MCP state not refreshed at scrape time")
	}
}

func TestMetricsEndpoint(t *testing.T) {
	st := openStore(t)
	m := NewMetrics()
	m.ToolCallFinished("current_time", "ok", time.Millisecond)
	_, ts := newTestServer(t, st, testToken, func(o *Options) { o.Metrics = m })
	req, _ := http.NewRequest(http.MethodGet, ts.URL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain; version=0.0.4") {
		t.Fatalf("/metrics: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(body), `relaybot_tool_calls_total{tool="current_time",status="ok"} 1`) {
		t.Errorf("/metrics body lacks the tool call:\n%s", body)
	}
}

func TestNilMetricsIgnoresCalls(t *testing.T) {
	var m *Metrics
	m.TurnFinished("ok", time.Second)
	m.ToolCallFinished("x", "ok", time.Second)
	m.DeliveryEvent("web", "edit")
	m.SetQueueDepth("q", 1)
	m.SetMCPServerUp("s", true)
	if n, err := m.WriteTo(io.Discard); n != 0 || err != nil {
		t.Errorf("nil WriteTo = %d, %v", n, err)
	}
}
