package adapters

import (
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Command is a bot command at the start of a message ("/reset", "/audit@relay_bot fetch_url").
type Command struct {
	// Name is the command without its slash, lower-cased ("reset", "stop", "help", "audit").
	Name string
	// Bot is the username the command names after "@" ("/reset@relay_bot"), "" when it names none.
	Bot string
	// Args is the rest of the text after the command, trimmed.
	Args string
}

// For reports whether the command is meant for the bot whose username is self: it names no bot,
// or names self (ASCII case ignored, as Telegram compares usernames). Several bots may share a
// chat; a command naming another one must be neither run nor answered.
func (c Command) For(self string) bool {
	return c.Bot == "" || self != "" && strings.EqualFold(c.Bot, self)
}

// maxCommandName is the longest command name Telegram and Discord accept.
const maxCommandName = 32

// ParseCommand reads a bot command at the start of text, the one parser every adapter uses:
// "/name" or "/name@bot", where name is 1 to 32 letters, digits or underscores and bot a
// username (letters, digits, underscores). The command ends at the end of the text or at white
// space (a newline too: "/audit\nfetch_url"), or, after "@bot", at anything but a username
// character ("/reset@bot, please"). A "/name" followed by any other character ("/etc/hosts",
// "/reset@") is text, not a command, and ok is false. ("/reset@a@b" is a command for bot a, as
// a Telegram client marks it.)
func ParseCommand(text string) (cmd Command, ok bool) {
	if !strings.HasPrefix(text, "/") {
		return Command{}, false
	}
	name := nameLen(text[1:])
	if name == 0 || name > maxCommandName {
		return Command{}, false
	}
	cmd.Name = strings.ToLower(text[1 : 1+name])
	rest := text[1+name:]
	if strings.HasPrefix(rest, "@") {
		if n := nameLen(rest[1:]); n > 0 {
			cmd.Bot = rest[1 : 1+n]
			cmd.Args = strings.TrimSpace(rest[1+n:])
			return cmd, true
		}
	}
	if rest != "" {
		if r, _ := utf8.DecodeRuneInString(rest); !unicode.IsSpace(r) {
			return Command{}, false
		}
	}
	cmd.Args = strings.TrimSpace(rest)
	return cmd, true
}

// nameLen returns how many bytes at the start of s are letters, digits or underscores (ASCII).
func nameLen(s string) int {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return i
		}
	}
	return len(s)
}

// CommandSpec describes one bot command as its users see it. One table of them (the pipeline
// defines it; cmd/bot hands it to the adapters) feeds the pipeline's dispatch, /help, Discord's
// registered slash commands and Telegram's command list, so the four never drift apart.
type CommandSpec struct {
	// Name is the command without its slash: 1 to 32 lower-case letters, digits or underscores.
	Name string
	// Aliases are other names the command answers to, never listed ("start" for help).
	Aliases []string
	// Args are the arguments the command takes, all optional, in order.
	Args []CommandArg
	// Who says who may run it.
	Who Who
	// Help is the help line: what the command does, 1 to 100 characters (Discord's limit for a
	// slash command's description).
	Help string
}

// CommandArg is one optional argument of a command.
type CommandArg struct {
	// Name is the argument's name ("name", "filter"), lower case as a slash command option's.
	Name string
	// Help says what it holds, 1 to 100 characters.
	Help string
	// Choices, when set, are the only values it takes.
	Choices []string
}

// Who says who may run a command.
type Who string

// Who may run a command.
const (
	// Anyone who may talk to the bot (some arguments may be the admins' alone; the help line
	// says which).
	Anyone Who = "anyone"
	// Admins are the bot's admins ([access] admins).
	Admins Who = "admins"
)

// Usage renders the command as /help lists it: "/audit [filter]".
func (c CommandSpec) Usage() string {
	s := "/" + c.Name
	for _, a := range c.Args {
		s += " [" + a.Name + "]"
	}
	return s
}

// Description is the help line with who may run the command, as the platforms' command lists
// show it: "the latest tool calls (bot admins)".
func (c CommandSpec) Description() string {
	if c.Who == Admins {
		return c.Help + " (bot admins)"
	}
	return c.Help
}

// Commands is a table of commands, in the order /help and the platforms list them.
type Commands []CommandSpec

// Lookup returns the command named name or one of its aliases.
func (cs Commands) Lookup(name string) (CommandSpec, bool) {
	for _, c := range cs {
		if c.Name == name || slices.Contains(c.Aliases, name) {
			return c, true
		}
	}
	return CommandSpec{}, false
}

// Help renders the table after intro, one command a line, as /help answers.
func (cs Commands) Help(intro string) string {
	lines := []string{intro}
	for _, c := range cs {
		lines = append(lines, c.Usage()+": "+c.Description())
	}
	return strings.Join(lines, "\n")
}
