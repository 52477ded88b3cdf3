package main

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	dtk "relaybot/internal/testkit/discord"
	tgkit "relaybot/internal/testkit/telegram"
	"relaybot/internal/testkit/wait"
	"relaybot/pipeline"
)

// One table of commands: /help lists it, Discord registers it as the bot's slash commands and
// Telegram shows it as the bot's command menu, with the same names, arguments and help lines, so
// a command added to the pipeline reaches all three (before, /help lacked /audit and Discord
// offered 4 of the 10).
func TestHelpDiscordAndTelegramListTheOneCommandTable(t *testing.T) {
	e := newEnv(t)
	dc := dtk.New(dtk.Config{})
	t.Cleanup(dc.Close)
	e.discord = []any{"enabled", true, "token", dc.Token(), "api_base", dc.APIBase()}
	cfg := e.config()
	cfg.Telegram.Enabled = true // toml turns Telegram off when Discord is on
	stop := e.start(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := dc.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	table := pipeline.Commands()

	wait.For(t, "Telegram's command menu", func() bool { return len(e.tg.MyCommands()) > 0 })
	var menu []tgkit.BotCommand
	for _, c := range table {
		menu = append(menu, tgkit.BotCommand{Command: c.Name, Description: c.Description()})
	}
	if got := e.tg.MyCommands(); !slices.Equal(got, menu) {
		t.Errorf("Telegram's command menu is\n%+v\nwant the table's\n%+v", got, menu)
	}

	wait.For(t, "Discord's slash commands", func() bool { return len(dc.Commands()) > 0 })
	registered := dc.Commands()
	if len(registered) != len(table) {
		t.Fatalf("Discord offers %d slash commands, the table has %d", len(registered), len(table))
	}
	for i, c := range table {
		r := registered[i]
		if r.Name != c.Name || r.Description != c.Description() || len(r.Options) != len(c.Args) {
			t.Errorf("slash command %d is /%s %q with %d options; the table has /%s %q with %d arguments",
				i, r.Name, r.Description, len(r.Options), c.Name, c.Description(), len(c.Args))
			continue
		}
		for j, a := range c.Args {
			if o := r.Options[j]; o.Name != a.Name || o.Description != a.Help || o.Required || !slices.Equal(o.Choices, a.Choices) {
				t.Errorf("/%s option %d is %+v; the table's argument is %+v", c.Name, j, o, a)
			}
		}
	}

	e.say(42, "/help")
	var help string
	wait.For(t, "the answer to /help", func() bool {
		texts := e.botTexts(42)
		if len(texts) > 0 {
			help = texts[0]
		}
		return help != ""
	})
	if !strings.HasPrefix(help, pipeline.HelpIntro) {
		t.Errorf("/help answered %q, want it to start with %q", help, pipeline.HelpIntro)
	}
	for _, c := range table {
		if line := c.Usage() + ": " + c.Description(); !strings.Contains(help, line) {
			t.Errorf("/help lacks %q:\n%s", line, help)
		}
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}
