package main

import (
	"context"
	"net/url"
	"time"

	"relaybot/chat"
	"relaybot/config"
	"relaybot/tools/mcp"
	"relaybot/tracing"
)

// tracingShutdown bounds the export of the spans still queued at shutdown.
const tracingShutdown = 5 * time.Second

// startTracing builds the tracing observer of [otel] (and the OTEL_* environment); it exports
// nothing unless enabled, and keeps each turn's deliveries either way.
func (b *bot) startTracing(ctx context.Context, cfg *config.Config) error {
	models := map[string]tracing.Model{}
	for _, m := range agentModels(cfg.Models) {
		name := m.Name
		if name == "" {
			name = m.Model
		}
		tm := tracing.Model{Model: m.Model}
		if u, err := url.Parse(m.BaseURL); err == nil {
			tm.ServerAddress = u.Hostname()
		}
		models[name] = tm
	}
	tr, err := tracing.New(ctx, tracing.Options{
		Enabled: cfg.OTel.Enabled, Endpoint: cfg.OTel.Endpoint, CaptureContent: cfg.OTel.CaptureContent,
		Models: models, Version: version, Logger: b.log,
	})
	if err != nil {
		return err
	}
	b.tracing = tr
	if tr.Exporting() {
		b.log.Info("otel: exporting traces", "capture_content", cfg.OTel.CaptureContent)
		b.cleanup = append(b.cleanup, func() {
			ctx, cancel := context.WithTimeout(context.Background(), tracingShutdown)
			defer cancel()
			if err := tr.Shutdown(ctx); err != nil {
				b.log.Warn("otel: spans not flushed at shutdown", "err", err)
			}
		})
	}
	return nil
}

// mcpOptions trace the MCP servers' tool calls when traces are exported.
func (b *bot) mcpOptions() []mcp.Option {
	if b.tracing == nil || !b.tracing.Exporting() {
		return nil
	}
	return []mcp.Option{mcp.WithCallTracer(b.tracing)}
}

// platformNames are the enabled platforms, whose metrics series exist from the start.
func platformNames(cfg *config.Config) []string {
	var out []string
	if cfg.Telegram.Enabled {
		out = append(out, string(chat.Telegram))
	}
	if cfg.Discord.Enabled {
		out = append(out, string(chat.Discord))
	}
	if cfg.Admin.Enabled && cfg.Admin.WebChat {
		out = append(out, string(chat.Web))
	}
	return out
}

// requestModels are the model ids of the configured models, by name.
func requestModels(cfg *config.Config) map[string]string {
	out := map[string]string{}
	for _, m := range agentModels(cfg.Models) {
		name := m.Name
		if name == "" {
			name = m.Model
		}
		out[name] = m.Model
	}
	return out
}
