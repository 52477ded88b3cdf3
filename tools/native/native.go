// Package native holds the tools built into the bot: current_time, fetch_url, web_search and
// generate_image (offered only when configured), and the scheduled tasks' schedule_task,
// list_tasks and cancel_task (answered by Options.Tasks).
package native

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"time"
	_ "time/tzdata" // current_time works on hosts without a zoneinfo database

	"relaybot/audit"
	"relaybot/tools"
)

// Tool names.
const (
	CurrentTime  = "current_time"
	FetchURL     = "fetch_url"
	ScheduleTask = "schedule_task"
	ListTasks    = "list_tasks"
	CancelTask   = "cancel_task"
	// WebSearch and GenerateImage are offered only when Options configures them.
	WebSearch     = "web_search"
	GenerateImage = "generate_image"
)

// Defaults of Options.
const (
	DefaultMaxBytes = 1 << 20
	DefaultTimeout  = 15 * time.Second
	DefaultAgent    = "relaybot-fetch/1"
)

// Names lists the native tools.
func Names() []string {
	return []string{CurrentTime, FetchURL, WebSearch, GenerateImage, ScheduleTask, ListTasks, CancelTask}
}

// Options configures the native tools.
type Options struct {
	// Enabled names the tools to offer; empty offers all.
	Enabled []string
	// AllowPrivate lets fetch_url connect to loopback, private, link-local and other
	// non-public addresses.
	AllowPrivate bool
	// Permit, when set, is asked about each address the non-public rule refuses, at dial time;
	// returning true lets that connection through. Tests use it to reach their own loopback server
	// and nothing else.
	Permit func(addr netip.AddrPort) bool
	// MaxBytes caps the body fetch_url reads; 0 means DefaultMaxBytes.
	MaxBytes int64
	// Timeout caps one fetch_url call, redirects and body included; 0 means DefaultTimeout.
	Timeout time.Duration
	// UserAgent is sent by fetch_url; empty means DefaultAgent.
	UserAgent string
	// Now is the clock of current_time; nil means time.Now.
	Now func() time.Time
	// Tasks answers schedule_task, list_tasks and cancel_task (package tasks); nil leaves them
	// out.
	Tasks Tasks
	// Search configures web_search; a zero Provider leaves it out.
	Search SearchOptions
	// Images configures generate_image; an empty BaseURL leaves it out.
	Images ImageOptions
}

// Tasks is what the scheduled-task tools ask of the scheduler. The caller is the turn's: its
// chat (thread or topic), user and rights. An error is a refusal the model reads ("err: ...").
type Tasks interface {
	ScheduleTask(ctx context.Context, turn tools.TurnInfo, args json.RawMessage) (string, error)
	ListTasks(ctx context.Context, turn tools.TurnInfo) (string, error)
	CancelTask(ctx context.Context, turn tools.TurnInfo, id int64) (string, error)
}

// Loader is the tools.Loader of the native tools.
type Loader struct {
	opts    Options
	enabled map[string]bool
	specs   []tools.Spec
	client  *http.Client
	search  *searcher
	images  *imager
}

// NewLoader returns the native tools; it fails on an unknown name in opts.Enabled.
func NewLoader(opts Options) (*Loader, error) {
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultMaxBytes
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.UserAgent == "" {
		opts.UserAgent = DefaultAgent
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	l := &Loader{opts: opts, enabled: make(map[string]bool)}
	for _, n := range opts.Enabled {
		if !slices.Contains(Names(), n) {
			return nil, fmt.Errorf("native: unknown tool %q (native tools: %v)", n, Names())
		}
		l.enabled[n] = true
	}
	if len(opts.Enabled) == 0 {
		for _, n := range Names() {
			l.enabled[n] = true
		}
	}
	if opts.Search.Provider != "" && !slices.Contains(SearchProviders(), opts.Search.Provider) {
		return nil, fmt.Errorf("native: unknown web search provider %q (providers: %v)", opts.Search.Provider, SearchProviders())
	}
	for _, s := range []tools.Spec{currentTimeSpec, fetchURLSpec, webSearchSpec, generateImageSpec, scheduleTaskSpec, listTasksSpec, cancelTaskSpec} {
		if opts.Tasks == nil && isTaskTool(s.Name) || s.Name == WebSearch && opts.Search.Provider == "" ||
			s.Name == GenerateImage && opts.Images.BaseURL == "" {
			l.enabled[s.Name] = false
		}
		if l.enabled[s.Name] {
			l.specs = append(l.specs, s)
		}
	}
	l.client = newClient(opts)
	if l.enabled[WebSearch] {
		l.search = newSearcher(opts.Search, opts.Now)
	}
	if l.enabled[GenerateImage] {
		l.images = newImager(opts.Images, l.client, opts.Now)
	}
	return l, nil
}

// Source reports audit.SourceNative.
func (l *Loader) Source() audit.Source { return audit.SourceNative }

// Tools lists the enabled native tools.
func (l *Loader) Tools(ctx context.Context) []tools.Spec { return slices.Clone(l.specs) }

// Call runs a native tool.
func (l *Loader) Call(ctx context.Context, inv tools.Invocation) (tools.Result, error) {
	if !l.enabled[inv.Name] {
		return tools.Result{}, fmt.Errorf("native: %s: %w", inv.Name, tools.ErrNotFound)
	}
	switch inv.Name {
	case CurrentTime:
		return l.currentTime(inv.Arguments)
	case ScheduleTask, ListTasks, CancelTask:
		return l.task(ctx, inv)
	case WebSearch:
		return l.webSearch(ctx, inv.Arguments, inv.Running)
	case GenerateImage:
		return l.generateImage(ctx, inv)
	default:
		return l.fetchURL(ctx, inv.Arguments, inv.Running)
	}
}

var currentTimeSpec = tools.Spec{
	Name:        CurrentTime,
	Description: "Current date and time in a time zone.",
	Parameters: json.RawMessage(`{"type":"object","properties":{"timezone":{"type":"string",` +
		`"description":"IANA time zone such as Europe/Berlin or America/New_York; default UTC."}},"additionalProperties":false}`),
	ReadOnly: true,
}

func (l *Loader) currentTime(raw json.RawMessage) (tools.Result, error) {
	var a struct {
		Timezone string `json:"timezone"`
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		return tools.Result{}, fmt.Errorf("current_time: bad arguments: %w", err)
	}
	if a.Timezone == "" {
		a.Timezone = "UTC"
	}
	loc, err := time.LoadLocation(a.Timezone)
	if err != nil || a.Timezone == "Local" {
		return tools.Result{}, fmt.Errorf("current_time: unknown time zone %q; use an IANA name such as Europe/Berlin", a.Timezone)
	}
	now := l.opts.Now().In(loc)
	out, err := json.Marshal(map[string]any{
		"time":       now.Format(time.RFC3339),
		"timezone":   a.Timezone,
		"utc_offset": now.Format("-07:00"),
		"weekday":    now.Weekday().String(),
		"unix":       now.Unix(),
	})
	if err != nil {
		return tools.Result{}, fmt.Errorf("current_time: %w", err)
	}
	return tools.Result{Text: string(out)}, nil
}
