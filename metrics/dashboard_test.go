package metrics

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"relaybot/chat"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
)

// freshBot is the metrics of a bot that has just started: two tools, two models (one priced),
// two platforms, an MCP server and the pipeline's queue, and nothing done yet.
func freshBot() *Metrics {
	m := New(Options{
		Models:        []string{"main", "backup"},
		Prices:        map[string]chat.Price{"main": {In: 1, Out: 2}},
		RequestModels: map[string]string{"main": "gpt-test"},
		Platforms:     []string{"telegram", "web"},
		MCPUp:         func() map[string]bool { return map[string]bool{"kit": true} },
	})
	m.KnowTools(func(name string) bool { return name == "echo" || name == "fetch" }, func() []string { return []string{"echo", "fetch"} })
	m.CountQueue("pipeline", func() int { return 0 })
	return m
}

// series renders a fresh bot's series as "name{label="value",...}", labels sorted.
func series(t *testing.T, m *Metrics) (names map[string]bool, lines []string) {
	t.Helper()
	fams, err := m.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	names = map[string]bool{}
	for _, f := range fams {
		names[f.GetName()] = true
		if f.GetType() == dto.MetricType_HISTOGRAM {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				names[f.GetName()+s] = true
			}
		}
		for _, mt := range f.GetMetric() {
			var ls []string
			for _, l := range mt.GetLabel() {
				ls = append(ls, l.GetName()+"="+`"`+l.GetValue()+`"`)
			}
			slices.Sort(ls)
			lines = append(lines, f.GetName()+"{"+strings.Join(ls, ",")+"}")
		}
	}
	return names, lines
}

// A dashboard shows every tool, model and platform from the first scrape: their series exist at
// zero before anything happened.
func TestAFreshBotHasItsToolModelAndPlatformSeriesAtZero(t *testing.T) {
	_, lines := series(t, freshBot())
	want := []string{
		`relaybot_tool_calls_total{status="ok",tool="echo"}`,
		`relaybot_tool_calls_total{status="timeout",tool="fetch"}`,
		`relaybot_tool_call_duration_seconds{tool="fetch"}`,
		`relaybot_model_calls_total{model="backup",status="error"}`,
		`relaybot_model_time_to_first_token_seconds{model="main"}`,
		`relaybot_model_cost_total{model="main"}`,
		`relaybot_turns_total{outcome="ok"}`,
		`relaybot_rate_limited_total{platform="telegram"}`,
		`relaybot_message_edits_total{platform="web"}`,
		`relaybot_delivery_events_total{event="send",final="true",platform="telegram"}`,
		`gen_ai_client_token_usage{gen_ai_operation_name="chat",gen_ai_provider_name="openai",gen_ai_request_model="gpt-test",gen_ai_token_type="input"}`,
		`gen_ai_client_operation_duration_seconds{error_type="",gen_ai_operation_name="chat",gen_ai_provider_name="openai",gen_ai_request_model="backup"}`,
	}
	for _, w := range want {
		if !slices.Contains(lines, w) {
			t.Errorf("a fresh bot's scrape lacks %s", w)
		}
	}
	if slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, `"running"`) }) {
		t.Errorf("a series for status running: a call is counted when it ends")
	}
}

// promIdent finds the identifiers of a PromQL expression once strings, label matchers, ranges
// and grouping clauses are taken out.
var (
	promStrings  = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	promMatchers = regexp.MustCompile(`\{[^}]*\}|\[[^\]]*\]`)
	promGrouping = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promIdent    = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*\s*\(?`)
	promKeywords = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "bool": true,
		"and": true, "or": true, "unless": true, "offset": true, "e": true, "group_left": true, "group_right": true}
)

// metricNames are the metrics a PromQL expression reads.
func metricNames(expr string) []string {
	expr = promStrings.ReplaceAllString(expr, `""`)
	expr = promMatchers.ReplaceAllString(expr, " ")
	expr = promGrouping.ReplaceAllString(expr, " ")
	var out []string
	for _, m := range promIdent.FindAllString(expr, -1) {
		if strings.HasSuffix(m, "(") {
			continue // a function or aggregation
		}
		m = strings.TrimSpace(m)
		if !promKeywords[m] {
			out = append(out, m)
		}
	}
	return out
}

// Every query of the shipped Grafana dashboard reads metrics a fresh bot exports, so no panel
// says "no data" for a metric that does not exist (or not yet).
func TestTheGrafanaDashboardQueriesOnlyMetricsTheBotExports(t *testing.T) {
	names, _ := series(t, freshBot())
	files, err := filepath.Glob("../deploy/grafana/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no dashboards in deploy/grafana (%v)", err)
	}
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var dash struct {
			Panels []struct {
				Title   string `json:"title"`
				Targets []struct {
					Expr string `json:"expr"`
				} `json:"targets"`
			} `json:"panels"`
		}
		if err := json.Unmarshal(raw, &dash); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		queries := 0
		for _, p := range dash.Panels {
			for _, tg := range p.Targets {
				used := metricNames(tg.Expr)
				if len(used) == 0 {
					t.Errorf("%s: panel %q: query %q reads no metric", file, p.Title, tg.Expr)
				}
				for _, name := range used {
					if !names[name] {
						t.Errorf("%s: panel %q reads %s, which the bot does not export", file, p.Title, name)
					}
				}
				queries++
			}
		}
		if queries == 0 {
			t.Errorf("%s has no queries", file)
		}
	}
}

// The query parser finds metric names and nothing else, so the dashboard test can fail.
func TestMetricNamesOfAQuery(t *testing.T) {
	tests := []struct {
		expr string
		want []string
	}{
		{`sum by (le, tool) (rate(relaybot_tool_call_duration_seconds_bucket[$__rate_interval]))`, []string{"relaybot_tool_call_duration_seconds_bucket"}},
		{`sum(rate(a_total{status!="ok"}[5m])) / clamp_min(sum(rate(b_total[5m])), 1e-9)`, []string{"a_total", "b_total"}},
		{`histogram_quantile(0.95, sum by (le) (rate(x_bucket{job="by(x)"}[1m])))`, []string{"x_bucket"}},
		{`up`, []string{"up"}},
	}
	for _, tc := range tests {
		if got := metricNames(tc.expr); !slices.Equal(got, tc.want) {
			t.Errorf("metricNames(%q) = %q, want %q", tc.expr, got, tc.want)
		}
	}
}
