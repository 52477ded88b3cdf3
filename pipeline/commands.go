package pipeline

import (
	"context"
	"log/slog"

	"relaybot/adapters"
	"relaybot/pipeline/access"
	"relaybot/pipeline/asking"
	"relaybot/pipeline/history"
	"relaybot/pipeline/quota"
)

// command is one entry of the command table: what users see of it, and how the pipeline answers.
type command struct {
	spec adapters.CommandSpec
	run  func(p *Pipeline, r *request)
	// queued: run waits for the conversation's turn like a message (Pipeline.queue), which
	// tells the adapter when the command has its place; the others take none.
	queued bool
}

// commandTable is the one table of the commands the pipeline answers, in the order /help lists
// them. /retry and /compact wait for the conversation's turn like a message: they read and
// change its history; /prompt runs as a message whose text is the prompt's.
func commandTable() []command {
	answer := func(f func(c *commands, r *request)) func(p *Pipeline, r *request) {
		return func(p *Pipeline, r *request) { f(r.live.cmds, r) }
	}
	return []command{
		{spec: adapters.CommandSpec{Name: "reset", Who: adapters.Anyone, Help: "start a new conversation"},
			run: answer((*commands).reset)},
		{spec: adapters.CommandSpec{Name: "new", Who: adapters.Anyone, Help: "start a new conversation, in a new thread or topic where the bot opens them"},
			run: answer((*commands).reset)},
		{spec: adapters.CommandSpec{Name: "stop", Who: adapters.Anyone, Help: "cancel the answer in progress (the asker's, or any for admins)"},
			run: (*Pipeline).stop},
		{spec: adapters.CommandSpec{Name: "retry", Who: adapters.Anyone, Help: "answer your last message again",
			Args: []adapters.CommandArg{{Name: "whose", Help: "last: the conversation's last message, whoever sent it, with their rights (bot admins only)", Choices: []string{retryAnyone}}}},
			run: (*Pipeline).queue, queued: true},
		{spec: adapters.CommandSpec{Name: "compact", Who: adapters.Anyone, Help: "summarise the conversation so far"},
			run: (*Pipeline).queue, queued: true},
		{spec: adapters.CommandSpec{Name: "model", Who: adapters.Anyone, Help: "list the models, or pick one for this conversation",
			Args: []adapters.CommandArg{{Name: "name", Help: "the model to pick, or default for the configured one"}}},
			run: answer((*commands).model)},
		{spec: adapters.CommandSpec{Name: "system", Who: adapters.Anyone, Help: "show the system prompt; admins set it",
			Args: []adapters.CommandArg{{Name: "prompt", Help: "the new system prompt (admins), or default for the configured one"}}},
			run: answer((*commands).system)},
		{spec: adapters.CommandSpec{Name: "usage", Who: adapters.Anyone, Help: "your tokens and cost today and this month",
			Args: []adapters.CommandArg{{Name: "scope", Help: "all: everyone's usage (bot admins only)", Choices: []string{"all"}}}},
			run: answer((*commands).usage)},
		{spec: adapters.CommandSpec{Name: "audit", Who: adapters.Admins, Help: "the latest tool calls",
			Args: []adapters.CommandArg{{Name: "filter", Help: "[tool] [status] [n], in any order"}}},
			run: answer((*commands).audit)},
		{spec: adapters.CommandSpec{Name: "allowed", Who: adapters.Anyone,
			Help: "the tools always allowed in this chat; revoke N ends one",
			Args: []adapters.CommandArg{{Name: "revoke", Help: "the number /allowed shows of the one to revoke"}}},
			run: answer((*commands).allowed)},
		{spec: adapters.CommandSpec{Name: "memory", Who: adapters.Anyone, Help: "what I remember about you, numbered"},
			run: answer((*commands).memory)},
		{spec: adapters.CommandSpec{Name: "forget", Who: adapters.Anyone, Help: "forget what I remember about you: one (N from /memory) or all",
			Args: []adapters.CommandArg{{Name: "which", Help: "the number /memory shows, or all"}}},
			run: answer((*commands).forget)},
		{spec: adapters.CommandSpec{Name: "tasks", Who: adapters.Anyone, Help: "your scheduled tasks in this chat; cancel N cancels one",
			Args: []adapters.CommandArg{{Name: "cancel", Help: "cancel N: the number /tasks shows of the task to cancel"}}},
			run: answer((*commands).tasks)},
		{spec: adapters.CommandSpec{Name: "timezone", Who: adapters.Anyone, Help: "show your time zone, or set it (an IANA name such as Europe/Berlin)",
			Args: []adapters.CommandArg{{Name: "zone", Help: "the IANA time zone to set, such as Europe/Berlin"}}},
			run: answer((*commands).tasks)},
		{spec: adapters.CommandSpec{Name: "prompt", Who: adapters.Anyone, Help: "run a prompt of an MCP server an admin enabled",
			Args: []adapters.CommandArg{{Name: "prompt", Help: "the prompt's name, then its arguments (key=value, or the text for a prompt of one)"}}},
			run: (*Pipeline).queue, queued: true},
		{spec: adapters.CommandSpec{Name: "help", Aliases: []string{"start"}, Who: adapters.Anyone, Help: "show this"},
			run: answer((*commands).help)},
	}
}

// Commands returns the command table as the adapters list it (Discord's slash commands,
// Telegram's command menu) and /help shows it.
func Commands() adapters.Commands {
	table := commandTable()
	out := make(adapters.Commands, len(table))
	for i, c := range table {
		out[i] = c.spec
	}
	return out
}

// commands answers the commands that need no turn of their own.
type commands struct {
	store   Store
	history *history.Keeper
	quotas  *quota.Guard
	access  *access.Rules
	opts    *Options
	// say sends a notice (outbox.notice); fail is what the user sees of an error.
	say  func(out adapters.Responder, text string, log *slog.Logger)
	fail func(err error) string
}

// failed tells the user that a command failed the way a turn's error is told
// (output.exception_handling: the failure hint, the error, or nothing) and logs the detail.
// A store or driver error never reaches a member otherwise: it names users, hosts and databases.
func (c *commands) failed(r *request, what string, err error, attrs ...any) {
	r.log.Error("pipeline: "+what+" failed", append(attrs, "err", err)...)
	if text := c.fail(err); text != "" {
		c.say(r.out, text, r.log)
	}
}

// help answers /help (and /start) with the help text.
func (c *commands) help(r *request) { c.say(r.out, c.opts.Texts.Help, r.log) }

// reset starts a new conversation for the message's key (/reset, and /new: where the bot opens
// threads or topics, the adapter hands /new over in a new one, whose conversation this starts).
func (c *commands) reset(r *request) {
	ctx, cancel := context.WithTimeout(context.Background(), saveTimeout)
	defer cancel()
	conv, err := c.store.Conversations.ResetConversation(ctx, r.key)
	if err != nil {
		c.failed(r, "/reset", err, "conversation", r.key.String())
		return
	}
	r.log.Info("pipeline: conversation reset", "conversation", r.key.String(), "conversation_id", conv.ID)
	c.say(r.out, "Started a new conversation.", r.log)
}

// stop answers /stop (and the Stop button): in a chat shared by a group, only the member who
// asked (or an admin) stops an answer, on this replica or, passed on, on another.
func (p *Pipeline) stop(r *request) {
	in, key, log := r.in, r.key, r.log
	admin := r.live.access.IsAdmin(in)
	handled, askOthers := p.gate.stopAcrossReplicas(key, in, admin, r.out, log)
	if handled {
		return
	}
	running, stopped := p.turns.stop(key.String(), ErrStopped, func(started adapters.Inbound) bool {
		return admin || started.UserID == in.UserID
	})
	switch {
	case !running && askOthers && p.gate.stopElsewhere(key, in, admin, log):
		// Another replica may run it: passed on.
	case !running:
		// Said once a minute per user at most, even with the rate limit off.
		if ok, _ := p.idleStops.Allow(r.sender, r.live.opts.Now()); ok {
			p.outbox.notice(r.out, "Nothing to stop.", log)
		}
	case !stopped:
		log.Info("pipeline: /stop refused: not the asker's turn")
		p.outbox.notice(r.out, "Only the person who asked, or an admin, can stop this answer.", log)
	}
}

// allowed answers /allowed (asking.Allowed): the "always allow" answers of this chat, and
// "/allowed revoke N".
func (c *commands) allowed(r *request) {
	cs := c.opts.Tools.Consents
	if cs == nil {
		c.say(r.out, "Always-allow answers are not kept in this server.", r.log)
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), saveTimeout)
	defer cancel()
	text, err := asking.Allowed(ctx, cs, r.in, c.access.IsAdmin(r.in), c.opts.Now(), r.log)
	if err != nil {
		c.failed(r, "/allowed", err)
		return
	}
	c.say(r.out, text, r.log)
}

// TaskCommands answers the scheduled tasks' commands (package tasks): in.Command is "tasks" or
// "timezone", in.Args the rest of the line; admin says the sender is a bot admin. An error is
// a failure the user is told the way a turn's error is.
type TaskCommands interface {
	Command(ctx context.Context, in adapters.Inbound, admin bool) (string, error)
}

// tasks answers /tasks and /timezone.
func (c *commands) tasks(r *request) {
	if c.opts.Tasks == nil {
		c.say(r.out, "Scheduled tasks are off in this server.", r.log)
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), saveTimeout)
	defer cancel()
	text, err := c.opts.Tasks.Command(ctx, r.in, c.access.IsAdmin(r.in))
	if err != nil {
		c.failed(r, "/"+r.in.Command, err)
		return
	}
	c.say(r.out, text, r.log)
}
