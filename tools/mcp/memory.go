package mcp

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"relaybot/tools"
)

// ToolMemory keeps each server's tool names as it last listed them (the server's own names,
// before tool_prefix), across restarts and replicas (the store), so that before a server is
// connected again (before its first login here, or while it is down) a call to one of its tools
// is told why the tool is unavailable instead of "not found". Its errors are logged, never
// fatal.
type ToolMemory interface {
	RememberedTools(ctx context.Context, server string) ([]string, error)
	RememberTools(ctx context.Context, server string, names []string) error
}

// WithToolMemory remembers every server's tool names in m and reads them back at the start.
func WithToolMemory(m ToolMemory) Option {
	return func(o *options) { o.memory = m }
}

// memoryTimeout bounds one read or write of the tool memory.
const memoryTimeout = 5 * time.Second

// recall reads the server's remembered tool names, before its first connection attempt.
func (s *serverConn) recall(ctx context.Context) {
	if s.opts.memory == nil {
		return
	}
	mctx, cancel := context.WithTimeout(ctx, memoryTimeout)
	defer cancel()
	names, err := s.opts.memory.RememberedTools(mctx, s.cfg.Name)
	if err != nil {
		s.logger.Warn("MCP server's remembered tool names not read", "err", err)
		return
	}
	p := s.cfg.prefix()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.remembered = make(map[string]bool, len(names))
	for _, n := range names {
		s.remembered[p+n] = true
	}
}

// remember keeps specs' names (the server's own) in the tool memory, when they changed since
// they were last remembered here.
func (s *serverConn) remember(ctx context.Context, specs []tools.Spec) {
	if s.opts.memory == nil {
		return
	}
	names := make([]string, 0, len(specs))
	for _, sp := range specs {
		names = append(names, serverToolName(sp))
	}
	slices.Sort(names)
	s.mu.Lock()
	same := slices.Equal(names, s.rememberedNow)
	s.mu.Unlock()
	if same {
		return
	}
	mctx, cancel := context.WithTimeout(ctx, memoryTimeout)
	defer cancel()
	if err := s.opts.memory.RememberTools(mctx, s.cfg.Name, names); err != nil {
		s.logger.Warn("MCP server's tool names not remembered", "err", err)
		return
	}
	s.mu.Lock()
	s.rememberedNow = names
	s.mu.Unlock()
}

// serverToolName is the server's own name of a tool spec.
func serverToolName(sp tools.Spec) string {
	if sp.ServerTool != "" {
		return sp.ServerTool
	}
	return sp.Name
}

// unknownTools reports, for a server that is not up and whose tools are not known (never
// listed here, none remembered, no tool_prefix), why it is unavailable, in a few words; ok is
// false for any other server.
func (s *serverConn) unknownTools() (why string, ok bool) {
	if s.invalid != nil {
		return "", false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == tools.ServerUp || s.names != nil || len(s.remembered) > 0 || s.cfg.prefix() != "" {
		return "", false
	}
	switch {
	case s.needsLogin:
		return "needs an admin to log in", true
	case s.state == tools.ServerDown:
		return "down", true
	default:
		return "not connected yet", true
	}
}

// UnknownServers names the servers that are unavailable and whose tools the bot does not know
// (tools.UnknownToolTeller), each with why ("kit (needs an admin to log in)"): a tool name no
// loader knows may be one of theirs.
func (l *Loader) UnknownServers() []string {
	var out []string
	for _, s := range l.servers {
		if why, ok := s.unknownTools(); ok {
			out = append(out, fmt.Sprintf("%s (%s)", s.cfg.Name, why))
		}
	}
	return out
}

// knownWhileDown reports whether name is one of the server's tools while the server has not
// listed them since the start: one remembered from an earlier listing, or one with its
// tool_prefix. Called with s.mu held.
func (s *serverConn) knownWhileDownLocked(name string) bool {
	if s.names != nil {
		return false
	}
	if s.remembered[name] {
		return true
	}
	p := s.cfg.prefix()
	return p != "" && strings.HasPrefix(name, p)
}
