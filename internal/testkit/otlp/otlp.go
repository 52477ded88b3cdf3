// Package otlp runs an OpenTelemetry collector's OTLP/HTTP trace receiver on loopback for tests:
// it takes POST /v1/traces with a protobuf ExportTraceServiceRequest (the only encoding the
// bot's exporter sends; JSON and other content types are refused with 415, as a collector
// configured for protobuf does), decodes it with go.opentelemetry.io/proto/otlp and keeps the
// spans. It can be made slow (every export waits until released) to show that a collector
// in trouble does not hold up the bot. Export sends spans the same way, for a fake MCP server's
// own spans.
package otlp

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	collector "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	common "go.opentelemetry.io/proto/otlp/common/v1"
	resource "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Span is one received span, flattened for asserts: ids in lower-case hex (ParentID empty for a
// root), attribute values as Go values (string, int64, float64, bool, []any).
type Span struct {
	Service       string
	TraceID       string
	SpanID        string
	ParentID      string
	Name          string
	Kind          tracepb.Span_SpanKind
	Start         time.Time
	End           time.Time
	Attrs         map[string]any
	Events        []string
	Error         bool // status code ERROR
	StatusMessage string
}

// Receiver is a loopback OTLP/HTTP trace receiver.
type Receiver struct {
	// URL is the receiver's base URL (the exporter's endpoint); spans go to URL + "/v1/traces".
	URL string

	srv *httptest.Server

	mu        sync.Mutex
	spans     []Span
	exports   int
	forgotten int
	discard   bool          // keep counts only
	hold      chan struct{} // non-nil: exports wait until it is closed
}

// Start runs a receiver until the test ends.
func Start(t testing.TB) *Receiver {
	t.Helper()
	r := New()
	t.Cleanup(r.Close)
	return r
}

// New runs a receiver until Close (for benchmarks and tools outside a test).
func New() *Receiver {
	r := &Receiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	r.URL = r.srv.URL
	return r
}

// CountOnly makes the receiver keep only the number of spans (a long run's memory).
func (r *Receiver) CountOnly() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.discard = true
}

// Count is how many spans arrived so far.
func (r *Receiver) Count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.spans) + r.forgotten
}

// Slow makes every export wait until Release (or the exporter gives up).
func (r *Receiver) Slow() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.hold == nil {
		r.hold = make(chan struct{})
	}
}

// Release lets held and later exports through.
func (r *Receiver) Release() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.hold != nil {
		close(r.hold)
		r.hold = nil
	}
}

// Spans returns the spans received so far, in order of arrival.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Exports counts the export requests that arrived (held ones included).
func (r *Receiver) Exports() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.exports
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	if req.URL.Path != "/v1/traces" {
		http.NotFound(w, req)
		return
	}
	if req.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if ct := req.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		http.Error(w, "unsupported content type "+ct, http.StatusUnsupportedMediaType)
		return
	}
	r.mu.Lock()
	r.exports++
	hold := r.hold
	r.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-req.Context().Done():
			return
		}
	}
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		gz, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		defer gz.Close()
		body = gz
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var msg collector.ExportTraceServiceRequest
	if err := proto.Unmarshal(raw, &msg); err != nil {
		http.Error(w, "not an ExportTraceServiceRequest: "+err.Error(), http.StatusBadRequest)
		return
	}
	got := flatten(&msg)
	r.mu.Lock()
	if r.discard {
		r.forgotten += len(got)
	} else {
		r.spans = append(r.spans, got...)
	}
	r.mu.Unlock()
	out, _ := proto.Marshal(&collector.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func flatten(msg *collector.ExportTraceServiceRequest) []Span {
	var out []Span
	for _, rs := range msg.GetResourceSpans() {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				sp := Span{Service: service, TraceID: hex.EncodeToString(s.GetTraceId()), SpanID: hex.EncodeToString(s.GetSpanId()),
					Name: s.GetName(), Kind: s.GetKind(), Attrs: map[string]any{},
					Start: time.Unix(0, int64(s.GetStartTimeUnixNano())), End: time.Unix(0, int64(s.GetEndTimeUnixNano())),
					Error: s.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR, StatusMessage: s.GetStatus().GetMessage()}
				if len(s.GetParentSpanId()) > 0 {
					sp.ParentID = hex.EncodeToString(s.GetParentSpanId())
				}
				for _, kv := range s.GetAttributes() {
					sp.Attrs[kv.GetKey()] = value(kv.GetValue())
				}
				for _, e := range s.GetEvents() {
					sp.Events = append(sp.Events, e.GetName())
				}
				out = append(out, sp)
			}
		}
	}
	return out
}

func value(v *common.AnyValue) any {
	switch x := v.GetValue().(type) {
	case *common.AnyValue_StringValue:
		return x.StringValue
	case *common.AnyValue_IntValue:
		return x.IntValue
	case *common.AnyValue_DoubleValue:
		return x.DoubleValue
	case *common.AnyValue_BoolValue:
		return x.BoolValue
	case *common.AnyValue_ArrayValue:
		var out []any
		for _, e := range x.ArrayValue.GetValues() {
			out = append(out, value(e))
		}
		return out
	}
	return nil
}

// ServerSpan is a span a fake server records of a request it served.
type ServerSpan struct {
	Service, Name     string
	TraceID, ParentID string // hex, from the request's traceparent
	Start, End        time.Time
	Attrs             map[string]string
}

// Export sends one server span to an OTLP/HTTP receiver at endpoint (its base URL), as a
// server's own SDK would.
func Export(ctx context.Context, endpoint string, s ServerSpan) error {
	tid, err := hex.DecodeString(s.TraceID)
	if err != nil || len(tid) != 16 {
		return fmt.Errorf("otlp: bad trace id %q", s.TraceID)
	}
	pid, err := hex.DecodeString(s.ParentID)
	if err != nil || len(pid) != 8 {
		return fmt.Errorf("otlp: bad parent span id %q", s.ParentID)
	}
	sid := make([]byte, 8)
	if _, err := rand.Read(sid); err != nil {
		return err
	}
	span := &tracepb.Span{TraceId: tid, SpanId: sid, ParentSpanId: pid, Name: s.Name,
		Kind:              tracepb.Span_SPAN_KIND_SERVER,
		StartTimeUnixNano: uint64(s.Start.UnixNano()), EndTimeUnixNano: uint64(s.End.UnixNano())}
	for k, v := range s.Attrs {
		span.Attributes = append(span.Attributes, &common.KeyValue{Key: k, Value: &common.AnyValue{Value: &common.AnyValue_StringValue{StringValue: v}}})
	}
	msg := &collector.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
		Resource: &resource.Resource{Attributes: []*common.KeyValue{{Key: "service.name",
			Value: &common.AnyValue{Value: &common.AnyValue_StringValue{StringValue: s.Service}}}}},
		ScopeSpans: []*tracepb.ScopeSpans{{Spans: []*tracepb.Span{span}}},
	}}}
	body, err := proto.Marshal(msg)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint+"/v1/traces", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("otlp: export: %s", resp.Status)
	}
	return nil
}

// Close stops the receiver: exports from then on fail to connect, as to a collector that is down.
func (r *Receiver) Close() {
	r.Release()
	r.srv.Close()
}
