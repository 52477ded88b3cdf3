package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"relaybot/adapters"
	"relaybot/adapters/delivery"
	"relaybot/adapters/discord"
	"relaybot/adapters/telegram"
	"relaybot/adapters/web"
	"relaybot/admin"
	"relaybot/agent"
	"relaybot/config"
	"relaybot/coord"
	"relaybot/metrics"
	"relaybot/pipeline"
	"relaybot/store"
	"relaybot/tools"
	"relaybot/tools/mcp"
	"relaybot/tools/native"
	"relaybot/tools/plugin"
	_ "relaybot/tools/plugin/auditquery" // registers the audit_query plugin
	"relaybot/tools/skill"
)

// bot is the wired server: the parts to run and what to close after them.
type bot struct {
	log   *slog.Logger
	grace time.Duration
	hurry <-chan os.Signal // a second signal ends the grace period; nil in tests
	// ledger takes each inbound message once for all replicas; nil for a single process.
	ledger adapters.Ledger
	// instances lists the live replicas for the admin API; nil for a single process.
	instances func(ctx context.Context) ([]admin.Instance, error)
	// share divides the platforms' bot-wide budgets among the live replicas.
	share budgetShare
	// signals carry /stop between replicas; nil for a single process.
	signals *coord.Signals
	// lease makes a role one replica holds at a time; nil for a single process.
	lease func(name string) adapters.Lease
	store *store.Store
	pipe  *pipeline.Pipeline

	receivers  []part   // adapters: stop receiving first at shutdown
	background []part   // admin listener, retention, metrics: stop last
	closers    []func() // after the turns are done (web chat)
	cleanup    []func() // at the very end, in reverse order (MCP servers, then the store)
}

// close runs the cleanups in reverse order; the store's Close (first registered) flushes the
// audit queue last.
func (b *bot) close() {
	for i := len(b.cleanup) - 1; i >= 0; i-- {
		b.cleanup[i]()
	}
	b.cleanup = nil
}

// build opens the store and builds every part from cfg. On error the returned bot (if any) holds
// what must be closed.
func build(ctx context.Context, cfg *config.Config, log *slog.Logger) (*bot, error) {
	b := &bot{log: log, grace: shutdownGrace(cfg)}

	// A Telegram offset file belongs to its database: a new database (a fresh start) must not
	// skip updates, or hand over turns, that the file's earlier database knew of.
	offsetFile := ""
	if cfg.Telegram.Enabled {
		offsetFile = cfg.OffsetPath()
		if err := dropStaleOffset(cfg.SQLitePath(), offsetFile, log); err != nil {
			return nil, err
		}
	}

	instance, err := b.claimReplica(cfg)
	if err != nil {
		return b, err
	}
	st, err := store.Open(ctx, store.Options{Driver: cfg.Storage.Driver, DSN: cfg.Storage.DSN, Logger: log, Instance: instance})
	if err != nil {
		return b, err
	}
	b.store = st
	b.cleanup = append(b.cleanup, func() {
		if err := st.Close(); err != nil {
			log.Error("store close", "err", err)
		}
	})
	if err := st.Migrate(ctx); err != nil {
		return b, err
	}
	if err := b.joinReplicas(ctx, st, instance, log); err != nil {
		return b, err
	}
	turns, calls, err := st.Recover(ctx)
	if err != nil {
		return b, err
	}
	storeAttrs := []any{"driver", cfg.Storage.Driver}
	if cfg.Storage.Driver == store.DriverSQLite {
		storeAttrs = append(storeAttrs, "path", cfg.Storage.DSN)
	}
	log.Info("store ready", append(storeAttrs, "recovered_turns", turns, "recovered_tool_calls", calls)...)

	var mgr *tools.Manager // set below; the metrics ask it which tool names are real
	var mcpUp func() map[string]bool
	var pipe *pipeline.Pipeline
	reader := auditReader{st: st}

	// Tools, in dispatch order: native, plugins, MCP, skills.
	var loaders []tools.Loader
	nat, err := native.NewLoader(native.Options{Enabled: cfg.Tools.Native, AllowPrivate: cfg.Tools.FetchAllowPrivate})
	if err != nil {
		return b, fmt.Errorf("tools.native: %w", err)
	}
	loaders = append(loaders, nat)
	if len(cfg.Tools.Plugins) > 0 {
		pl, err := plugin.NewLoader(cfg.Tools.Plugins, plugin.Deps{Logger: log, Audit: reader})
		if err != nil {
			return b, fmt.Errorf("tools.plugins: %w", err)
		}
		loaders = append(loaders, pl)
	}
	var health func() []admin.ServerHealth
	if len(cfg.MCP.Servers) > 0 {
		ml := mcp.NewLoader(mcpServers(cfg.MCP.Servers), log)
		ml.Start(context.WithoutCancel(ctx))
		b.cleanup = append(b.cleanup, ml.Close)
		wait := 5 * time.Second
		for _, s := range cfg.MCP.Servers {
			wait = max(wait, time.Duration(s.ConnectSec)*time.Second+5*time.Second)
		}
		wctx, cancel := context.WithTimeout(ctx, wait)
		if err := ml.WaitStarted(wctx); err != nil {
			log.Warn("MCP servers still connecting; their tools appear when they are up", "err", err)
		}
		cancel()
		for _, h := range ml.Health() {
			attrs := []any{"server", h.Name, "transport", h.Transport, "state", h.State, "tools", h.Tools}
			if h.LastError != "" {
				attrs = append(attrs, "err", h.LastError)
			}
			log.Info("MCP server", attrs...)
		}
		loaders = append(loaders, ml)
		health = func() []admin.ServerHealth { return adminHealth(ml.Health()) }
		mcpUp = func() map[string]bool {
			up := map[string]bool{}
			for _, h := range ml.Health() {
				up[h.Name] = h.State == mcp.StateUp
			}
			return up
		}
	}
	var skillPrompt func() string
	if len(cfg.Tools.SkillDirs) > 0 {
		sk, err := skill.NewLoader(skill.Options{Dirs: cfg.Tools.SkillDirs, Logger: log})
		if err != nil {
			return b, fmt.Errorf("tools.skill_dirs: %w", err)
		}
		loaders = append(loaders, sk)
		skillPrompt = sk.Prompt
	}
	m := metrics.New(metrics.Options{
		KnownTool:   func(name string) bool { return mgr.Has(name) },
		Models:      modelNames(cfg.Models),
		MCPUp:       mcpUp,
		QueueDepths: map[string]func() int{"pipeline": func() int { return pipe.Queued() }},
		Instance:    instance,
	})
	rec := m.Recorder(auditRecorder{st: st})
	mgr, err = tools.NewManager(loaders, rec, tools.ManagerOptions{ResultMaxChars: cfg.Agent.ToolResultMaxChars, Logger: log})
	if err != nil {
		return b, err
	}

	runner, err := agent.NewRunner(agentModels(cfg.Models), agent.Options{
		MaxToolRounds: cfg.Agent.MaxToolRounds,
		FlushChunks:   cfg.Agent.StreamFlushChunks,
		RemoveThink:   cfg.Agent.RemoveThink,
		HTTPClient:    modelHTTPClient(cfg.Chat.MaxTurnsInFlight),
		Logger:        log,
		Observer:      m,
	})
	if err != nil {
		return b, err
	}

	opts := pipelineOptions(cfg)
	opts.SystemPromptExtra = skillPrompt
	opts.Audit = reader
	opts.Recorder = rec
	opts.Logger = log
	opts.Observer = m
	if b.signals != nil {
		opts.Stops = b.signals
	}
	pipe, err = pipeline.New(runner, st, mgr, opts)
	if err != nil {
		return b, err
	}
	b.pipe = pipe
	b.listenStops(pipe)

	if cfg.Telegram.Enabled {
		tg, err := telegram.New(telegram.Options{
			Ledger:        b.ledger,
			PollLease:     b.pollLease(cfg.Telegram.Token),
			Token:         cfg.Telegram.Token,
			APIEndpoint:   cfg.Telegram.APIEndpoint,
			Mode:          cfg.Telegram.Mode,
			WebhookListen: cfg.Telegram.WebhookListen,
			WebhookURL:    cfg.Telegram.WebhookURL,
			WebhookSecret: cfg.Telegram.WebhookSecret,
			AllowedChats:  cfg.Telegram.AllowedChats,
			AllowedUsers:  cfg.Telegram.AllowedUsers,
			AccessUsers:   cfg.Access.UsersOn("telegram"),
			TriggerPrefix: cfg.Chat.TriggerPrefix,
			Stream:        cfg.Telegram.Stream,
			MaxImageBytes: cfg.Chat.MaxImageBytes,
			OffsetFile:    offsetFile,
			Logger:        log,
			Delivery:      delivery.Options{Logger: log, Observer: m},
		})
		if err != nil {
			return b, err
		}
		offsetAttr := offsetFile
		if offsetAttr == "" {
			offsetAttr = "off"
		}
		if cfg.Telegram.Mode == "webhook" {
			log.Info("telegram adapter", "bot", tg.BotUsername(), "mode", "webhook", "listen", cfg.Telegram.WebhookListen, "url", cfg.Telegram.WebhookURL, "offset_file", offsetAttr)
		} else {
			log.Info("telegram adapter", "bot", tg.BotUsername(), "mode", "polling", "api", endpointHost(cfg.Telegram.APIEndpoint), "offset_file", offsetAttr)
		}
		b.share.add(tg.Engine())
		b.receivers = append(b.receivers, part{name: "telegram", run: func(ctx context.Context) error { return tg.Run(ctx, pipe) }})
	}
	if cfg.Discord.Enabled {
		dc, err := discord.New(discord.Options{
			Ledger:           b.ledger,
			Token:            cfg.Discord.Token,
			APIBase:          cfg.Discord.APIBase,
			AllowedGuilds:    cfg.Discord.AllowedGuilds,
			AllowedChannels:  cfg.Discord.AllowedChannels,
			AllowedRoles:     cfg.Discord.AllowedRoles,
			AccessUsers:      cfg.Access.UsersOn("discord"),
			NoDMs:            !cfg.Discord.AllowDMs,
			Prefix:           cfg.Chat.TriggerPrefix,
			RegisterCommands: cfg.Discord.RegisterCommands,
			MaxImageBytes:    cfg.Chat.MaxImageBytes,
			Logger:           log,
			Observer:         m,
		})
		if err != nil {
			return b, err
		}
		log.Info("discord adapter", "api", cfg.Discord.APIBase)
		b.share.add(dc.Engine())
		b.receivers = append(b.receivers, part{name: "discord", run: func(ctx context.Context) error { return dc.Run(ctx, pipe) }})
	}

	if cfg.Admin.Enabled {
		proxies, err := admin.NewProxies(cfg.Admin.TrustedProxies, cfg.Admin.PublicURL)
		if err != nil {
			return b, err
		}
		aopts := admin.Options{
			Listen:    cfg.Admin.Listen,
			Token:     cfg.Admin.Token,
			Store:     st,
			MCPHealth: health,
			Metrics:   m.Handler(),
			Logger:    log,
			Proxies:   proxies,
		}
		if cfg.Admin.WebChat {
			chat, err := web.New(web.Options{
				Handler:       pipe,
				Delivery:      delivery.Options{Logger: log, Observer: m},
				SecureCookies: proxies.Secure,
				Logger:        log,
			})
			if err != nil {
				return b, err
			}
			aopts.WebChat = chat.Handler()
			b.closers = append(b.closers, func() {
				if err := chat.Close(); err != nil {
					log.Error("web chat close", "err", err)
				}
			})
		}
		aopts.Instances = b.instances
		srv, err := admin.New(aopts)
		if err != nil {
			return b, err
		}
		// The admin package logs the address it listens on once listening.
		if cfg.Admin.WebChat {
			log.Info("web chat", "path", "/chat", "on", "the admin listener")
		}
		b.background = append(b.background, part{name: "admin", run: srv.Run})
	}
	if len(b.receivers) == 0 && !(cfg.Admin.Enabled && cfg.Admin.WebChat) {
		return b, errNothingToServe
	}
	if days := cfg.Storage.RetentionDays; days > 0 {
		log.Info("retention sweeper", "days", days, "every", "1h")
		b.background = append(b.background, part{name: "retention", run: func(ctx context.Context) error {
			st.RunRetention(ctx, days)
			return nil
		}})
	}
	return b, nil
}

// dropStaleOffset removes the Telegram offset file when the SQLite database it belongs with
// does not exist yet: a new database starts over, and the file's offset and unfinished updates
// (of an earlier database, perhaps of another Telegram server) would make the bot skip messages
// or answer old ones. With Postgres (dbPath "") the file is kept.
func dropStaleOffset(dbPath, offsetFile string, log *slog.Logger) error {
	if dbPath == "" || offsetFile == "" {
		return nil
	}
	if _, err := os.Stat(dbPath); !errors.Is(err, os.ErrNotExist) {
		return nil
	}
	err := os.Remove(offsetFile)
	switch {
	case err == nil:
		log.Warn("telegram offset file removed: it belonged to an earlier database", "file", offsetFile, "database", dbPath)
	case !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("telegram.offset_file: removing the file of an earlier database: %w", err)
	}
	return nil
}

// modelHTTPClient returns the client of the model calls: the default transport's settings, but
// keeping as many idle connections per model host as turns may run at once, so a busy bot reuses
// its streams' connections instead of dialling (and shaking hands) anew for most calls. Dialling
// and the TLS handshake are bounded; the client has no overall timeout, since a stream may last
// minutes (the runner bounds the wait for each chunk).
func modelHTTPClient(turnsInFlight int) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = (&net.Dialer{Timeout: modelDialTimeout, KeepAlive: 30 * time.Second}).DialContext
	tr.TLSHandshakeTimeout = modelTLSTimeout
	tr.MaxIdleConnsPerHost = max(turnsInFlight, 2)
	tr.MaxIdleConns = max(tr.MaxIdleConns, tr.MaxIdleConnsPerHost)
	return &http.Client{Transport: tr}
}

// Bounds of connecting to a model server.
const (
	modelDialTimeout = 10 * time.Second
	modelTLSTimeout  = 10 * time.Second
)

// pipelineOptions maps the config onto the pipeline's options.
func pipelineOptions(cfg *config.Config) pipeline.Options {
	return pipeline.Options{
		SystemPrompt:       cfg.Agent.SystemPrompt,
		HistoryRounds:      cfg.Agent.HistoryRounds,
		MaxImageBytes:      cfg.Chat.MaxImageBytes, // models without vision are told of images instead
		TrackFunctionCalls: cfg.Output.TrackFunctionCalls,
		ExceptionHandling:  cfg.Output.ExceptionHandling,
		FailureHint:        cfg.Output.FailureHint,
		Scope:              pipeline.Scope(cfg.Chat.Scope),
		Interrupt:          cfg.Chat.Busy == "interrupt",
		QueueSize:          cfg.Chat.QueueSize,
		MaxTurnsInFlight:   cfg.Chat.MaxTurnsInFlight,
		TurnWait:           time.Duration(cfg.Chat.TurnWaitSec) * time.Second,
		RateLimitPerMinute: cfg.Chat.RateLimitPerMin,
		TurnTimeout:        time.Duration(cfg.Chat.TurnTimeoutSec) * time.Second,
		HelpText:           cfg.Chat.HelpText,
		BusyText:           cfg.Chat.BusyText,
		RateLimitedText:    cfg.Chat.RateLimitedText,
		StoppedMarker:      cfg.Chat.InterruptedMarker,
		Access: pipeline.Access{
			AllowUsers: cfg.Access.AllowUsers,
			DenyUsers:  cfg.Access.DenyUsers,
			AllowChats: cfg.Access.AllowChats,
			DenyChats:  cfg.Access.DenyChats,
			Admins:     cfg.Access.Admins,
		},
		ToolAllow:    cfg.Tools.Allow,
		ToolsPerChat: cfg.Tools.PerChat,
	}
}

func agentModels(ms []config.Model) []agent.Model {
	out := make([]agent.Model, len(ms))
	for i, m := range ms {
		out[i] = agent.Model{
			Name:           m.Name,
			BaseURL:        m.BaseURL,
			APIKey:         m.APIKey,
			Model:          m.Model,
			SupportsTools:  m.SupportsTools,
			SupportsVision: m.SupportsVision,
			Timeout:        time.Duration(m.TimeoutSec) * time.Second,
		}
	}
	return out
}

func mcpServers(ss []config.MCPServer) []mcp.ServerConfig {
	out := make([]mcp.ServerConfig, len(ss))
	for i, s := range ss {
		out[i] = mcp.ServerConfig{
			Name:            s.Name,
			Transport:       s.Transport,
			Command:         s.Command,
			Args:            s.Args,
			Env:             s.Env,
			URL:             s.URL,
			Headers:         s.Headers,
			ConnectTimeout:  time.Duration(s.ConnectSec) * time.Second,
			ToolCallTimeout: s.ToolCallTimeout,
		}
	}
	return out
}

func adminHealth(hs []mcp.ServerHealth) []admin.ServerHealth {
	out := make([]admin.ServerHealth, len(hs))
	for i, h := range hs {
		out[i] = admin.ServerHealth{
			Name:      h.Name,
			Transport: h.Transport,
			State:     string(h.State),
			Tools:     h.Tools,
			Error:     h.LastError,
			Since:     h.Since,
		}
	}
	return out
}

// endpointHost returns the scheme and host of a Bot API endpoint format, without the token.
func endpointHost(format string) string {
	u, err := url.Parse(strings.ReplaceAll(format, "%s", "x"))
	if err != nil || u.Host == "" {
		return "(unparsable api_endpoint)"
	}
	return u.Scheme + "://" + u.Host
}

// modelNames lists the configured models' names as the runner reports them.
func modelNames(ms []config.Model) []string {
	names := make([]string, 0, len(ms))
	for _, m := range agentModels(ms) {
		name := m.Name
		if name == "" {
			name = m.Model
		}
		names = append(names, name)
	}
	return names
}
