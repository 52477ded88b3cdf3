package mcp

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"relaybot/tools"
)

// Prompts (MCP prompts/list, prompts/get): the prompts of a server whose admin enabled them
// (Prompts) are listed when it connects, shown on the Servers page, and run as a turn's input
// by /prompt NAME args (RunPrompt).

// maxPrompts is how many of a server's prompts are kept from its listing.
const maxPrompts = 200

// ErrNoPrompt is wrapped by RunPrompt's error when no enabled prompt has the name.
var ErrNoPrompt = errors.New("no such prompt")

// listPrompts reads the server's prompts when the admin enabled them and the server has any.
func (s *serverConn) listPrompts(ctx context.Context, sess *session) ([]tools.ServerPrompt, error) {
	if !s.cfg.Prompts || sess.caps.Prompts == nil {
		return nil, nil
	}
	res, err := sess.client.ListPrompts(ctx, mcpgo.ListPromptsRequest{})
	if err != nil {
		return nil, err
	}
	out := make([]tools.ServerPrompt, 0, min(len(res.Prompts), maxPrompts))
	for _, p := range res.Prompts[:min(len(res.Prompts), maxPrompts)] {
		sp := tools.ServerPrompt{Name: p.Name, Description: p.Description}
		for _, a := range p.Arguments {
			sp.Arguments = append(sp.Arguments, tools.PromptArgument{Name: a.Name, Description: a.Description, Required: a.Required})
		}
		out = append(out, sp)
	}
	return out, nil
}

// PromptNames lists the enabled prompts of the servers that are up, first server first.
func (l *Loader) PromptNames() []string {
	var names []string
	for _, s := range l.servers {
		for _, p := range s.prompts() {
			if !slices.Contains(names, p.Name) {
				names = append(names, p.Name)
			}
		}
	}
	return names
}

// RunPrompt gets the enabled prompt name from the first server that is up and offers it, with
// args ("key=value" pairs, or the whole text for a prompt of one argument), and returns its
// messages as one text for a turn's input: a single message as it is, several each under its
// role.
func (l *Loader) RunPrompt(ctx context.Context, name, args string) (string, error) {
	for _, s := range l.servers {
		for _, p := range s.prompts() {
			if p.Name == name {
				return s.runPrompt(ctx, p, args)
			}
		}
	}
	if names := l.PromptNames(); len(names) > 0 {
		return "", fmt.Errorf("%w %q; the prompts are: %s", ErrNoPrompt, name, strings.Join(names, ", "))
	}
	return "", fmt.Errorf("%w %q: no MCP server offers prompts here", ErrNoPrompt, name)
}

func (s *serverConn) prompts() []tools.ServerPrompt {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != tools.ServerUp {
		return nil
	}
	return s.promptList
}

func (s *serverConn) runPrompt(ctx context.Context, p tools.ServerPrompt, args string) (string, error) {
	values, err := promptArgs(p, args)
	if err != nil {
		return "", err
	}
	sess, err := s.current(ctx)
	if err != nil {
		return "", err
	}
	cctx, cancel := ctx, context.CancelFunc(func() {})
	if t := s.cfg.ToolCallTimeout; t > 0 {
		cctx, cancel = context.WithTimeout(ctx, t)
	}
	defer cancel()
	res, err := sess.client.GetPrompt(cctx, mcpgo.GetPromptRequest{Params: mcpgo.GetPromptParams{Name: p.Name, Arguments: values}})
	if err != nil {
		return "", fmt.Errorf("MCP prompt '%s' on server '%s': %w", p.Name, s.cfg.Name, s.redact.err(err))
	}
	var parts []string
	for _, m := range res.Messages {
		text := promptText(m.Content)
		if len(res.Messages) > 1 {
			text = string(m.Role) + ":\n" + text
		}
		parts = append(parts, text)
	}
	if len(parts) == 0 {
		return "", fmt.Errorf("MCP prompt '%s' on server '%s' has no messages", p.Name, s.cfg.Name)
	}
	return strings.Join(parts, "\n\n"), nil
}

// promptArgs reads /prompt's arguments for p: "key=value" words, or, for a prompt of exactly one
// argument, the whole text as its value. A required argument left out, or one p does not take,
// is an error naming what p takes.
func promptArgs(p tools.ServerPrompt, args string) (map[string]string, error) {
	values := map[string]string{}
	args = strings.TrimSpace(args)
	if len(p.Arguments) == 1 && args != "" && !strings.HasPrefix(args, p.Arguments[0].Name+"=") {
		values[p.Arguments[0].Name] = args
	} else {
		for _, w := range strings.Fields(args) {
			k, v, ok := strings.Cut(w, "=")
			if !ok || !slices.ContainsFunc(p.Arguments, func(a tools.PromptArgument) bool { return a.Name == k }) {
				return nil, fmt.Errorf("prompt %s takes %s; got %q", p.Name, usage(p), w)
			}
			values[k] = v
		}
	}
	for _, a := range p.Arguments {
		if a.Required && values[a.Name] == "" {
			return nil, fmt.Errorf("prompt %s needs %s: /prompt %s %s", p.Name, a.Name, p.Name, usage(p))
		}
	}
	return values, nil
}

// usage is p's arguments as /prompt takes them ("city=… [days=…]").
func usage(p tools.ServerPrompt) string {
	if len(p.Arguments) == 0 {
		return "no arguments"
	}
	var words []string
	for _, a := range p.Arguments {
		w := a.Name + "=…"
		if !a.Required {
			w = "[" + w + "]"
		}
		words = append(words, w)
	}
	return strings.Join(words, " ")
}

// promptText is one prompt message's content as text.
func promptText(c mcpgo.Content) string {
	if t, ok := mcpgo.AsTextContent(c); ok {
		return t.Text
	}
	if er, ok := mcpgo.AsEmbeddedResource(c); ok {
		return embedded(er)
	}
	return describe(c)
}
