package metrics

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"relaybot/chat"
	"relaybot/pipeline"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	openai "github.com/sashabaranov/go-openai"

	"relaybot/adapters/delivery"
	"relaybot/audit"
)

// scrape fetches url over HTTP and parses the text exposition as Prometheus would.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: status %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("the exposition does not parse: %v", err)
	}
	return fams
}

// value returns the value of the sample of family name whose labels include want, and whether
// there is one.
func value(fams map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	f, ok := fams[name]
	if !ok {
		return 0, false
	}
next:
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		for _, lp := range m.GetLabel() {
			have[lp.GetName()] = lp.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		}
	}
	return 0, false
}

func TestScrapeShowsWhatTheBotDid(t *testing.T) {
	m := New(Options{
		Models: []string{"main", "backup"},
		MCPUp:  func() map[string]bool { return map[string]bool{"docs": true, "wx": false} },
	})
	m.KnowTools(func(name string) bool { return name == "fetch_url" }, nil)
	m.CountQueue("turns", func() int { return 3 })
	m.TurnFinished(context.Background(), &pipeline.TurnFinish{Status: "ok"}, 1500*time.Millisecond)
	m.TurnFinished(context.Background(), &pipeline.TurnFinish{Status: "error"}, 200*time.Millisecond)
	m.ToolCallFinished("fetch_url", "ok", 300*time.Millisecond)
	m.ToolCallFinished("fetch_url", "timeout", 31*time.Second)
	tg := chat.Ref{Platform: chat.Telegram, ChatID: "5"}
	m.Observe(context.Background(), delivery.Event{Kind: delivery.EventEdit, Chat: tg})
	m.Observe(context.Background(), delivery.Event{Kind: delivery.EventEdit, Chat: tg})
	m.Observe(context.Background(), delivery.Event{Kind: delivery.EventRateLimited, Chat: tg})
	m.Observe(context.Background(), delivery.Event{Kind: delivery.EventFailed, Chat: tg, Final: true, Err: errors.New("gone")})
	m.Observe(context.Background(), delivery.Event{Kind: delivery.EventSend, Chat: chat.Ref{Platform: chat.Discord, ChatID: "9"}})
	m.ModelCallFinished(context.Background(), chat.ModelCall{Model: "main", Status: chat.StatusError,
		Err: fmt.Errorf("model main: %w", &openai.APIError{HTTPStatusCode: 429, Message: "slow down"})})
	m.ModelCallFinished(context.Background(), chat.ModelCall{Model: "backup", Status: chat.StatusOK, FallbackReason: "rate limited",
		TimeToFirstToken: 400 * time.Millisecond, TokensIn: 120, TokensOut: 30})

	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	fams := scrape(t, srv.URL)

	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"relaybot_turns_total", map[string]string{"outcome": "ok"}, 1},
		{"relaybot_turns_total", map[string]string{"outcome": "error"}, 1},
		{"relaybot_turn_duration_seconds", map[string]string{"outcome": "ok"}, 1},
		{"relaybot_tool_calls_total", map[string]string{"tool": "fetch_url", "status": "timeout"}, 1},
		{"relaybot_tool_call_duration_seconds", map[string]string{"tool": "fetch_url"}, 2},
		{"relaybot_message_edits_total", map[string]string{"platform": "telegram"}, 2},
		{"relaybot_rate_limited_total", map[string]string{"platform": "telegram"}, 1},
		{"relaybot_message_sends_total", map[string]string{"platform": "discord"}, 1},
		{"relaybot_delivery_events_total", map[string]string{"platform": "telegram", "event": "failed", "final": "true"}, 1},
		{"relaybot_queue_depth", map[string]string{"queue": "turns"}, 3},
		{"relaybot_mcp_server_up", map[string]string{"server": "docs"}, 1},
		{"relaybot_mcp_server_up", map[string]string{"server": "wx"}, 0},
		{"relaybot_model_calls_total", map[string]string{"model": "main", "status": "error"}, 1},
		{"relaybot_model_errors_total", map[string]string{"model": "main", "kind": "rate_limit"}, 1},
		{"relaybot_model_fallbacks_total", map[string]string{"model": "backup"}, 1},
		{"relaybot_model_tokens_total", map[string]string{"model": "backup", "direction": "in"}, 120},
		{"relaybot_model_tokens_total", map[string]string{"model": "backup", "direction": "out"}, 30},
		{"relaybot_model_time_to_first_token_seconds", map[string]string{"model": "backup"}, 1},
	} {
		got, ok := value(fams, c.name, c.labels)
		if !ok {
			t.Errorf("the scrape has no %s%v", c.name, c.labels)
			continue
		}
		if got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	for _, name := range []string{"go_goroutines", "process_resident_memory_bytes", "go_memstats_heap_alloc_bytes"} {
		if _, ok := fams[name]; !ok {
			t.Errorf("the scrape has no %s (the Go and process collectors)", name)
		}
	}
	if f := fams["relaybot_turn_duration_seconds"]; f.GetType() != dto.MetricType_HISTOGRAM {
		t.Errorf("relaybot_turn_duration_seconds is a %v, want a histogram with buckets", f.GetType())
	}
}

func TestNamesTheModelMadeUpCreateNoSeries(t *testing.T) {
	m := New(Options{Models: []string{"main"}})
	m.KnowTools(func(name string) bool { return name == "current_time" }, nil)
	for i := range 20 {
		name := fmt.Sprintf("made_up_%d_%s", i, strings.Repeat("x", 3000))
		m.ToolCallFinished(name, "not_found", time.Millisecond)
		m.ModelCallFinished(context.Background(), chat.ModelCall{Model: name, Status: chat.StatusOK})
	}
	m.ToolCallFinished("current_time", "ok", time.Millisecond)

	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	fams := scrape(t, srv.URL)
	if got, _ := value(fams, "relaybot_tool_calls_total", map[string]string{"tool": Unknown, "status": "not_found"}); got != 20 {
		t.Errorf("made-up tool names counted under %q: %v, want 20", Unknown, got)
	}
	if got, _ := value(fams, "relaybot_model_calls_total", map[string]string{"model": Unknown}); got != 20 {
		t.Errorf("unconfigured model names counted under %q: %v, want 20", Unknown, got)
	}
	if n := len(fams["relaybot_tool_calls_total"].GetMetric()); n != 2 {
		t.Errorf("relaybot_tool_calls_total has %d series, want 2 (current_time and %s)", n, Unknown)
	}
	for _, f := range fams {
		for _, mm := range f.GetMetric() {
			for _, lp := range mm.GetLabel() {
				if strings.Contains(lp.GetValue(), "made_up") {
					t.Fatalf("%s has a series labelled with a made-up name", f.GetName())
				}
			}
		}
	}
}

func TestToolRecorderCountsAndPassesOn(t *testing.T) {
	m := New(Options{})
	m.KnowTools(func(string) bool { return true }, nil)
	var passed []audit.Status
	next := recorderFunc(func(rec *audit.Record) { passed = append(passed, rec.Status) })
	r := m.Recorder(next)
	rec := &audit.Record{ToolName: "current_time", Status: audit.StatusRunning}
	if err := r.Start(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	rec.Status = audit.StatusOK
	if err := r.Finish(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	if len(passed) != 2 {
		t.Fatalf("the next recorder saw %d records, want start and finish", len(passed))
	}
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	if got, _ := value(scrape(t, srv.URL), "relaybot_tool_calls_total", map[string]string{"tool": "current_time", "status": "ok"}); got != 1 {
		t.Errorf("finished calls counted: %v, want 1 (starts are not counted)", got)
	}
}

type recorderFunc func(*audit.Record)

func (f recorderFunc) Start(_ context.Context, r *audit.Record) error  { f(r); return nil }
func (f recorderFunc) Finish(_ context.Context, r *audit.Record) error { f(r); return nil }

func TestNilMetricsIgnoresEveryCall(t *testing.T) {
	var m *Metrics
	m.TurnFinished(context.Background(), &pipeline.TurnFinish{Status: "ok"}, time.Second)
	m.ToolCallFinished("x", "ok", time.Second)
	m.Observe(context.Background(), delivery.Event{Kind: delivery.EventSend})
	m.ModelCallFinished(context.Background(), chat.ModelCall{})
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	scrape(t, srv.URL)
}

// The cost counter prices each model call's tokens with the model's configured price per million.
func TestModelCostFollowsThePrices(t *testing.T) {
	m := New(Options{Models: []string{"mini", "free"}, Prices: map[string]chat.Price{"mini": {In: 0.15, Out: 0.60}}})
	m.ModelCallFinished(context.Background(), chat.ModelCall{Model: "mini", Status: chat.StatusOK, TokensIn: 2_000_000, TokensOut: 500_000})
	m.ModelCallFinished(context.Background(), chat.ModelCall{Model: "mini", Status: chat.StatusOK, TokensIn: 1_000_000, TokensOut: 0})
	m.ModelCallFinished(context.Background(), chat.ModelCall{Model: "free", Status: chat.StatusOK, TokensIn: 1_000_000, TokensOut: 1_000_000})
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	fams := scrape(t, srv.URL)
	if got, ok := value(fams, "relaybot_model_cost_total", map[string]string{"model": "mini"}); !ok || math.Abs(got-(3*0.15+0.5*0.60)) > 1e-9 {
		t.Fatalf("relaybot_model_cost_total{model=mini} = %v (%v), want 0.75", got, ok)
	}
	if _, ok := value(fams, "relaybot_model_cost_total", map[string]string{"model": "free"}); ok {
		t.Fatalf("an unpriced model has a cost series")
	}
}

// Cached prompt tokens are counted apart and priced at the cache's price.
func TestCachedTokensAreCountedAndPricedAtTheCachesPrice(t *testing.T) {
	m := New(Options{Models: []string{"mini"}, Prices: map[string]chat.Price{"mini": {In: 0.15, CachedIn: 0.075, CacheWrite: 0.2, Out: 0.60}}})
	m.ModelCallFinished(context.Background(), chat.ModelCall{Model: "mini", Status: chat.StatusOK, TokensIn: 2_000_000, CachedIn: 1_500_000, CacheWriteIn: 100_000, TokensOut: 0})
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	fams := scrape(t, srv.URL)
	for cache, want := range map[string]float64{"read": 1_500_000, "write": 100_000} {
		if got, ok := value(fams, "relaybot_model_cached_tokens_total", map[string]string{"model": "mini", "cache": cache}); !ok || got != want {
			t.Errorf("relaybot_model_cached_tokens_total{cache=%s} = %v (%v), want %v", cache, got, ok, want)
		}
	}
	if got, ok := value(fams, "relaybot_model_cost_total", map[string]string{"model": "mini"}); !ok || math.Abs(got-(0.4*0.15+1.5*0.075+0.1*0.2)) > 1e-9 {
		t.Fatalf("relaybot_model_cost_total = %v, want 0.1925: cached tokens at full price", got)
	}
}
