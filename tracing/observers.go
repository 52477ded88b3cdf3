package tracing

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"relaybot/adapters/delivery"
	"relaybot/audit"
	"relaybot/chat"
	"relaybot/pipeline"
	"relaybot/provider"
	"relaybot/tools"
)

// The attribute keys of the GenAI (and MCP) semantic conventions the spans carry, and the
// bot's own under relaybot.*.
const (
	keyOperation     = attribute.Key("gen_ai.operation.name")
	keyProvider      = attribute.Key("gen_ai.provider.name")
	keyAgentName     = attribute.Key("gen_ai.agent.name")
	keyConversation  = attribute.Key("gen_ai.conversation.id")
	keyRequestModel  = attribute.Key("gen_ai.request.model")
	keyResponseModel = attribute.Key("gen_ai.response.model")
	keyInputTokens   = attribute.Key("gen_ai.usage.input_tokens")
	keyOutputTokens  = attribute.Key("gen_ai.usage.output_tokens")
	// The semantic conventions' names of the prompt tokens read from and written to the
	// provider's prompt cache (both part of gen_ai.usage.input_tokens).
	keyCacheReadTokens  = attribute.Key("gen_ai.usage.cache_read.input_tokens")
	keyCacheWriteTokens = attribute.Key("gen_ai.usage.cache_creation.input_tokens")
	keyFinishReasons    = attribute.Key("gen_ai.response.finish_reasons")
	keyInputMessages    = attribute.Key("gen_ai.input.messages")
	keyOutputMsgs       = attribute.Key("gen_ai.output.messages")
	keyToolName         = attribute.Key("gen_ai.tool.name")
	keyToolCallID       = attribute.Key("gen_ai.tool.call.id")
	keyToolType         = attribute.Key("gen_ai.tool.type")
	keyToolArgs         = attribute.Key("gen_ai.tool.call.arguments")
	keyToolResult       = attribute.Key("gen_ai.tool.call.result")
	keyMCPMethod        = attribute.Key("mcp.method.name")
	keyServerAddress    = attribute.Key("server.address")
	keyErrorType        = attribute.Key("error.type")

	keyPlatform      = attribute.Key("relaybot.platform")
	keyChat          = attribute.Key("relaybot.chat.id")
	keyUser          = attribute.Key("relaybot.user.id")
	keyTurn          = attribute.Key("relaybot.turn.id")
	keyTurnStatus    = attribute.Key("relaybot.turn.status")
	keyModelName     = attribute.Key("relaybot.model.name")
	keyCandidate     = attribute.Key("relaybot.model.candidate")
	keyRound         = attribute.Key("relaybot.round")
	keyReason        = attribute.Key("relaybot.fallback.reason")
	keyToolSource    = attribute.Key("relaybot.tool.source")
	keyToolServer    = attribute.Key("relaybot.tool.server")
	keyToolStatus    = attribute.Key("relaybot.tool.status")
	keyDecision      = attribute.Key("relaybot.approval.decision")
	keyApprover      = attribute.Key("relaybot.approval.approver")
	keyMCPServer     = attribute.Key("relaybot.mcp.server")
	keyDeliveryEvent = attribute.Key("relaybot.delivery.event")
	keyFinal         = attribute.Key("relaybot.delivery.final")
	keyRetryAfter    = attribute.Key("relaybot.delivery.retry_after_ms")
)

// turnKey keys a turn's state in its context.
type turnKey struct{}

// turn is what the observers keep of a running turn.
type turn struct {
	span trace.Span // nil when not exported

	mu         sync.Mutex
	deliveries []chat.Delivery
}

func turnOf(ctx context.Context) *turn {
	t, _ := ctx.Value(turnKey{}).(*turn)
	return t
}

// traceID is the id of span's trace when it is sampled; empty otherwise.
func traceID(span trace.Span) string {
	if span == nil {
		return ""
	}
	sc := span.SpanContext()
	if !sc.IsValid() || !sc.IsSampled() {
		return ""
	}
	return sc.TraceID().String()
}

// redact is the audit log's redaction, for texts that go on spans.
func redact(s string) string { return tools.Truncate(tools.RedactJSONText(s), tools.AuditMaxChars) }

// Turns returns a pipeline.Observer that opens each turn's invoke_agent span, keeps its
// deliveries, fills the turn's trace id and deliveries before it is saved, and passes every
// call on to next.
func (t *Tracing) Turns(next pipeline.Observer) pipeline.Observer {
	return turnObserver{t: t, next: next}
}

type turnObserver struct {
	t    *Tracing
	next pipeline.Observer
}

// TurnStarted opens the turn's span and puts the turn in the context.
func (o turnObserver) TurnStarted(ctx context.Context, s pipeline.TurnStart) context.Context {
	tu := &turn{}
	if o.t.on {
		attrs := []attribute.KeyValue{
			keyOperation.String("invoke_agent"), keyAgentName.String(ServiceName),
			keyConversation.String(strconv.FormatInt(s.ConversationID, 10)),
			keyPlatform.String(string(s.Chat.Platform)), keyChat.String(s.Chat.ChatID),
			keyUser.String(s.UserID), keyTurn.Int64(s.TurnID),
		}
		if o.t.capture && s.Text != "" {
			attrs = append(attrs, keyInputMessages.String(messagesJSON("user", redact(s.Text))))
		}
		ctx, tu.span = o.t.tracer.Start(ctx, "invoke_agent "+ServiceName, trace.WithTimestamp(s.Begun),
			trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	}
	ctx = context.WithValue(ctx, turnKey{}, tu)
	if o.next != nil {
		ctx = o.next.TurnStarted(ctx, s)
	}
	return ctx
}

// TurnFinished fills end's trace id and deliveries and ends the turn's span.
func (o turnObserver) TurnFinished(ctx context.Context, end *pipeline.TurnFinish, took time.Duration) {
	if tu := turnOf(ctx); tu != nil {
		tu.mu.Lock()
		end.Deliveries = append(end.Deliveries, tu.deliveries...)
		tu.mu.Unlock()
		if tu.span != nil {
			end.TraceID = traceID(tu.span)
			tu.span.SetAttributes(keyTurnStatus.String(string(end.Status)), keyModelName.String(end.Model),
				keyInputTokens.Int(end.TokensIn), keyOutputTokens.Int(end.TokensOut), keyRound.Int(end.Rounds))
			if o.t.capture {
				if end.Answer != "" {
					tu.span.SetAttributes(keyOutputMsgs.String(messagesJSON("assistant", redact(end.Answer))))
				}
			}
			if end.Status != chat.StatusOK {
				tu.span.SetStatus(codes.Error, redact(end.Error))
				tu.span.SetAttributes(keyErrorType.String(string(end.Status)))
			}
			tu.span.End()
		}
	}
	if o.next != nil {
		o.next.TurnFinished(ctx, end, took)
	}
}

// messagesJSON is one message in the GenAI conventions' JSON form of gen_ai.*.messages.
func messagesJSON(role, text string) string {
	type part struct {
		Type    string `json:"type"`
		Content string `json:"content"`
	}
	type message struct {
		Role  string `json:"role"`
		Parts []part `json:"parts"`
	}
	b, _ := json.Marshal([]message{{Role: role, Parts: []part{{Type: "text", Content: text}}}})
	return string(b)
}

// Models returns an provider.Observer that records a chat span for every model call under the
// turn's span, and passes every call on to next.
func (t *Tracing) Models(next provider.Observer) provider.Observer {
	return modelObserver{t: t, next: next}
}

type modelObserver struct {
	t    *Tracing
	next provider.Observer
}

// ModelCallFinished records the call's span, from its start to its end.
func (o modelObserver) ModelCallFinished(ctx context.Context, c chat.ModelCall) {
	if o.next != nil {
		o.next.ModelCallFinished(ctx, c)
	}
	if !o.t.on {
		return
	}
	m := o.t.models[c.Model]
	system, model := m.Provider, c.RequestModel
	if system == "" {
		system = "openai"
	}
	if model == "" {
		model = m.Model
	}
	attrs := []attribute.KeyValue{
		keyOperation.String("chat"), keyProvider.String(system), keyRequestModel.String(model),
		keyModelName.String(c.Model), keyCandidate.Int(c.Candidate), keyRound.Int(c.Round),
		keyInputTokens.Int(c.TokensIn), keyOutputTokens.Int(c.TokensOut),
	}
	if m.ServerAddress != "" {
		attrs = append(attrs, keyServerAddress.String(m.ServerAddress))
	}
	if c.CachedIn > 0 || c.CacheWriteIn > 0 {
		attrs = append(attrs, keyCacheReadTokens.Int(c.CachedIn), keyCacheWriteTokens.Int(c.CacheWriteIn))
	}
	if c.ResponseModel != "" {
		attrs = append(attrs, keyResponseModel.String(c.ResponseModel))
	}
	if c.FinishReason != "" {
		attrs = append(attrs, keyFinishReasons.StringSlice([]string{c.FinishReason}))
	}
	start := c.StartedAt
	if start.IsZero() {
		start = time.Now().Add(-c.Duration)
	}
	_, span := o.t.tracer.Start(ctx, "chat "+model, trace.WithTimestamp(start),
		trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	if c.FallbackReason != "" {
		span.AddEvent("gen_ai.fallback", trace.WithTimestamp(start), trace.WithAttributes(keyReason.String(redact(c.FallbackReason))))
	}
	if c.TimeToFirstToken > 0 && c.Err == nil {
		span.AddEvent("gen_ai.first_token", trace.WithTimestamp(start.Add(c.TimeToFirstToken)))
	}
	if c.Err != nil {
		span.SetStatus(codes.Error, redact(c.Err.Error()))
		span.SetAttributes(keyErrorType.String(string(provider.ErrorKindOf(c.Err))))
	}
	span.End(trace.WithTimestamp(start.Add(c.Duration)))
}

// Deliveries returns a delivery.Observer that keeps each turn's platform requests for its
// timeline, records a span for each under the turn's span, and passes every event on to next.
func (t *Tracing) Deliveries(next delivery.Observer) delivery.Observer {
	return deliveryObserver{t: t, next: next}
}

type deliveryObserver struct {
	t    *Tracing
	next delivery.Observer
}

// Observe keeps e in its turn and records its span. Typing indicators are left out.
func (o deliveryObserver) Observe(ctx context.Context, e delivery.Event) {
	if o.next != nil {
		o.next.Observe(ctx, e)
	}
	if e.Kind == delivery.EventTyping {
		return
	}
	tu := turnOf(ctx)
	if tu != nil {
		d := chat.Delivery{Kind: e.Kind.String(), At: e.At, TookMS: e.Took.Milliseconds(), WaitMS: e.RetryAfter.Milliseconds(), Final: e.Final}
		tu.mu.Lock()
		if len(tu.deliveries) < chat.MaxDeliveries {
			tu.deliveries = append(tu.deliveries, d)
		} else {
			tu.deliveries[len(tu.deliveries)-1] = d // the latest (the final text) is kept
		}
		tu.mu.Unlock()
	}
	if !o.t.on || tu == nil || tu.span == nil {
		return
	}
	platform := string(e.Chat.Platform)
	attrs := []attribute.KeyValue{keyPlatform.String(platform), keyChat.String(e.Chat.ChatID),
		keyDeliveryEvent.String(e.Kind.String()), keyFinal.Bool(e.Final)}
	start, end, kind := e.At.Add(-e.Took), e.At, trace.SpanKindClient
	if e.Kind == delivery.EventRateLimited {
		start, end, kind = e.At, e.At.Add(e.RetryAfter), trace.SpanKindInternal
		attrs = append(attrs, keyRetryAfter.Int64(e.RetryAfter.Milliseconds()))
	}
	_, span := o.t.tracer.Start(ctx, e.Kind.String()+" "+platform, trace.WithTimestamp(start),
		trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
	if e.Err != nil && (e.Kind == delivery.EventFailed || e.Kind == delivery.EventRetry) {
		span.SetStatus(codes.Error, redact(e.Err.Error()))
	}
	span.End(trace.WithTimestamp(end))
}

// Recorder returns a tools.Recorder that opens an execute_tool span for every call under the
// turn's span, writes its trace id into the audit record before next keeps it, gives the call
// the span's context (tools.CallContexter), and ends the span with the call's outcome.
func (t *Tracing) Recorder(next tools.Recorder) tools.Recorder {
	return toolRecorder{t: t, next: next}
}

type toolRecorder struct {
	t    *Tracing
	next tools.Recorder
}

var _ tools.CallContexter = toolRecorder{}

// Start opens the call's span and passes the record on.
func (r toolRecorder) Start(ctx context.Context, rec *audit.Record) error {
	if r.t.on {
		attrs := []attribute.KeyValue{
			keyOperation.String("execute_tool"), keyToolName.String(rec.ToolName),
			keyToolCallID.String(rec.ToolCallID), keyToolType.String(toolType(rec.Source)),
			keyToolSource.String(string(rec.Source)), keyRound.Int(rec.Round), keyTurn.Int64(rec.TurnID),
		}
		if rec.Server != "" {
			attrs = append(attrs, keyToolServer.String(rec.Server))
		}
		if r.t.capture {
			attrs = append(attrs, keyToolArgs.String(rec.Arguments)) // redacted by tools
		}
		_, span := r.t.tracer.Start(ctx, "execute_tool "+rec.ToolName, trace.WithTimestamp(rec.StartedAt),
			trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
		rec.TraceID = traceID(span)
		r.t.tools.Store(rec, span)
	}
	return r.next.Start(ctx, rec)
}

// CallContext returns ctx with the call's span, so what the tool does is its child.
func (r toolRecorder) CallContext(ctx context.Context, rec *audit.Record) context.Context {
	if span, ok := r.t.tools.Load(rec); ok {
		return trace.ContextWithSpan(ctx, span.(trace.Span))
	}
	if cc, ok := r.next.(tools.CallContexter); ok {
		return cc.CallContext(ctx, rec)
	}
	return ctx
}

// Finish ends the call's span (and records its approval wait) and passes the record on.
func (r toolRecorder) Finish(ctx context.Context, rec *audit.Record) error {
	if v, ok := r.t.tools.LoadAndDelete(rec); ok {
		span := v.(trace.Span)
		span.SetAttributes(keyToolStatus.String(string(rec.Status)))
		if r.t.capture && rec.Result != "" {
			span.SetAttributes(keyToolResult.String(rec.Result)) // redacted by tools
		}
		if rec.Status.Failed() {
			span.SetStatus(codes.Error, rec.Error) // redacted by tools
			span.SetAttributes(keyErrorType.String(string(rec.Status)))
		}
		if rec.ApprovalRequired && !rec.DecidedAt.IsZero() {
			_, wait := r.t.tracer.Start(trace.ContextWithSpan(ctx, span), "await_approval "+rec.ToolName,
				trace.WithTimestamp(rec.StartedAt), trace.WithSpanKind(trace.SpanKindInternal),
				trace.WithAttributes(keyDecision.String(string(rec.Decision)), keyApprover.String(rec.Approver)))
			wait.End(trace.WithTimestamp(rec.DecidedAt))
		}
		finished := rec.FinishedAt
		if finished.IsZero() {
			finished = time.Now()
		}
		span.End(trace.WithTimestamp(finished))
	}
	return r.next.Finish(ctx, rec)
}

// toolType is the gen_ai.tool.type of a tool's source: MCP servers' tools are extensions,
// the others functions of the bot.
func toolType(s audit.Source) string {
	if s == audit.SourceMCP {
		return "extension"
	}
	return "function"
}

// StartCall implements tools/mcp.CallTracer: a tools/call client span under the tool call's,
// whose trace context goes in the request's params._meta so the server's spans join the trace.
func (t *Tracing) StartCall(ctx context.Context, server, tool string) (context.Context, map[string]any, func(error)) {
	if !t.on || !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx, nil, func(error) {}
	}
	ctx, span := t.tracer.Start(ctx, "tools/call "+tool, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(keyMCPMethod.String("tools/call"), keyToolName.String(tool),
			keyOperation.String("execute_tool"), keyMCPServer.String(server)))
	carrier := propagation.MapCarrier{}
	t.prop.Inject(ctx, carrier)
	meta := make(map[string]any, len(carrier))
	for k, v := range carrier {
		meta[k] = v
	}
	return ctx, meta, func(err error) {
		if err != nil {
			span.SetStatus(codes.Error, redact(err.Error()))
			span.SetAttributes(keyErrorType.String("tool_error"))
		}
		span.End()
	}
}
