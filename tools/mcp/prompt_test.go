package mcp_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	testmcp "relaybot/internal/testkit/mcp"
	"relaybot/tools/mcp"
)

// The prompts of a server whose admin enabled them are listed and run with their arguments
// ("key=value", or the whole text for a prompt of one argument); their messages become one
// text. A missing required argument or an unknown prompt says what there is.
func TestPromptsRunWithTheirArguments(t *testing.T) {
	for _, c := range []struct{ tr, version string }{{"stdio", "2026-07-28"}, {"http", "2026-07-28"}, {"http", "2025-11-25"}} {
		t.Run(c.tr+"/"+c.version, func(t *testing.T) {
			cfg := serve(t, c.tr, testmcp.New("kit"))
			if c.version == "2025-11-25" {
				cfg = serveLegacy(t, c.tr, testmcp.New("kit"))
			}
			cfg.Prompts = true
			l := startLoader(t, cfg)
			waitUp(t, l, "srv")
			if ps := health(l, "srv").Prompts; len(ps) != 2 || ps[0].Name != "brief" || !ps[0].Arguments[0].Required {
				t.Fatalf("the Servers page would show prompts %+v", ps)
			}
			ctx := context.Background()
			for _, args := range []string{"sea otters", "topic=otters"} {
				got, err := l.RunPrompt(ctx, "brief", args)
				want := "Write a three-line brief about " + strings.TrimPrefix(args, "topic=") + "."
				if err != nil || got != want {
					t.Fatalf("/prompt brief %s = %q, %v; want %q", args, got, err, want)
				}
			}
			got, err := l.RunPrompt(ctx, "standup", "")
			if err != nil || got != "assistant:\nI keep standups short.\n\nuser:\nRun today's standup." {
				t.Fatalf("/prompt standup = %q, %v", got, err)
			}
			if _, err := l.RunPrompt(ctx, "brief", ""); err == nil || !strings.Contains(err.Error(), "needs topic") {
				t.Fatalf("/prompt brief without its topic: %v", err)
			}
			if _, err := l.RunPrompt(ctx, "nothing", ""); !errors.Is(err, mcp.ErrNoPrompt) || !strings.Contains(err.Error(), "brief, standup") {
				t.Fatalf("/prompt nothing: %v", err)
			}
		})
	}
}

// Prompts are off unless the admin enables them: none listed, none run.
func TestPromptsAreOffUnlessEnabled(t *testing.T) {
	l := startLoader(t, serve(t, "http", testmcp.New("kit")))
	waitUp(t, l, "srv")
	if ps := health(l, "srv").Prompts; len(ps) != 0 {
		t.Fatalf("prompts listed without prompts = true: %+v", ps)
	}
	if _, err := l.RunPrompt(context.Background(), "brief", "x"); !errors.Is(err, mcp.ErrNoPrompt) {
		t.Fatalf("a prompt ran without prompts = true: %v", err)
	}
}
