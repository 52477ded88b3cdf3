package pipeline

import (
	"context"
	"strings"
	"time"
)

// MCPPrompts runs the MCP prompts an admin enabled (/prompt NAME args): RunPrompt returns the
// prompt's messages as the text a turn answers, or an error whose text tells the user what
// prompts and arguments there are.
type MCPPrompts interface {
	RunPrompt(ctx context.Context, name, args string) (string, error)
}

// promptTimeout bounds getting a prompt from its server.
const promptTimeout = 30 * time.Second

// prompted makes a /prompt turn's input the prompt's messages; "" when it did, else what to
// tell the user.
func (t *turn) prompted() string {
	p := t.parts.opts.MCPPrompts
	name, args, _ := strings.Cut(strings.TrimSpace(t.in.Args), " ")
	switch {
	case p == nil:
		return "No MCP prompts are enabled here."
	case name == "":
		return "Say which prompt: /prompt NAME [arguments]."
	}
	ctx, cancel := context.WithTimeout(t.ctx, promptTimeout)
	defer cancel()
	text, err := p.RunPrompt(ctx, name, args)
	if err != nil {
		t.log.Info("pipeline: /prompt not run", "prompt", name, "err", err)
		return "Prompt not run: " + err.Error()
	}
	t.log.Info("pipeline: /prompt runs as the turn's input", "prompt", name)
	t.in.Command, t.in.Args, t.in.Text = "", "", text
	return ""
}
