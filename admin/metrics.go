package admin

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DurationBuckets are the upper bounds, in seconds, of the duration histograms.
var durationBuckets = []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// Metrics counts what the bot does and renders it in the Prometheus text exposition format.
// Other packages call its methods through small interfaces of their own; every method is safe
// for concurrent use, and a nil *Metrics ignores every call.
type Metrics struct {
	mu       sync.Mutex
	families map[string]*family
	// mcpUp reports MCP server health at scrape time, when set.
	mcpUp func() []ServerHealth
}

type metricKind int

const (
	counterKind metricKind = iota
	gaugeKind
	histogramKind
)

type family struct {
	name   string
	help   string
	kind   metricKind
	labels []string
	series map[string]*series // keyed by the joined label values
}

type series struct {
	values []string
	value  float64  // counters and gauges
	counts []uint64 // histogram buckets (non-cumulative), len(durationBuckets)+1
	sum    float64  // histogram sum
	total  uint64   // histogram count
}

// NewMetrics returns an empty registry with every family of the bot declared, so a scrape shows
// their HELP and TYPE even before the first event.
func NewMetrics() *Metrics {
	m := &Metrics{families: map[string]*family{}}
	m.declare("relaybot_turns_total", "Turns finished, by outcome (ok, error, cancelled, ...).", counterKind, "outcome")
	m.declare("relaybot_turn_duration_seconds", "Time from a user's message to the final reply, by outcome.", histogramKind, "outcome")
	m.declare("relaybot_tool_calls_total", "Tool calls finished, by tool and audit status.", counterKind, "tool", "status")
	m.declare("relaybot_tool_call_duration_seconds", "Duration of tool calls, by tool.", histogramKind, "tool")
	m.declare("relaybot_message_sends_total", "Messages the bot sent, by platform.", counterKind, "platform")
	m.declare("relaybot_message_edits_total", "Message edits the bot made, by platform.", counterKind, "platform")
	m.declare("relaybot_rate_limited_total", "HTTP 429 (rate limited) answers received from a platform.", counterKind, "platform")
	m.declare("relaybot_delivery_events_total", "Outcomes of platform requests of the delivery engine (send, edit, not_modified, rate_limited, retry, fallback, failed, ...).", counterKind, "platform", "event")
	m.declare("relaybot_queue_depth", "Items waiting in a queue (per-conversation turns, pending edits, ...).", gaugeKind, "queue")
	m.declare("relaybot_mcp_server_up", "1 when an MCP server is connected and answering, 0 otherwise.", gaugeKind, "server")
	return m
}

func (m *Metrics) declare(name, help string, kind metricKind, labels ...string) {
	m.families[name] = &family{name: name, help: help, kind: kind, labels: labels, series: map[string]*series{}}
}

// get returns the series of family name with the label values, creating it. m.mu must be held.
func (m *Metrics) get(name string, values ...string) *series {
	f := m.families[name]
	key := strings.Join(values, "\xff")
	s, ok := f.series[key]
	if !ok {
		s = &series{values: values}
		if f.kind == histogramKind {
			s.counts = make([]uint64, len(durationBuckets)+1)
		}
		f.series[key] = s
	}
	return s
}

func (m *Metrics) add(name string, delta float64, values ...string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.get(name, values...).value += delta
	m.mu.Unlock()
}

func (m *Metrics) set(name string, v float64, values ...string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.get(name, values...).value = v
	m.mu.Unlock()
}

func (m *Metrics) observe(name string, d time.Duration, values ...string) {
	if m == nil {
		return
	}
	secs := d.Seconds()
	i, _ := slices.BinarySearch(durationBuckets, secs)
	m.mu.Lock()
	s := m.get(name, values...)
	s.counts[i]++
	s.sum += secs
	s.total++
	m.mu.Unlock()
}

// TurnFinished counts a finished turn with its outcome ("ok", "error", "cancelled", ...) and
// how long it took.
func (m *Metrics) TurnFinished(outcome string, d time.Duration) {
	m.add("relaybot_turns_total", 1, outcome)
	m.observe("relaybot_turn_duration_seconds", d, outcome)
}

// ToolCallFinished counts a finished tool call with its audit status and duration.
func (m *Metrics) ToolCallFinished(tool, status string, d time.Duration) {
	m.add("relaybot_tool_calls_total", 1, tool, status)
	m.observe("relaybot_tool_call_duration_seconds", d, tool)
}

// MessageSent counts a message the bot posted on platform.
func (m *Metrics) MessageSent(platform string) { m.add("relaybot_message_sends_total", 1, platform) }

// MessageEdited counts an edit of a bot message on platform.
func (m *Metrics) MessageEdited(platform string) { m.add("relaybot_message_edits_total", 1, platform) }

// RateLimited counts a 429 answer received from platform.
func (m *Metrics) RateLimited(platform string) { m.add("relaybot_rate_limited_total", 1, platform) }

// DeliveryEvent counts one outcome of a platform request of the delivery engine, by its name
// ("send", "edit", "files", "not_modified", "rate_limited", "retry", "fallback", "failed",
// "typing"); sends, edits and 429s also feed their own counters. cmd/bot calls it from a
// delivery.Observer: m.DeliveryEvent(string(e.Chat.Platform), e.Kind.String()).
func (m *Metrics) DeliveryEvent(platform, event string) {
	m.add("relaybot_delivery_events_total", 1, platform, event)
	switch event {
	case "send", "files":
		m.MessageSent(platform)
	case "edit":
		m.MessageEdited(platform)
	case "rate_limited":
		m.RateLimited(platform)
	}
}

// SetQueueDepth records how many items wait in the named queue now.
func (m *Metrics) SetQueueDepth(queue string, n int) {
	m.set("relaybot_queue_depth", float64(n), queue)
}

// SetMCPServerUp records whether an MCP server is up. Servers reported by the health function
// given to the admin server are refreshed at every scrape and override this.
func (m *Metrics) SetMCPServerUp(server string, up bool) {
	v := 0.0
	if up {
		v = 1
	}
	m.set("relaybot_mcp_server_up", v, server)
}

// refreshMCP copies the current MCP health into the gauge.
func (m *Metrics) refreshMCP() {
	m.mu.Lock()
	health := m.mcpUp
	m.mu.Unlock()
	if health == nil {
		return
	}
	for _, h := range health() {
		m.SetMCPServerUp(h.Name, h.Up())
	}
}

// WriteTo writes every metric in the Prometheus text exposition format (version 0.0.4): the Go
// runtime's goroutine and memory gauges read at this moment, then the bot's families and series
// in a stable order.
func (m *Metrics) WriteTo(w io.Writer) (int64, error) {
	if m == nil {
		return 0, nil
	}
	m.refreshMCP()
	cw := &countingWriter{w: bufio.NewWriter(w)}
	writeRuntime(cw)
	m.mu.Lock()
	names := make([]string, 0, len(m.families))
	for name := range m.families {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		m.families[name].write(cw)
	}
	m.mu.Unlock()
	if cw.err == nil {
		cw.err = cw.w.Flush()
	}
	return cw.n, cw.err
}

func (f *family) write(w *countingWriter) {
	kind := [...]string{counterKind: "counter", gaugeKind: "gauge", histogramKind: "histogram"}[f.kind]
	fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", f.name, f.help, f.name, kind)
	keys := make([]string, 0, len(f.series))
	for k := range f.series {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		s := f.series[k]
		labels := labelPairs(f.labels, s.values)
		if f.kind != histogramKind {
			fmt.Fprintf(w, "%s%s %s\n", f.name, braces(labels), formatFloat(s.value))
			continue
		}
		var cum uint64
		for i, upper := range durationBuckets {
			cum += s.counts[i]
			le := append(slices.Clone(labels), `le="`+formatFloat(upper)+`"`)
			fmt.Fprintf(w, "%s_bucket%s %d\n", f.name, braces(le), cum)
		}
		le := append(slices.Clone(labels), `le="+Inf"`)
		fmt.Fprintf(w, "%s_bucket%s %d\n", f.name, braces(le), s.total)
		fmt.Fprintf(w, "%s_sum%s %s\n", f.name, braces(labels), formatFloat(s.sum))
		fmt.Fprintf(w, "%s_count%s %d\n", f.name, braces(labels), s.total)
	}
}

func labelPairs(names, values []string) []string {
	pairs := make([]string, len(names))
	for i, n := range names {
		pairs[i] = n + `="` + escapeLabel(values[i]) + `"`
	}
	return pairs
}

func braces(pairs []string) string {
	if len(pairs) == 0 {
		return ""
	}
	return "{" + strings.Join(pairs, ",") + "}"
}

var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

func escapeLabel(v string) string { return labelEscaper.Replace(v) }

func formatFloat(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

type countingWriter struct {
	w   *bufio.Writer
	n   int64
	err error
}

func (c *countingWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.err = err
	return n, err
}

// ServeHTTP serves the metrics in the Prometheus text format.
func (m *Metrics) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	_, _ = m.WriteTo(w) // a failed write means the scraper went away; nothing to tell it
}
