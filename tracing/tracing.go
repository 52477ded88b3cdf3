// Package tracing turns what the bot does into OpenTelemetry traces, and keeps each turn's
// deliveries for its timeline. It is the only package that imports the OpenTelemetry SDK and
// the OTLP exporter.
//
// Like package metrics it is fed through the observers the other packages declare: it wraps a
// pipeline.Observer (one invoke_agent span per turn, parent of everything the turn does), an
// provider.Observer (a chat span per model call), a delivery.Observer (a span per platform
// request and 429 wait) and a tools.Recorder (an execute_tool span per tool call, with its
// approval wait as a child span), and it is the tools/mcp CallTracer (a tools/call client span
// whose W3C trace context goes to the MCP server in params._meta). Names and attributes follow
// the OpenTelemetry GenAI semantic conventions.
//
// Spans leave through the SDK's batch span processor over OTLP/HTTP (protobuf): a turn never
// waits for the collector, and a collector that is down or slow costs a dropped batch and at
// most one log line a minute. Message texts and tool arguments and results go on spans only
// with CaptureContent, and always through the audit log's redaction.
package tracing

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// ServiceName is the service.name of the bot's spans unless OTEL_SERVICE_NAME says otherwise,
// and the gen_ai.agent.name of its turns.
const ServiceName = "relaybot"

// exportErrorEvery is how often, at most, a failing export is logged.
const exportErrorEvery = time.Minute

// Model is what the spans say of a configured model.
type Model struct {
	// Provider is its gen_ai.provider.name ("openai" when empty: every model speaks the OpenAI API).
	Provider string
	// Model is the provider's model id (gen_ai.request.model).
	Model string
	// ServerAddress is the host of its base URL (server.address).
	ServerAddress string
}

// Options configure New.
type Options struct {
	// Enabled exports traces. They are also exported when OTEL_EXPORTER_OTLP_ENDPOINT or
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set, and never when OTEL_SDK_DISABLED is true.
	Enabled bool
	// Endpoint is the collector's OTLP/HTTP base URL ("http://collector:4318"); empty leaves
	// it to the OTEL_* variables (default http://localhost:4318).
	Endpoint string
	// CaptureContent puts message texts and tool arguments and results on the spans.
	CaptureContent bool
	// Models describe the configured models, by name.
	Models map[string]Model
	// Version is the service.version of the spans.
	Version string
	// Logger receives export failures (at most one line a minute); nil means slog.Default().
	Logger *slog.Logger
	// Getenv reads the environment; nil means os.Getenv.
	Getenv func(string) string
}

// Tracing observes turns, model calls, tool calls and deliveries. Without export it still
// keeps each turn's deliveries for the pipeline to save. Every method is safe for concurrent use.
type Tracing struct {
	tp      *sdktrace.TracerProvider // nil when not exporting
	tracer  trace.Tracer
	on      bool
	capture bool
	models  map[string]Model
	prop    propagation.TraceContext
	log     *slog.Logger

	// tools are the execute_tool spans of the calls running now, by audit record.
	tools sync.Map
}

// New returns a Tracing; with export on, it starts the OTLP/HTTP exporter behind a batch span
// processor (no connection is made before the first batch).
func New(ctx context.Context, opts Options) (*Tracing, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Getenv == nil {
		opts.Getenv = os.Getenv
	}
	t := &Tracing{capture: opts.CaptureContent, models: opts.Models, log: opts.Logger}
	if !exporting(opts) {
		return t, nil
	}
	var eo []otlptracehttp.Option
	if opts.Endpoint != "" {
		eo = append(eo, otlptracehttp.WithEndpointURL(strings.TrimRight(opts.Endpoint, "/")+"/v1/traces"))
	}
	exp, err := otlptracehttp.New(ctx, eo...)
	if err != nil {
		return nil, fmt.Errorf("otel: OTLP exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", ServiceName), attribute.String("service.version", opts.Version)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		// A malformed OTEL_RESOURCE_ATTRIBUTES: the rest of the resource is still good.
		opts.Logger.Warn("otel: resource incomplete", "err", err)
	}
	t.tp = sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(&quietExporter{SpanExporter: exp, log: opts.Logger}),
		sdktrace.WithResource(res),
	)
	t.tracer = t.tp.Tracer("relaybot/tracing", trace.WithInstrumentationVersion(opts.Version))
	t.on = true
	return t, nil
}

// exporting reports whether the options and the environment ask for export.
func exporting(opts Options) bool {
	if strings.EqualFold(strings.TrimSpace(opts.Getenv("OTEL_SDK_DISABLED")), "true") {
		return false
	}
	return opts.Enabled || opts.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || opts.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// Exporting reports whether spans are exported.
func (t *Tracing) Exporting() bool { return t.on }

// Shutdown exports the spans still queued, as long as ctx allows, and stops the exporter.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t.tp == nil {
		return nil
	}
	if err := t.tp.Shutdown(ctx); err != nil {
		return fmt.Errorf("otel: shutdown: %w", err)
	}
	return nil
}

// quietExporter keeps export failures out of the SDK's process-wide error handler: it logs
// them on its own logger, at most once per exportErrorEvery with the count since the last
// line, and tells the batch processor every batch went out (a lost batch is not retried
// beyond the exporter's own retries).
type quietExporter struct {
	sdktrace.SpanExporter
	log *slog.Logger

	mu      sync.Mutex
	last    time.Time
	failed  int // batches failed since the last line
	dropped int // spans in them
}

// ExportSpans exports spans; a failure is logged (rate-limited) and not returned.
func (e *quietExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := e.SpanExporter.ExportSpans(ctx, spans)
	if err == nil {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.failed++
	e.dropped += len(spans)
	if now := time.Now(); now.Sub(e.last) >= exportErrorEvery {
		e.log.Warn("otel: spans not exported; the collector is down or slow", "batches", e.failed, "spans", e.dropped, "err", err)
		e.last, e.failed, e.dropped = now, 0, 0
	}
	return nil
}
