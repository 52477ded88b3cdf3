package telegram

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"unicode/utf8"
)

// BotCommand is one entry of the bot's command menu, as setMyCommands set it.
type BotCommand struct {
	Command     string `json:"command"`
	Description string `json:"description"`
}

// MyCommands returns the command menu the bot set last (setMyCommands in the default scope).
func (s *Server) MyCommands() []BotCommand {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.myCommands)
}

// commandName is what BotCommand.command may hold: 1-32 lower-case English letters, digits
// and underscores; languageCode is a two-letter ISO 639-1 code.
var (
	commandName  = regexp.MustCompile(`^[a-z0-9_]{1,32}$`)
	languageCode = regexp.MustCompile(`^[a-z]{2}$`)
)

// setMyCommandsLocked checks a setMyCommands request as the Bot API documents it (commands: a
// JSON array of at most 100 BotCommands; scope and language_code optional; nothing else) and
// keeps the default scope's list. The caller holds s.mu.
func (s *Server) setMyCommandsLocked(p map[string]string) (any, *apiError) {
	for k := range p {
		if !slices.Contains([]string{"commands", "scope", "language_code"}, k) {
			return nil, badRequest(fmt.Sprintf("unknown parameter %q", k))
		}
	}
	raw, ok := p["commands"]
	if !ok {
		return nil, badRequest("parameter \"commands\" is required")
	}
	var list []map[string]any
	if err := json.Unmarshal([]byte(raw), &list); err != nil {
		return nil, badRequest("can't parse commands JSON object")
	}
	if len(list) > 100 {
		return nil, badRequest("too many commands specified")
	}
	cmds := make([]BotCommand, 0, len(list))
	for _, c := range list {
		name, _ := c["command"].(string)
		desc, _ := c["description"].(string)
		if len(c) != 2 || !commandName.MatchString(name) {
			return nil, badRequest("BOT_COMMAND_INVALID")
		}
		if n := utf8.RuneCountInString(desc); n < 1 || n > 256 {
			return nil, badRequest("BOT_COMMAND_DESCRIPTION_INVALID")
		}
		cmds = append(cmds, BotCommand{Command: name, Description: desc})
	}
	scope := "default"
	if raw, ok := p["scope"]; ok {
		var sc struct {
			Type string `json:"type"`
		}
		scopes := []string{"default", "all_private_chats", "all_group_chats", "all_chat_administrators",
			"chat", "chat_administrators", "chat_member"}
		if err := json.Unmarshal([]byte(raw), &sc); err != nil || !slices.Contains(scopes, sc.Type) {
			return nil, badRequest("wrong bot command scope")
		}
		scope = sc.Type
	}
	if lc, ok := p["language_code"]; ok && lc != "" && !languageCode.MatchString(lc) {
		return nil, badRequest("LANG_CODE_INVALID")
	}
	if scope == "default" && p["language_code"] == "" {
		s.myCommands = cmds
	}
	return true, nil
}
