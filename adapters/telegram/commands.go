package telegram

import (
	"context"
	"encoding/json"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"
)

// botCommand is Telegram's BotCommand: a command and its description in the command menu.
type botCommand struct {
	Command     string `json:"command"`
	Description string `json:"description"`
}

// commandsTimeout bounds the setMyCommands request at start.
const commandsTimeout = 30 * time.Second

// setCommands sets the bot's command menu (setMyCommands, the default scope) to the command
// table. A failure is logged: the bot answers its commands without the menu too.
func (a *Adapter) setCommands(ctx context.Context) {
	if len(a.opts.Commands) == 0 {
		return
	}
	list := make([]botCommand, len(a.opts.Commands))
	for i, c := range a.opts.Commands {
		list[i] = botCommand{Command: c.Name, Description: c.Description()}
	}
	b, err := json.Marshal(list)
	if err != nil {
		a.log.Warn("telegram: command menu not set", "err", err)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, commandsTimeout)
	defer cancel()
	if err := a.api.callInto(ctx, "setMyCommands", tgbotapi.Params{"commands": string(b)}, nil); err != nil {
		a.log.Warn("telegram: command menu not set", "err", err)
	}
}
