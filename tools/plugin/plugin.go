// Package plugin loads tools from Go packages compiled into the bot. A plugin package registers a
// Factory under its name in an init function, the way database/sql drivers register; the binary
// imports the plugins it ships and configuration enables them by name.
package plugin

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	"relaybot/tools"
)

// Tool is one tool a plugin offers.
type Tool struct {
	Spec tools.Spec
	// Run runs the tool; inv.Arguments is a JSON object.
	Run func(ctx context.Context, inv tools.Invocation) (tools.Result, error)
}

// Deps is what the bot hands to plugins when they are enabled.
type Deps struct {
	// Logger is the plugin's logger; nil means slog.Default().
	Logger *slog.Logger
	// Audit reads the tool-call audit log; nil when the bot has none.
	Audit AuditLog
}

// AuditLog is the audit-log query API plugins may use; cmd/bot satisfies it with the store.
type AuditLog interface {
	// Recent returns audit records matching q, newest first (slowest first with q.Slowest).
	Recent(ctx context.Context, q AuditQuery) ([]tools.Record, error)
	// Stats summarises calls per tool since a time, slowest average first.
	Stats(ctx context.Context, since time.Time) ([]AuditStat, error)
}

// AuditQuery filters audit records. Zero fields do not filter.
type AuditQuery struct {
	Tool string
	// Statuses keeps records with any of these statuses.
	Statuses []tools.Status
	Since    time.Time
	// Platform and ChatID keep the records of one chat (Platform empty: that chat id on any
	// platform).
	Platform string
	ChatID   string
	// Limit caps the number of records; 0 means the implementation's default.
	Limit int
	// Slowest orders by duration, longest first, instead of newest first.
	Slowest bool
}

// AuditStat summarises the calls of one tool.
type AuditStat struct {
	Tool        string
	Source      tools.Source
	Calls       int
	Failures    int // status other than ok and running
	AvgDuration time.Duration
	MaxDuration time.Duration
}

// Factory builds a plugin's tools from the bot's dependencies.
type Factory func(deps Deps) ([]Tool, error)

// registry is the one piece of package-level state, as in database/sql: plugins add themselves at
// init and loaders read it.
var registry = struct {
	sync.RWMutex
	m map[string]Factory
}{m: make(map[string]Factory)}

// Register makes a plugin available under name. It panics if name is empty, f is nil or the name
// is taken, since that is a programming error found at start.
func Register(name string, f Factory) {
	registry.Lock()
	defer registry.Unlock()
	if name == "" {
		panic("plugin: Register with an empty name")
	}
	if f == nil {
		panic("plugin: Register of " + name + " with a nil factory")
	}
	if _, dup := registry.m[name]; dup {
		panic("plugin: Register called twice for " + name)
	}
	registry.m[name] = f
}

// Registered returns the names of the registered plugins, sorted.
func Registered() []string {
	registry.RLock()
	defer registry.RUnlock()
	names := make([]string, 0, len(registry.m))
	for n := range registry.m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Loader is the tools.Loader of the enabled plugins.
type Loader struct {
	specs []tools.Spec
	tools map[string]Tool
}

// NewLoader builds the tools of the enabled plugins, in the given order. It fails on an unknown
// plugin name, a failing factory, and a tool name offered twice.
func NewLoader(enabled []string, deps Deps) (*Loader, error) {
	if deps.Logger == nil {
		deps.Logger = slog.Default()
	}
	l := &Loader{tools: make(map[string]Tool)}
	owner := make(map[string]string)
	seen := make(map[string]bool)
	for _, name := range enabled {
		if seen[name] {
			continue
		}
		seen[name] = true
		registry.RLock()
		f, ok := registry.m[name]
		registry.RUnlock()
		if !ok {
			return nil, fmt.Errorf("plugin: unknown plugin %q (registered: %v)", name, Registered())
		}
		ts, err := f(deps)
		if err != nil {
			return nil, fmt.Errorf("plugin %s: %w", name, err)
		}
		for _, t := range ts {
			if t.Spec.Name == "" || t.Run == nil {
				return nil, fmt.Errorf("plugin %s: a tool needs a name and a Run function", name)
			}
			if prev, dup := owner[t.Spec.Name]; dup {
				return nil, fmt.Errorf("plugin %s: tool %s is already offered by plugin %s", name, t.Spec.Name, prev)
			}
			owner[t.Spec.Name] = name
			l.tools[t.Spec.Name] = t
			l.specs = append(l.specs, t.Spec)
		}
	}
	return l, nil
}

// Source reports tools.SourcePlugin.
func (l *Loader) Source() tools.Source { return tools.SourcePlugin }

// Tools lists the tools of the enabled plugins.
func (l *Loader) Tools(ctx context.Context) []tools.Spec { return slices.Clone(l.specs) }

// Call runs a plugin tool.
func (l *Loader) Call(ctx context.Context, inv tools.Invocation) (tools.Result, error) {
	t, ok := l.tools[inv.Name]
	if !ok {
		return tools.Result{}, fmt.Errorf("plugin: %s: %w", inv.Name, tools.ErrNotFound)
	}
	return t.Run(ctx, inv)
}
