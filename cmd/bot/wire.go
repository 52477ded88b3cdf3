package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"relaybot/adapters"
	"relaybot/adapters/delivery"
	"relaybot/adapters/discord"
	"relaybot/adapters/telegram"
	"relaybot/adapters/web"
	"relaybot/admin"
	"relaybot/agent"
	"relaybot/audit"
	"relaybot/chat"
	"relaybot/config"
	"relaybot/coord"
	"relaybot/internal/lifecycle"
	"relaybot/metrics"
	"relaybot/pipeline"
	"relaybot/pipeline/access"
	"relaybot/pipeline/history"
	"relaybot/pipeline/quota"
	"relaybot/provider"
	"relaybot/speech"
	"relaybot/store"
	"relaybot/tasks"
	"relaybot/tools"
	"relaybot/tools/mcp"
	"relaybot/tools/mcp/oauth"
	"relaybot/tools/native"
	"relaybot/tools/plugin"
	_ "relaybot/tools/plugin/auditquery" // registers the audit_query plugin
	"relaybot/tools/skill"
	"relaybot/tracing"
)

// bot is the wired server: the parts to run and what to close after them.
type bot struct {
	log   *slog.Logger
	grace time.Duration
	hurry <-chan os.Signal // a second signal ends the grace period; nil in tests
	// replica is this process's place among the replicas on PostgreSQL; nil alone on SQLite,
	// where every role it plays is the consumer's zero value.
	replica *coord.Replica
	// instance is this replica's id (host and pid, and a random part).
	instance string
	store    *store.Database
	pipe     *pipeline.Pipeline
	// oauth runs the logins of the MCP servers with auth = "oauth"; nil when none has it.
	oauth *oauth.Manager
	// tracing observes turns, model and tool calls and deliveries (traces, turn timelines).
	tracing *tracing.Tracing
	// tasks are the reminders and scheduled tasks; nil when [tasks] is off.
	tasks *tasks.Service
	// live is what a reload rebuilds the turns' parts from, and the config they run with
	// (wire_reload.go).
	live liveParts

	connectors []connector      // the enabled platforms: stop receiving first at shutdown
	background []lifecycle.Part // admin listener, retention: stop last
	cleanup    []func()         // at the very end, in reverse order (MCP servers, then the store)
}

// connector is a chat platform as serve runs it: every adapter (Telegram, Discord, the web
// chat) implements it. Each takes its delivery engine's options, the metrics observer among
// them, as Options.Delivery.
type connector interface {
	// Name is the platform's name in logs.
	Name() string
	// Limits are the length and pacing rules the platform's replies are delivered by.
	Limits() adapters.Limits
	// Run hands every message to h, each on its own goroutine, until ctx ends; it returns once
	// the handlers it started have returned and its deliveries are flushed.
	Run(ctx context.Context, h adapters.Handler) error
}

// close runs the cleanups in reverse order; the store's Close (first registered) flushes the
// audit queue last.
func (b *bot) close() {
	for i := len(b.cleanup) - 1; i >= 0; i-- {
		b.cleanup[i]()
	}
	b.cleanup = nil
}

// toolsWait bounds how long shutdown waits for the tool calls of cancelled turns to end and
// finish their audit rows.
const toolsWait = 10 * time.Second

// waitToolCalls waits, at most toolsWait, for the tool calls still ending after the turns were
// cancelled: a cancelled turn stops waiting for its call at once, and the call finishes its
// audit row on its own goroutine.
func (b *bot) waitToolCalls() {
	ctx, cancel := context.WithTimeout(context.Background(), toolsWait)
	defer cancel()
	for _, m := range b.live.allManagers() {
		if err := m.Wait(ctx); err != nil {
			b.log.Warn("shutdown: tool calls still running; their audit rows stay running until the next start marks them interrupted", "err", err)
			return
		}
	}
}

// build opens the store and builds every part from cfg. On error the returned bot (if any) holds
// what must be closed.
func build(ctx context.Context, cfg *config.Config, log *slog.Logger) (*bot, error) {
	b := &bot{log: log, grace: shutdownGrace(cfg)}
	announceModels(log, cfg)
	if cfg.Telegram.Enabled {
		if err := telegram.DropOffsetOfNewDatabase(cfg.SQLitePath(), cfg.OffsetPath(), log); err != nil {
			return nil, err
		}
	}
	st, err := b.openStore(ctx, cfg)
	if err != nil {
		return b, err
	}
	if err := b.startTracing(ctx, cfg); err != nil {
		return b, err
	}
	if err := b.newTasks(cfg); err != nil {
		return b, err
	}
	mo := metricsModels(cfg)
	mo.MCPUp, mo.Instance, mo.Platforms = b.live.mcpUp, b.instance, platformNames(cfg)
	m := metrics.New(mo)
	tl, err := b.loadTools(ctx, cfg, st.ToolCalls)
	if err != nil {
		return b, err
	}
	rec := b.tracing.Recorder(m.Recorder(auditRecorder{calls: st.ToolCalls}))
	b.live.start(cfg, tl, rec, m)
	parts, err := b.firstParts(ctx, cfg, tl)
	if err != nil {
		return b, err
	}
	mgr, err := b.newManager(cfg, parts)
	if err != nil {
		return b, err
	}
	b.live.use(mgr, parts)
	b.reindex(cfg, turnParts{}, parts)
	b.background = append(b.background, b.live.reindex.Part("reindex"))
	m.KnowTools(b.live.hasTool, b.live.toolNames)
	runner, opts, err := b.turnOptions(cfg, parts)
	if err != nil {
		return b, err
	}
	if b.pipe, err = pipeline.New(runner, b.pipelineStore(), mgr, opts); err != nil {
		return b, err
	}
	m.CountQueue("pipeline", b.pipe.Queued)
	if r := b.replica; r != nil {
		b.background = append(b.background, lifecycle.Part{Name: "deployment", Run: func(ctx context.Context) error { return r.Run(ctx, b.pipe) }},
			b.reloadOnAnnouncement(r))
		b.recordDigest(ctx, cfg)
	}

	deliver := delivery.Options{Logger: log, Observer: b.tracing.Deliveries(m)}
	if b.connectors, err = b.platforms(cfg, deliver); err != nil {
		return b, err
	}
	if cfg.Admin.Enabled {
		if err := b.addAdmin(cfg, b.live.health, m.Handler(), deliver); err != nil {
			return b, err
		}
	}
	if len(b.connectors) == 0 {
		return b, errNothingToServe
	}
	if keep := cfg.Storage.Retention; keep > 0 {
		log.Info("retention sweeper", "keep", keep, "every", "1h")
		b.background = append(b.background, lifecycle.Part{Name: "retention", Run: func(ctx context.Context) error {
			st.Retention.RunRetention(ctx, keep)
			return nil
		}})
	}
	return b, nil
}

// firstParts builds the parts a reload may build anew (turnParts): the native tools, memory and
// the knowledge bases (each nil when off), with tl's MCP servers.
func (b *bot) firstParts(ctx context.Context, cfg *config.Config, tl toolSet) (turnParts, error) {
	p := turnParts{mcp: tl.mcp}
	obs := b.tracing.Models(b.live.metrics)
	var err error
	if p.native, err = b.newNative(cfg); err != nil {
		return p, err
	}
	if p.memory, err = b.newMemory(ctx, cfg, obs); err != nil {
		return p, err
	}
	p.knowledge, err = b.newKnowledge(ctx, cfg, obs)
	return p, err
}

// turnOptions builds from cfg the agent runner and the pipeline's options a turn runs with (the
// metrics and the traces observe both): at the start and at each reload, over p (the MCP
// servers' loader reads the resources attached to chats).
func (b *bot) turnOptions(cfg *config.Config, p turnParts) (*agent.Runner, pipeline.Options, error) {
	m, l := b.live.metrics, &b.live
	ropts := runnerOptions(cfg)
	ropts.HTTPClient, ropts.Logger, ropts.Observer = l.modelClient, b.log, b.tracing.Models(m)
	runner, err := agent.NewRunner(agentModels(cfg.Models), ropts)
	if err != nil {
		return nil, pipeline.Options{}, err
	}
	opts := pipelineOptions(cfg)
	if opts.Media.Transcriber, opts.Media.Speaker, err = newSpeech(cfg, l.speechClient, b.tracing.Models(m)); err != nil {
		return nil, pipeline.Options{}, err
	}
	opts.History.SystemPromptExtra = l.skillPrompt
	opts.Memory, opts.Knowledge = p.memory, p.knowledge
	ml := p.mcp
	if ml != nil && slices.ContainsFunc(cfg.MCP.Servers, func(s config.MCPServer) bool { return len(s.AttachResources) > 0 }) {
		opts.Resources = ml
	}
	if ml != nil && slices.ContainsFunc(cfg.MCP.Servers, func(s config.MCPServer) bool { return s.Prompts }) {
		opts.MCPPrompts = ml
	}
	opts.Audit = b.store.ToolCalls
	opts.Usage = b.store.Usage
	opts.Tools.Consents = b.store.Consents
	opts.Recorder = l.rec
	opts.Tasks = b.taskCommands()
	opts.Logger = b.log
	opts.Observer = b.tracing.Turns(m)
	if r := b.replica; r != nil {
		opts.Replicas, opts.Stamper, opts.Prompts = r, r, r
	}
	return runner, opts, nil
}

// pipelineStore is the pipeline's part of the database.
func (b *bot) pipelineStore() pipeline.Store {
	db := b.store
	return pipeline.Store{Conversations: db.Conversations, Turns: db.Turns, Messages: db.Messages,
		ModelCalls: db.ModelCalls, ToolCalls: db.ToolCalls}
}

// openStore opens and migrates the database and recovers what a previous run left running.
func (b *bot) openStore(ctx context.Context, cfg *config.Config) (*store.Database, error) {
	instance, err := b.claimReplica(cfg)
	if err != nil {
		return nil, err
	}
	b.instance = instance
	st, err := store.Open(ctx, store.Options{Driver: string(cfg.Storage.Driver), DSN: cfg.Storage.DSN, Logger: b.log, Instance: instance})
	if err != nil {
		return nil, err
	}
	b.store = st
	b.cleanup = append(b.cleanup, func() {
		if err := st.Close(); err != nil {
			b.log.Error("store close", "err", err)
		}
	})
	if err := st.Migrate(ctx); err != nil {
		return nil, err
	}
	if err := b.joinDeployment(ctx, st); err != nil {
		return nil, err
	}
	// Registered here, it runs after every part built later has closed (the MCP servers, which
	// end the calls that ignored their cancellation) and before the replica leaves and the
	// store closes: the calls' audit rows are finished while the store is still open.
	b.cleanup = append(b.cleanup, b.waitToolCalls)
	turns, calls, err := st.Turns.Recover(ctx)
	if err != nil {
		return nil, err
	}
	attrs := []any{"driver", cfg.Storage.Driver}
	if cfg.Storage.Driver == store.DriverSQLite {
		attrs = append(attrs, "path", cfg.Storage.DSN)
	}
	b.log.Info("store ready", append(attrs, "recovered_turns", turns, "recovered_tool_calls", calls)...)
	return st, nil
}

// toolSet is what loadTools found: the plugins' and the skills' loaders in dispatch order, the
// MCP servers' loader (nil when none is configured), and what the skills add to the system prompt (nil when
// none).
type toolSet struct {
	loaders     []tools.Loader
	mcp         *mcp.Loader
	skillPrompt func() string
}

// loadTools builds the tool loaders built once: plugins, MCP, skills.
func (b *bot) loadTools(ctx context.Context, cfg *config.Config, reader audit.Log) (toolSet, error) {
	var ts toolSet
	if len(cfg.Tools.Plugins) > 0 {
		pl, err := plugin.NewLoader(cfg.Tools.Plugins, plugin.Deps{Logger: b.log, Audit: reader})
		if err != nil {
			return ts, fmt.Errorf("tools.plugins: %w", err)
		}
		ts.loaders = append(ts.loaders, pl)
	}
	if len(cfg.MCP.Servers) > 0 {
		if err := b.newOAuth(cfg); err != nil {
			return ts, err
		}
		ts.mcp = b.startMCP(ctx, cfg.MCP.Servers, nil, nil)
		b.cleanup = append(b.cleanup, b.live.closeMCP)
	}
	if len(cfg.Tools.SkillDirs) > 0 {
		sk, err := skill.NewLoader(skill.Options{Dirs: cfg.Tools.SkillDirs, Logger: b.log})
		if err != nil {
			return ts, fmt.Errorf("tools.skill_dirs: %w", err)
		}
		ts.loaders = append(ts.loaders, sk)
		ts.skillPrompt = sk.Prompt
	}
	return ts, nil
}

// newNative builds the native tools of cfg; the models' observer hears of generate_image's calls
// (the metrics count their cost).
func (b *bot) newNative(cfg *config.Config) (tools.Loader, error) {
	opts := nativeOptions(cfg)
	opts.Tasks, opts.Images.Observer = b.taskTools(), b.tracing.Models(b.live.metrics)
	nat, err := native.NewLoader(opts)
	if err != nil {
		return nil, fmt.Errorf("tools.native: %w", err)
	}
	return nat, nil
}

// mcpTaskBook is the store's MCP tasks in flight as the loader's task book.
type mcpTaskBook struct{ *store.MCPTaskQuery }

// TakeLeftTasks returns the ids of the tasks of server that stopped processes left.
func (b mcpTaskBook) TakeLeftTasks(ctx context.Context, server string) ([]string, error) {
	left, err := b.MCPTaskQuery.TakeLeftTasks(ctx, server)
	ids := make([]string, len(left))
	for i, t := range left {
		ids[i] = t.TaskID
	}
	return ids, err
}

// startMCP starts the MCP servers and waits a while for them to connect; those still connecting
// add their tools once up. A reload's holds from's connection to the servers named in keep
// (mcp.Loader.Next; from nil: none). The caller closes the loader.
func (b *bot) startMCP(ctx context.Context, servers []config.MCPServer, from *mcp.Loader, keep []string) *mcp.Loader {
	var ml *mcp.Loader
	if from != nil {
		ml = from.Next(mcpServers(servers, b.oauth), keep)
	} else {
		opts := append(b.mcpOptions(), mcp.WithToolMemory(b.store.MCPTools), mcp.WithTaskBook(mcpTaskBook{b.store.MCPTasks}))
		ml = mcp.NewLoader(mcpServers(servers, b.oauth), b.log, opts...)
	}
	ml.Start(context.WithoutCancel(ctx))
	wait := 5 * time.Second
	for _, s := range servers {
		wait = max(wait, s.ConnectTimeout+5*time.Second)
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	if err := ml.WaitStarted(wctx); err != nil {
		b.log.Warn("MCP servers still connecting; their tools appear when they are up", "err", err)
	}
	cancel()
	for _, h := range ml.Health() {
		attrs := []any{"server", h.Name, "transport", h.Transport, "state", h.State, "tools", h.Tools}
		if h.LastError != "" {
			attrs = append(attrs, "err", h.LastError)
		}
		b.log.Info("MCP server", attrs...)
	}
	return ml
}

// platforms builds the enabled chat platforms but the web chat (which lives on the admin
// listener); deliver tunes their delivery engines. A new platform adds a line here and its
// constructor below.
func (b *bot) platforms(cfg *config.Config, deliver delivery.Options) ([]connector, error) {
	var out []connector
	for _, p := range []struct {
		enabled bool
		build   func() (connector, error)
	}{
		{cfg.Telegram.Enabled, func() (connector, error) { return b.newTelegram(cfg, deliver) }},
		{cfg.Discord.Enabled, func() (connector, error) { return b.newDiscord(cfg, deliver) }},
	} {
		if !p.enabled {
			continue
		}
		c, err := p.build()
		if err != nil {
			return out, err
		}
		out = append(out, c)
	}
	return out, nil
}

// newDiscord builds the Discord adapter; it connects in Run.
func (b *bot) newDiscord(cfg *config.Config, deliver delivery.Options) (*discord.Adapter, error) {
	log := b.log
	bot := coord.BotOf(chat.Discord, cfg.Discord.Token)
	roles := b.platformRoles(bot, discord.Limits(), deliver)
	dc, err := discord.New(discord.Options{
		Ledger:           roles.ledger,
		Shards:           cfg.Discord.Shards,
		ShardLeases:      b.shardLeases(bot),
		Questions:        roles.questions,
		Token:            cfg.Discord.Token,
		APIBase:          cfg.Discord.APIBase,
		Access:           discordAccess(cfg),
		TriggerPrefix:    cfg.Chat.TriggerPrefix,
		RegisterCommands: cfg.Discord.RegisterCommands,
		Commands:         pipeline.Commands(),
		ComponentsV2:     cfg.Discord.ComponentsV2,
		MaxLines:         cfg.Discord.MaxLines,
		GlobalPerSecond:  cfg.Discord.GlobalPerSecond,
		Threads:          cfg.Discord.Threads == config.ThreadsAuto,
		ThreadChannels:   cfg.Discord.ThreadChannels,
		AutoArchive:      cfg.Discord.AutoArchive,
		MaxImageBytes:    cfg.Chat.MaxImageBytes,
		Logger:           log,
		Delivery:         roles.deliver,
	})
	if err != nil {
		return nil, err
	}
	b.live.onReload(func(cfg *config.Config) { dc.SetAccess(discordAccess(cfg)) })
	b.engineBuilt(bot, dc.Engine(), dc)
	b.taskPlatform(chat.Discord, dc)
	log.Info("discord adapter", "api", cfg.Discord.APIBase)
	return dc, nil
}

// newTelegram builds the Telegram adapter (it asks Telegram who the bot is) and logs how it
// receives.
func (b *bot) newTelegram(cfg *config.Config, deliver delivery.Options) (*telegram.Adapter, error) {
	log := b.log
	offsetFile := cfg.OffsetPath()
	bot := coord.BotOf(chat.Telegram, cfg.Telegram.Token)
	roles := b.platformRoles(bot, telegram.Limits(), deliver)
	var hook net.Listener
	if cfg.Telegram.Mode == config.ModeWebhook {
		ln, err := listen("[telegram] webhook_listen", cfg.Telegram.WebhookListen)
		if err != nil {
			return nil, err
		}
		b.cleanup = append(b.cleanup, func() { ln.Close() })
		hook = ln
	}
	tg, err := telegram.New(telegram.Options{
		Ledger:          roles.ledger,
		PollLease:       b.pollLease(bot),
		Questions:       roles.questions,
		Token:           cfg.Telegram.Token,
		APIEndpoint:     cfg.Telegram.APIEndpoint,
		Mode:            string(cfg.Telegram.Mode),
		WebhookListen:   cfg.Telegram.WebhookListen,
		WebhookURL:      cfg.Telegram.WebhookURL,
		WebhookSecret:   cfg.Telegram.WebhookSecret,
		WebhookListener: hook,
		Access:          telegramAccess(cfg),
		TriggerPrefix:   cfg.Chat.TriggerPrefix,
		Stream:          cfg.Telegram.Stream,
		Drafts:          cfg.Telegram.Drafts.On(),
		Rich:            cfg.Telegram.Rich.On(),
		GlobalPerSecond: cfg.Telegram.GlobalPerSecond,
		PaidBroadcast:   cfg.Telegram.PaidBroadcast,
		PrivateTopics:   cfg.Telegram.PrivateTopics,
		MaxImageBytes:   cfg.Chat.MaxImageBytes,
		OffsetFile:      offsetFile,
		Commands:        pipeline.Commands(),
		Logger:          log,
		Delivery:        roles.deliver,
	})
	if err != nil {
		return nil, err
	}
	b.live.onReload(func(cfg *config.Config) { tg.SetAccess(telegramAccess(cfg)) })
	b.engineBuilt(bot, tg.Engine(), tg)
	b.taskPlatform(chat.Telegram, tg)
	if offsetFile == "" {
		offsetFile = "off"
	}
	if cfg.Telegram.Mode == "webhook" {
		log.Info("telegram adapter", "bot", tg.BotUsername(), "mode", "webhook", "listen", cfg.Telegram.WebhookListen, "url", cfg.Telegram.WebhookURL, "offset_file", offsetFile)
	} else {
		log.Info("telegram adapter", "bot", tg.BotUsername(), "mode", "polling", "api", endpointHost(cfg.Telegram.APIEndpoint), "offset_file", offsetFile)
	}
	return tg, nil
}

// discordAccess is where and for whom the Discord adapter answers: [discord]'s allow lists and
// the [access] users they let send direct messages.
func discordAccess(cfg *config.Config) discord.Access {
	d := cfg.Discord
	return discord.Access{AllowedGuilds: d.AllowedGuilds, AllowedChannels: d.AllowedChannels, AllowedRoles: d.AllowedRoles,
		AccessUsers: cfg.Access.UsersOn("discord"), NoDMs: !d.AllowDMs}
}

// telegramAccess is whom the Telegram adapter answers: [telegram]'s allow lists, the [access]
// users whose private chats pass them, and whether a policy or a quota names chat admins.
func telegramAccess(cfg *config.Config) telegram.Access {
	return telegram.Access{AllowedChats: cfg.Telegram.AllowedChats, AllowedUsers: cfg.Telegram.AllowedUsers,
		AccessUsers: cfg.Access.UsersOn("telegram"), ChatAdmins: namesChatAdmins(cfg)}
}

// addAdmin builds the admin listener and, when configured, the web chat it serves (a
// connector like the others).
func (b *bot) addAdmin(cfg *config.Config, health func() []tools.ServerHealth, metricsHandler http.Handler, deliver delivery.Options) error {
	proxies, err := admin.NewProxies(cfg.Admin.TrustedProxies, cfg.Admin.PublicURL)
	if err != nil {
		return err
	}
	aopts := admin.Options{
		Listen: cfg.Admin.Listen,
		Token:  cfg.Admin.Token,
		Store: admin.Store{ToolCalls: b.store.ToolCalls, Turns: b.store.Turns, Messages: b.store.Messages,
			Timelines: b.store.Timelines, Usage: b.store.Usage, Consents: b.store.Consents, Health: b.store,
			Tasks: b.adminTasks(), Transcripts: b.store.Transcripts},
		MCPHealth: health,
		Metrics:   metricsHandler,
		Prices:    prices(cfg),
		TraceURL:  cfg.OTel.TraceURL,
		Logger:    b.log,
		Proxies:   proxies,
		Instances: adminInstances(b.replica),
		Recall:    b.live.recall,
		// In the database, so that a login holds on every replica and a logout on all of them.
		Sessions:  b.store.AdminSessions,
		Settings:  botSettings{b},
		PublicURL: cfg.Admin.PublicURL,
		// A message of the web chat may carry files of up to media.max_bytes each.
		ChatUploadBytes: web.MaxSendBytes(cfg.Media.MaxBytes),
	}
	if b.oauth != nil {
		aopts.OAuth = b.oauth
	}
	if cfg.Admin.WebChat {
		wopts := web.Options{Delivery: deliver, SecureCookies: proxies.Secure, Sessions: b.store.WebChat, Logger: b.log,
			MaxUploadBytes: cfg.Media.MaxBytes}
		if r := b.replica; r != nil {
			wopts.Relay, wopts.Questions = r.WebRelay(), r.Questions(coord.BotOf(chat.Web, ""))
		}
		chat, err := web.New(wopts)
		if err != nil {
			return err
		}
		aopts.WebChat = chat.Handler()
		b.connectors = append(b.connectors, chat)
	}
	srv, err := admin.New(aopts)
	if err != nil {
		return err
	}
	ln, err := listen("[admin] listen", cfg.Admin.Listen)
	if err != nil {
		return err
	}
	b.cleanup = append(b.cleanup, func() { ln.Close() }) // Serve closes it too; a failed start does not reach Serve
	announceAdmin(b.log, cfg, ln.Addr())
	b.background = append(b.background, lifecycle.Part{Name: "admin", Run: func(ctx context.Context) error { return srv.Serve(ctx, ln) }},
		// The overview's hours, rolled up where the overview is shown (decision 063).
		lifecycle.Part{Name: "overview roll-up", Run: func(ctx context.Context) error { b.store.Usage.RunRollUp(ctx); return nil }})
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
	// Every connection, busy or idle, keeps a read and a write buffer (4 KB each by default).
	// A stream's lines are a few hundred bytes and arrive one by one at a model's pace, and a
	// request body larger than the buffer is written in more pieces, not refused.
	tr.ReadBufferSize = modelReadBuffer
	tr.WriteBufferSize = modelWriteBuffer
	return &http.Client{Transport: tr}
}

// Buffer sizes of a model connection.
const (
	modelReadBuffer  = 1024
	modelWriteBuffer = 1024
)

// Bounds of connecting to a model server.
const (
	modelDialTimeout = 10 * time.Second
	modelTLSTimeout  = 10 * time.Second
)

// pipelineOptions maps the config onto the pipeline's options.
func pipelineOptions(cfg *config.Config) pipeline.Options {
	return pipeline.Options{
		Access: access.Lists{
			AllowUsers: cfg.Access.AllowUsers,
			DenyUsers:  cfg.Access.DenyUsers,
			AllowChats: cfg.Access.AllowChats,
			DenyChats:  cfg.Access.DenyChats,
			Admins:     cfg.Access.Admins,
		},
		RateLimitPerMinute: cfg.Chat.RateLimitPerMin,
		Scope:              pipeline.Scope(cfg.Chat.Scope),
		Queue: pipeline.QueueOptions{
			Busy:             pipeline.Busy(cfg.Chat.Busy),
			Size:             cfg.Chat.QueueSize,
			MaxTurnsInFlight: cfg.Chat.MaxTurnsInFlight,
			TurnWait:         cfg.Chat.TurnWait,
			TurnTimeout:      cfg.Chat.TurnTimeout,
		},
		History: history.Options{
			SystemPrompt:       cfg.Agent.SystemPrompt,
			Rounds:             cfg.Agent.HistoryRounds,
			CompactAt:          cfg.Agent.CompactAt,
			ToolResultShare:    cfg.Agent.ToolResultShare,
			ToolResultMaxChars: cfg.Agent.ToolResultMaxChars,
			IdleReset:          cfg.Chat.IdleReset,
			MaxImageBytes:      cfg.Chat.MaxImageBytes, // models without vision are told of images instead
		},
		Models: pipeline.ModelOptions{
			Budgets:    modelBudgets(cfg.Models),
			Selectable: cfg.Chat.SelectableModels,
			Prices:     prices(cfg),
		},
		Output: pipeline.OutputOptions{
			TrackFunctionCalls: cfg.Output.TrackFunctionCalls,
			Reasoning:          pipeline.Reasoning(cfg.Output.Reasoning),
			ExceptionHandling:  pipeline.ExceptionHandling(cfg.Output.ExceptionHandling),
		},
		Texts: pipeline.Texts{
			Help:        cfg.Chat.HelpText,
			Busy:        cfg.Chat.BusyText,
			RateLimited: cfg.Chat.RateLimitedText,
			Stopped:     cfg.Chat.InterruptedMarker,
			FailureHint: cfg.Output.FailureHint,
		},
		Tools: pipeline.ToolOptions{
			Allow:            cfg.Tools.Allow,
			PerChat:          cfg.Tools.PerChat,
			ApprovalTimeout:  cfg.Tools.ApprovalTimeout,
			MaxOpenQuestions: cfg.Tools.MaxOpenQuestions,
		},
		Quotas: quotas(cfg.Quotas),
		Media: pipeline.MediaOptions{
			MaxBytes:      cfg.Media.MaxBytes,
			MaxAudio:      cfg.Speech.MaxAudio,
			DocumentShare: cfg.Media.DocumentShare,
			Reply:         cfg.Speech.Reply,
			MaxReplyChars: cfg.Speech.MaxReplyChars,
		},
	}
}

// metricsModels are the models the metrics label their calls with (the chat models, speech's,
// the embeddings' and generate_image's), their prices and the model ids they ask for.
func metricsModels(cfg *config.Config) metrics.Options {
	return metrics.Options{Models: slices.Concat(modelNames(cfg.Models), speechNames(cfg), embeddingNames(cfg), imageNames(cfg)),
		Prices: prices(cfg), RequestModels: requestModels(cfg)}
}

// modelBudgets lists the token budget of every configured model.
func modelBudgets(ms []config.Model) []history.ModelBudget {
	out := make([]history.ModelBudget, len(ms))
	for i, m := range ms {
		out[i] = history.ModelBudget{Name: m.Name, ContextWindow: m.ContextWindow, MaxOutputTokens: m.MaxOutputTokens}
	}
	return out
}

// nativeOptions are the native tools' options: the list, fetch_url's rule, [tools.web_search]
// and [tools.images].
func nativeOptions(cfg *config.Config) native.Options {
	s, m := cfg.Tools.WebSearch, cfg.Tools.Images
	return native.Options{
		Enabled:      cfg.Tools.Native,
		AllowPrivate: cfg.Tools.FetchAllowPrivate,
		Search: native.SearchOptions{
			Provider: string(s.Provider),
			BaseURL:  s.BaseURL,
			APIKey:   s.APIKey,
			Results:  s.Results,
			CacheTTL: s.CacheTTL,
			Timeout:  s.Timeout,
		},
		Images: native.ImageOptions{
			BaseURL: m.BaseURL,
			APIKey:  m.APIKey,
			Model:   m.Model,
			Size:    m.Size,
			Quality: m.Quality,
			Timeout: m.Timeout,
		},
	}
}

// prices are the models' prices per million tokens and the speech endpoints' per minute of
// audio, by configured name.
func prices(cfg *config.Config) map[string]chat.Price {
	out := make(map[string]chat.Price, len(cfg.Models))
	for _, m := range cfg.Models {
		out[m.Name] = chat.Price{In: m.PriceIn, Out: m.PriceOut, CachedIn: m.PriceCachedIn, CacheWrite: m.PriceCacheWrite}
	}
	for _, m := range cfg.Speech.Candidates() {
		p := out[m.Name]
		p.PerMinute = m.PricePerMinute
		out[m.Name] = p
	}
	for _, m := range cfg.Embeddings.Candidates() {
		p := out[m.Name]
		p.In = m.PriceIn
		out[m.Name] = p
	}
	if m := cfg.Tools.Images; m.BaseURL != "" {
		// generate_image's calls are kept under the model's name (native.ImageOptions.Name).
		p := out[m.Model]
		p.PerImage = m.PricePerImage
		out[m.Model] = p
	}
	return out
}

// imageNames is generate_image's model, which the metrics label its calls with; none when the
// tool is off.
func imageNames(cfg *config.Config) []string {
	if m := cfg.Tools.Images; m.BaseURL != "" {
		return []string{m.Model}
	}
	return nil
}

// speechNames are the speech endpoints' names, which the metrics label their calls with.
func speechNames(cfg *config.Config) []string {
	var names []string
	for _, m := range cfg.Speech.Candidates() {
		names = append(names, m.Name)
	}
	if cfg.Speech.Reply != pipeline.SpeakOff && cfg.Speech.TTSModel != "" {
		names = append(names, cfg.Speech.TTSModel)
	}
	return names
}

// newSpeech builds the speech client of [speech]: nil interfaces when it transcribes nothing
// and speaks nothing.
func newSpeech(cfg *config.Config, hc *http.Client, obs provider.Observer) (pipeline.Transcriber, pipeline.Speaker, error) {
	o := speechOptions(cfg)
	if len(o.Candidates) == 0 && o.Voice.Model == "" {
		return nil, nil, nil
	}
	o.HTTPClient, o.Observer = hc, obs
	c, err := speech.New(o)
	if err != nil {
		return nil, nil, err
	}
	return c, c, nil
}

// speechOptions are [speech]'s endpoints as the speech client takes them: the transcription
// endpoints are the file's own, the voice is assembled from its tts_* keys.
func speechOptions(cfg *config.Config) speech.Options {
	s := cfg.Speech
	var o speech.Options
	for _, m := range s.Candidates() {
		o.Candidates = append(o.Candidates, m.Endpoint)
	}
	if s.Reply != pipeline.SpeakOff && s.TTSModel != "" {
		o.Voice = speech.Voice{Endpoint: provider.Endpoint{BaseURL: s.TTSBaseURL, APIKey: s.TTSAPIKey, Model: s.TTSModel, Timeout: s.Timeout}, Voice: s.Voice}
	}
	return o
}

// runnerOptions are [agent]'s keys the runner reads; the caller adds its client, log and observer.
func runnerOptions(cfg *config.Config) agent.Options {
	return agent.Options{MaxToolRounds: cfg.Agent.MaxToolRounds, FlushChunks: cfg.Agent.StreamFlushChunks, RemoveThink: cfg.Agent.RemoveThink}
}

// managerOptions are [tools]' keys the tool manager reads; the caller adds its log, policy,
// consents and claims.
func managerOptions(cfg *config.Config) tools.ManagerOptions {
	t := cfg.Tools
	return tools.ManagerOptions{ResultMaxChars: cfg.Agent.ToolResultMaxChars,
		MaxFileBytes: int64(t.MaxFileBytes), MaxFilesPerTurn: t.MaxFilesPerTurn, ElicitationTimeout: t.ElicitationTimeout,
		Parallel: tools.ParallelMode(t.Parallel), MaxParallel: t.MaxParallel, ParallelTools: t.ParallelTools,
		AlwaysAllowFor: t.AlwaysAllow}
}

// quotas is [quotas] as the quota part takes it: the limits and overrides are the file's.
func quotas(q config.Quotas) quota.Policy {
	return quota.Policy{User: q.User, Chat: q.Chat, Overrides: q.Overrides, AdminsCounted: q.AdminsCounted}
}

// agentModels are the [[models]] as the runner takes them: each entry's endpoint is the file's.
func agentModels(ms []config.Model) []agent.Model {
	out := make([]agent.Model, len(ms))
	for i, m := range ms {
		out[i] = agent.Model{Endpoint: m.Endpoint, SupportsTools: m.SupportsTools, SupportsVision: m.SupportsVision,
			CacheBreakpoints: m.Cache == config.CacheAnthropic}
	}
	return out
}

// newOAuth builds the logins of the MCP servers with auth = "oauth", kept in the store.
func (b *bot) newOAuth(cfg *config.Config) error {
	servers := oauthServers(cfg.MCP.Servers)
	if len(servers) == 0 {
		return nil
	}
	m, err := oauth.New(oauth.Options{Servers: servers, Store: b.store.OAuth, Key: cfg.SecretKey, Logger: b.log})
	if err != nil {
		return err
	}
	b.oauth = m
	b.background = append(b.background, lifecycle.Part{Name: "mcp oauth", Run: m.Run})
	return nil
}

// oauthServers are the MCP servers with auth = "oauth", as their logins take them.
func oauthServers(ss []config.MCPServer) []oauth.Server {
	var out []oauth.Server
	for _, s := range ss {
		if s.Auth == config.AuthOAuth {
			out = append(out, oauth.Server{Name: s.Name, URL: s.URL, ClientID: s.ClientID, ClientSecret: s.ClientSecret, Scopes: s.Scopes, Local: s.Local})
		}
	}
	return out
}

// mcpServers turns the configured servers into the loader's; logins authorizes those with
// auth = "oauth" (nil when none has it).
func mcpServers(ss []config.MCPServer, logins *oauth.Manager) []mcp.ServerConfig {
	out := make([]mcp.ServerConfig, len(ss))
	for i, s := range ss {
		out[i] = mcp.ServerConfig{
			Name:            s.Name,
			Transport:       string(s.Transport),
			Command:         s.Command,
			Args:            s.Args,
			Env:             s.Env,
			URL:             s.URL,
			Headers:         s.Headers,
			ConnectTimeout:  s.ConnectTimeout,
			ToolCallTimeout: s.ToolCallTimeout,
			TaskTimeout:     s.TaskTimeout,
			ReadResource:    s.ReadResource,
			AttachResources: s.AttachResources,
			AttachChats:     s.AttachChats,
			Prompts:         s.Prompts,
			ToolPrefix:      s.ToolPrefix,
			Parallel:        s.Parallel,
			Local:           s.Local,
			MaxMessageBytes: s.MaxMessageBytes,
		}
		if s.Auth == "oauth" {
			out[i].Auth = logins.Source(s.Name)
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

// namesChatAdmins reports whether a tool policy or a quota override names the chat_admins role,
// so the Telegram adapter must find out who administers a group.
func namesChatAdmins(cfg *config.Config) bool {
	for _, p := range cfg.Tools.Policy {
		if slices.Contains(p.Roles, tools.RoleChatAdmins) {
			return true
		}
	}
	for _, o := range cfg.Quotas.Overrides {
		if slices.Contains(o.Roles, tools.RoleChatAdmins) {
			return true
		}
	}
	return false
}
