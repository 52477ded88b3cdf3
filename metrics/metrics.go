// Package metrics counts what the bot does in Prometheus collectors (prometheus/client_golang)
// on a registry of its own, and serves them in the exposition format every scraper reads.
//
// It is fed through the small observer interfaces the other packages declare for themselves:
// delivery.Observer (platform requests), pipeline.Observer (turns), provider.Observer (model calls),
// and a tools.Recorder wrapper (tool calls). Labels are bounded: a tool label is the name of a
// tool that exists, a model label the name of a configured model; anything else is "unknown", so
// a model that invents names cannot grow the exposition.
package metrics

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"relaybot/chat"
	"relaybot/provider"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"

	"relaybot/adapters/delivery"
	"relaybot/audit"
	"relaybot/pipeline"
	"relaybot/tools"
)

// Unknown is the label value that stands for a name the bot does not know (a tool the model made
// up, a model that is not configured).
const Unknown = "unknown"

// durationBuckets are the upper bounds, in seconds, of the turn and tool-call histograms.
var durationBuckets = []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// firstTokenBuckets are the upper bounds, in seconds, of the time-to-first-token histogram.
var firstTokenBuckets = []float64{0.05, 0.1, 0.25, 0.5, 0.75, 1, 1.5, 2, 3, 5, 10, 30}

// Options configure a Metrics.
type Options struct {
	// Models are the configured model names; model calls of any other name are counted as Unknown.
	Models []string
	// Prices are the models' prices per million tokens by configured name; a priced model's
	// calls add to relaybot_model_cost_total.
	Prices map[string]chat.Price
	// MCPUp, when set, is asked at every scrape whether each MCP server is up (server name → up).
	MCPUp func() map[string]bool
	// Instance, when set, is the id of this replica among several on one database: every series
	// carries it as the label instance, so the replicas' series stay apart wherever they meet.
	Instance string
	// Platforms are the enabled platforms ("telegram", "discord", "web"): their delivery series
	// exist at zero from the start.
	Platforms []string
	// Providers are the gen_ai.provider.name of each configured model by name ("openai" when
	// missing), and RequestModels the model id each asks for, for the GenAI client metrics.
	Providers, RequestModels map[string]string
}

// Metrics holds the bot's collectors. Every method is safe for concurrent use; a nil *Metrics
// ignores every call.
type Metrics struct {
	reg     *prometheus.Registry
	catalog atomic.Pointer[catalog]
	queues  *queueCollector

	mu        sync.RWMutex
	knownTool func(string) bool // nil: every tool counts under Unknown
	toolNames func() []string   // nil: no tool's series exist before its first call

	turns        *prometheus.CounterVec
	turnDuration *prometheus.HistogramVec

	toolCalls    *prometheus.CounterVec
	toolDuration *prometheus.HistogramVec

	deliveryEvents *prometheus.CounterVec
	sends          *prometheus.CounterVec
	edits          *prometheus.CounterVec
	rateLimited    *prometheus.CounterVec

	modelCalls      *prometheus.CounterVec
	modelFirstToken *prometheus.HistogramVec
	modelTokens     *prometheus.CounterVec
	modelCost       *prometheus.CounterVec
	modelCached     *prometheus.CounterVec
	modelFallbacks  *prometheus.CounterVec
	modelErrors     *prometheus.CounterVec

	// The OpenTelemetry GenAI client metrics, named as the OTel→Prometheus convention names them.
	genAITokens   *prometheus.HistogramVec
	genAIDuration *prometheus.HistogramVec
}

// New returns a Metrics with every family of the bot registered, next to the Go runtime and
// process collectors, so a scrape shows each family's HELP and TYPE before its first event.
func New(opts Options) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.catalog.Store(newCatalog(opts))
	var reg prometheus.Registerer = m.reg
	if opts.Instance != "" {
		reg = prometheus.WrapRegistererWith(prometheus.Labels{"instance": opts.Instance}, m.reg)
	}
	f := factory{reg}
	m.turns = f.counter("relaybot_turns_total", "Turns finished, by outcome (ok, error, cancelled, ...).", "outcome")
	m.turnDuration = f.histogram("relaybot_turn_duration_seconds", "Time from a user's message to the final reply, by outcome.", durationBuckets, "outcome")
	m.toolCalls = f.counter("relaybot_tool_calls_total", "Tool calls finished, by tool and audit status.", "tool", "status")
	m.toolDuration = f.histogram("relaybot_tool_call_duration_seconds", "Duration of tool calls, by tool.", durationBuckets, "tool")
	m.deliveryEvents = f.counter("relaybot_delivery_events_total", "Outcomes of platform requests of the delivery engine (send, edit, files, not_modified, rate_limited, retry, fallback, failed, typing), by platform and whether the request carried final text.", "platform", "event", "final")
	m.sends = f.counter("relaybot_message_sends_total", "Messages the bot sent, by platform.", "platform")
	m.edits = f.counter("relaybot_message_edits_total", "Message edits the bot made, by platform.", "platform")
	m.rateLimited = f.counter("relaybot_rate_limited_total", "HTTP 429 (rate limited) answers received from a platform.", "platform")
	m.modelCalls = f.counter("relaybot_model_calls_total", "Model calls made, by model and outcome (ok, error, cancelled, ...).", "model", "status")
	m.modelFirstToken = f.histogram("relaybot_model_time_to_first_token_seconds", "Wait for a model's first streamed chunk (the whole call when not streaming), by model.", firstTokenBuckets, "model")
	m.modelTokens = f.counter("relaybot_model_tokens_total", "Tokens the models reported, by model and direction (in = prompt, out = completion).", "model", "direction")
	m.modelCached = f.counter("relaybot_model_cached_tokens_total", "Prompt tokens the providers served from their prompt cache (cache = read) or wrote to it (cache = write), by model; part of relaybot_model_tokens_total's in.", "model", "cache")
	m.modelCost = f.counter("relaybot_model_cost_total", "What the models' tokens cost at the configured [[models]] prices (per million tokens; cached prompt tokens at price_cached_in, cache writes at price_cache_write), by model.", "model")
	m.modelFallbacks = f.counter("relaybot_model_fallbacks_total", "Model calls made to a fallback candidate because the one before it failed, by the model fallen back to.", "model")
	m.modelErrors = f.counter("relaybot_model_errors_total", "Failed model calls, by model and kind of error (auth, not_found, rate_limit, quota, overloaded, context_length, bad_request, server, timeout, network, other).", "model", "kind")

	genAI := []string{"gen_ai_operation_name", "gen_ai_provider_name", "gen_ai_request_model"}
	m.genAITokens = f.histogram("gen_ai_client_token_usage", "Tokens used per model call (OpenTelemetry gen_ai.client.token.usage), by token type (input, output).", genAITokenBuckets, append(genAI, "gen_ai_token_type")...)
	m.genAIDuration = f.histogram("gen_ai_client_operation_duration_seconds", "Duration of model calls (OpenTelemetry gen_ai.client.operation.duration); error_type is empty on success.", genAIDurationBuckets, append(genAI, "error_type")...)
	m.zeroModels(opts.Models)
	m.zeroPlatforms(opts.Platforms)
	for _, o := range turnOutcomes {
		m.turns.WithLabelValues(o)
		m.turnDuration.WithLabelValues(o)
	}

	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	if opts.MCPUp != nil {
		reg.MustRegister(mcpCollector{
			desc: prometheus.NewDesc("relaybot_mcp_server_up", "1 when an MCP server is connected and answering, 0 otherwise.", []string{"server"}, nil),
			up:   opts.MCPUp,
		})
	}
	m.queues = &queueCollector{desc: prometheus.NewDesc("relaybot_queue_depth", "Items waiting in a queue (turns waiting for their conversation or a free slot, ...).", []string{"queue"}, nil),
		depths: map[string]func() int{}}
	reg.MustRegister(m.queues)
	return m
}

// KnowTools makes tool calls count under their names when known reports the tool exists, and
// every tool names lists have its series at zero from the next scrape; the others, and every
// call before KnowTools, count as Unknown. The tool manager that knows is built on the metrics'
// Recorder, so it comes after them.
func (m *Metrics) KnowTools(known func(name string) bool, names func() []string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.knownTool, m.toolNames = known, names
}

// CountQueue makes every scrape ask depth how many items wait in the queue called name (the
// pipeline's, built after the metrics it reports to).
func (m *Metrics) CountQueue(name string, depth func() int) {
	if m == nil {
		return
	}
	m.queues.mu.Lock()
	defer m.queues.mu.Unlock()
	m.queues.depths[name] = depth
}

// factory registers vectors on one registry.
type factory struct{ reg prometheus.Registerer }

func (f factory) counter(name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	f.reg.MustRegister(c)
	return c
}

func (f factory) histogram(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
	f.reg.MustRegister(h)
	return h
}

// Handler serves the registry in the exposition format the scraper asks for (text by default).
func (m *Metrics) Handler() http.Handler {
	if m == nil {
		return promhttp.HandlerFor(prometheus.NewRegistry(), promhttp.HandlerOpts{})
	}
	return promhttp.HandlerFor(m.Gatherer(), promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// Gatherer returns the registry, for tests and for pushing elsewhere; each Gather first makes
// the series of tools that appeared since (an MCP server that connected) exist at zero.
func (m *Metrics) Gatherer() prometheus.Gatherer {
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		m.zeroTools()
		return m.reg.Gather()
	})
}

// TurnStarted implements pipeline.Observer: the turn's context is passed on as it is.
func (m *Metrics) TurnStarted(ctx context.Context, _ pipeline.TurnStart) context.Context {
	return ctx
}

// TurnFinished counts a finished turn with its outcome ("ok", "error", "cancelled", ...) and how
// long it took. It implements pipeline.Observer.
func (m *Metrics) TurnFinished(_ context.Context, end *pipeline.TurnFinish, took time.Duration) {
	if m == nil {
		return
	}
	m.turns.WithLabelValues(string(end.Status)).Inc()
	m.turnDuration.WithLabelValues(string(end.Status)).Observe(took.Seconds())
}

// ToolCallFinished counts a finished tool call with its audit status and duration; a tool that
// does not exist is counted as Unknown.
func (m *Metrics) ToolCallFinished(tool, status string, took time.Duration) {
	if m == nil {
		return
	}
	m.mu.RLock()
	known := m.knownTool
	m.mu.RUnlock()
	if known == nil || !known(tool) {
		tool = Unknown
	}
	m.toolCalls.WithLabelValues(tool, status).Inc()
	m.toolDuration.WithLabelValues(tool).Observe(took.Seconds())
}

// Observe counts one outcome of a platform request of the delivery engine. It implements
// delivery.Observer; sends, edits and 429s also feed their own counters.
func (m *Metrics) Observe(_ context.Context, e delivery.Event) {
	if m == nil {
		return
	}
	platform := string(e.Chat.Platform)
	final := "false"
	if e.Final {
		final = "true"
	}
	m.deliveryEvents.WithLabelValues(platform, e.Kind.String(), final).Inc()
	switch e.Kind {
	case delivery.EventSend, delivery.EventFiles:
		m.sends.WithLabelValues(platform).Inc()
	case delivery.EventEdit:
		m.edits.WithLabelValues(platform).Inc()
	case delivery.EventRateLimited:
		m.rateLimited.WithLabelValues(platform).Inc()
	}
}

// ModelCallFinished counts one model call: its outcome, time to first token, tokens, whether it
// was a fallback, and the kind of error that failed it. It implements provider.Observer.
func (m *Metrics) ModelCallFinished(_ context.Context, c chat.ModelCall) {
	if m == nil {
		return
	}
	model := c.Model
	if !m.catalog.Load().models[model] {
		model = Unknown
	}
	m.modelCalls.WithLabelValues(model, string(c.Status)).Inc()
	system, requested := m.genAILabels(model)
	errType := ""
	if c.Err != nil {
		errType = string(provider.ErrorKindOf(c.Err))
	}
	m.genAIDuration.WithLabelValues(genAIChat, system, requested, errType).Observe(c.Duration.Seconds())
	if c.FallbackReason != "" {
		m.modelFallbacks.WithLabelValues(model).Inc()
	}
	if c.Err != nil {
		if kind := provider.ErrorKindOf(c.Err); kind != provider.ErrCanceled {
			m.modelErrors.WithLabelValues(model, string(kind)).Inc()
		}
		return
	}
	m.modelFirstToken.WithLabelValues(model).Observe(c.TimeToFirstToken.Seconds())
	m.modelTokens.WithLabelValues(model, "in").Add(float64(c.TokensIn))
	m.modelTokens.WithLabelValues(model, "out").Add(float64(c.TokensOut))
	m.modelCached.WithLabelValues(model, "read").Add(float64(c.CachedIn))
	m.modelCached.WithLabelValues(model, "write").Add(float64(c.CacheWriteIn))
	m.genAITokens.WithLabelValues(genAIChat, system, requested, "input").Observe(float64(c.TokensIn))
	m.genAITokens.WithLabelValues(genAIChat, system, requested, "output").Observe(float64(c.TokensOut))
	if p, ok := m.catalog.Load().prices[c.Model]; ok {
		m.modelCost.WithLabelValues(model).Add(p.Bill(int64(c.TokensIn), int64(c.CachedIn), int64(c.CacheWriteIn), int64(c.TokensOut)) + p.AudioCost(c.Audio.Milliseconds()) + p.ImageCost(int64(c.Images)))
	}
}

// Recorder returns a tools.Recorder that counts each finished call and passes every record on
// to next.
func (m *Metrics) Recorder(next tools.Recorder) tools.Recorder {
	return toolRecorder{next: next, m: m}
}

type toolRecorder struct {
	next tools.Recorder
	m    *Metrics
}

// Start passes the starting record on.
func (r toolRecorder) Start(ctx context.Context, rec *audit.Record) error {
	return r.next.Start(ctx, rec)
}

// Finish counts the call and passes the finished record on.
func (r toolRecorder) Finish(ctx context.Context, rec *audit.Record) error {
	r.m.ToolCallFinished(rec.ToolName, string(rec.Status), rec.Duration)
	return r.next.Finish(ctx, rec)
}

// mcpCollector reports MCP server health read at scrape time.
type mcpCollector struct {
	desc *prometheus.Desc
	up   func() map[string]bool
}

// Describe implements prometheus.Collector.
func (c mcpCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c mcpCollector) Collect(ch chan<- prometheus.Metric) {
	for name, up := range c.up() {
		v := 0.0
		if up {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, v, name)
	}
}

// queueCollector reports queue depths read at scrape time.
type queueCollector struct {
	desc *prometheus.Desc

	mu     sync.Mutex
	depths map[string]func() int
}

// Describe implements prometheus.Collector.
func (c *queueCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c *queueCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, depth := range c.depths {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(depth()), name)
	}
}

// catalog is what the metrics know of the configured models: their names (others count as
// Unknown), prices, providers and the model ids they ask for.
type catalog struct {
	models    map[string]bool
	prices    map[string]chat.Price
	providers map[string]string
	requested map[string]string
}

func newCatalog(opts Options) *catalog {
	c := &catalog{models: make(map[string]bool, len(opts.Models)), prices: opts.Prices,
		providers: opts.Providers, requested: opts.RequestModels}
	for _, name := range opts.Models {
		c.models[name] = true
	}
	return c
}

// KnowModels replaces what the metrics know of the models by opts' Models, Prices, Providers and
// RequestModels (a reloaded config's); the new models' series exist at zero from now on.
func (m *Metrics) KnowModels(opts Options) {
	if m == nil {
		return
	}
	m.catalog.Store(newCatalog(opts))
	m.zeroModels(opts.Models)
}
