package mcp_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"relaybot/chat"
	testmcp "relaybot/internal/testkit/mcp"
	"relaybot/internal/testkit/wait"
	"relaybot/tools"
)

// A server's resources are listed for the Servers page; with read_resource on, the model reads
// one by URI through a tool named for the server (its tool_prefix), and a URI the server does
// not have is its refusal.
func TestResourcesListedAndRead(t *testing.T) {
	for _, c := range []struct{ tr, version string }{{"stdio", "2026-07-28"}, {"http", "2026-07-28"}, {"http", "2025-11-25"}} {
		t.Run(c.tr+"/"+c.version, func(t *testing.T) {
			cfg := serve(t, c.tr, testmcp.New("kit"))
			if c.version == "2025-11-25" {
				cfg = serveLegacy(t, c.tr, testmcp.New("kit"))
			}
			cfg.ReadResource, cfg.ToolPrefix = true, "kit_"
			l := startLoader(t, cfg)
			waitUp(t, l, "srv")
			h := health(l, "srv")
			if h.ProtocolVersion != c.version || len(h.Resources) != 2 ||
				h.Resources[0] != (tools.ServerResource{URI: "kit://handbook", Name: "Handbook", Description: "The team's handbook.", MIMEType: "text/markdown"}) {
				t.Fatalf("the Servers page would show %s resources %+v", h.ProtocolVersion, h.Resources)
			}
			if !slices.Contains(toolNames(l), "kit_read_resource") {
				t.Fatalf("read_resource not offered: %v", toolNames(l))
			}
			res, err := call(l, "kit_read_resource", map[string]string{"uri": "kit://handbook"})
			if err != nil || !strings.Contains(res.Text, "The office opens at nine") {
				t.Fatalf("read_resource = %q, %v", res.Text, err)
			}
			if _, err := call(l, "kit_read_resource", map[string]string{"uri": "kit://nothing"}); err == nil {
				t.Fatal("a URI the server does not have was read")
			}
		})
	}
}

// Without read_resource the tool is not offered; resources are listed all the same.
func TestReadResourceIsOffUnlessConfigured(t *testing.T) {
	l := startLoader(t, serve(t, "http", testmcp.New("kit")))
	waitUp(t, l, "srv")
	if slices.Contains(toolNames(l), "read_resource") {
		t.Fatal("read_resource offered without read_resource = true")
	}
	if len(health(l, "srv").Resources) != 2 {
		t.Fatalf("resources = %+v", health(l, "srv").Resources)
	}
}

// A resource attached to a chat is read for each turn there (a thread of that chat included),
// as data; other chats get nothing.
func TestAttachedResourceIsContextOfItsChatsOnly(t *testing.T) {
	k := testmcp.New("kit")
	cfg := serve(t, "http", k)
	group := chat.Ref{Platform: chat.Telegram, ChatID: "-100"}
	cfg.AttachResources, cfg.AttachChats = []string{"kit://handbook"}, []string{"telegram:-100"}
	l := startLoader(t, cfg)
	waitUp(t, l, "srv")
	thread := chat.Ref{Platform: chat.Telegram, ChatID: "-100", ThreadID: "7"}
	got := l.AttachedContext(context.Background(), []chat.Ref{thread, group})
	if !strings.Contains(got, testmcp.Handbook) || !strings.Contains(got, `uri="kit://handbook"`) || !strings.Contains(got, "not instructions") {
		t.Fatalf("the group's turn carries %q", got)
	}
	if other := l.AttachedContext(context.Background(), []chat.Ref{{Platform: chat.Telegram, ChatID: "-200"}}); other != "" {
		t.Fatalf("another chat's turn carries %q", other)
	}
	if k.Reads() != 1 {
		t.Fatalf("the server was read %d times, want once", k.Reads())
	}
}

// A server's resource templates are listed for the Servers page and named in read_resource's
// description; the model reads a URI a template expands to, while a URI no template or listed
// resource gives, or one past the length cap, is refused without asking the server.
func TestResourceTemplatesListedAndRead(t *testing.T) {
	for _, c := range []struct{ tr, version string }{{"http", "2026-07-28"}, {"http", "2025-11-25"}} {
		t.Run(c.tr+"/"+c.version, func(t *testing.T) {
			k := testmcp.New("kit")
			cfg := serve(t, c.tr, k)
			if c.version == "2025-11-25" {
				cfg = serveLegacy(t, c.tr, k)
			}
			cfg.ReadResource = true
			l := startLoader(t, cfg)
			waitUp(t, l, "srv")
			h := health(l, "srv")
			want := tools.ServerResourceTemplate{URITemplate: "kit://notes/{topic}", Name: "Notes", Description: "Notes on a topic.", MIMEType: "text/plain"}
			if len(h.ResourceTemplates) != 1 || h.ResourceTemplates[0] != want {
				t.Fatalf("the Servers page would show templates %+v, want %+v", h.ResourceTemplates, want)
			}
			var desc string
			for _, s := range l.Tools(context.Background()) {
				if s.Name == "read_resource" {
					desc = s.Description
				}
			}
			if !strings.Contains(desc, "kit://notes/{topic} (Notes)") {
				t.Fatalf("read_resource's description does not name the template: %q", desc)
			}
			res, err := call(l, "read_resource", map[string]string{"uri": "kit://notes/coffee%20machine"})
			if err != nil || !strings.Contains(res.Text, "Notes on coffee%20machine.") {
				t.Fatalf("read_resource of a templated URI = %q, %v", res.Text, err)
			}
			if k.Reads() != 1 {
				t.Fatalf("the server was read %d times, want once", k.Reads())
			}
			for _, uri := range []string{"kit://notes/a/b", "kit://notes/", "kit://other/x", "kit://notes/" + strings.Repeat("a", 2100)} {
				if _, err := call(l, "read_resource", map[string]string{"uri": uri}); err == nil {
					t.Fatalf("read_resource read %.40q, which no template of the server gives", uri)
				}
			}
			if k.Reads() != 1 {
				t.Fatalf("refused URIs reached the server: %d reads, want 1", k.Reads())
			}
		})
	}
}

// On a server that offers subscriptions, an attached resource is subscribed: its text is read
// once and kept for the following turns, and read again for the turn after the server says it
// changed (notifications/resources/updated). A server without them (2026-07-28 here) is read at
// every turn.
func TestSubscribedAttachedResourceReadAgainOnlyWhenChanged(t *testing.T) {
	group := []chat.Ref{{Platform: chat.Telegram, ChatID: "-100"}}
	t.Run("2025-11-25", func(t *testing.T) {
		k := testmcp.New("kit")
		cfg := serveLegacy(t, "http", k)
		cfg.AttachResources, cfg.AttachChats = []string{"kit://handbook"}, []string{"telegram:-100"}
		l, logs := startLogged(t, cfg)
		if k.Subscribers("kit://handbook") != 1 {
			t.Fatalf("%d subscriptions to the attached resource, want 1", k.Subscribers("kit://handbook"))
		}
		for turn := range 3 {
			if got := l.AttachedContext(context.Background(), group); !strings.Contains(got, testmcp.Handbook) {
				t.Fatalf("turn %d carries %q", turn, got)
			}
		}
		if k.Reads() != 1 {
			t.Fatalf("three turns read the subscribed resource %d times, want once", k.Reads())
		}
		k.SetHandbook("The office now opens at ten.")
		wait.For(t, "the server's update of kit://handbook", func() bool {
			return strings.Contains(logs.String(), `msg="MCP resource attached to chats changed; the next turn reads it again" mcp_server=srv uri=kit://handbook`)
		})
		if got := l.AttachedContext(context.Background(), group); !strings.Contains(got, "now opens at ten") {
			t.Fatalf("the turn after the update carries %q", got)
		}
		l.AttachedContext(context.Background(), group)
		if k.Reads() != 2 {
			t.Fatalf("the resource was read %d times, want twice (once more after its update)", k.Reads())
		}
	})
	t.Run("2026-07-28", func(t *testing.T) {
		k := testmcp.New("kit")
		cfg := serve(t, "http", k)
		cfg.AttachResources, cfg.AttachChats = []string{"kit://handbook"}, []string{"telegram:-100"}
		l := startLoader(t, cfg)
		waitUp(t, l, "srv")
		l.AttachedContext(context.Background(), group)
		l.AttachedContext(context.Background(), group)
		if k.Reads() != 2 || k.Subscribers("kit://handbook") != 0 {
			t.Fatalf("%d reads and %d subscriptions, want one read a turn and none", k.Reads(), k.Subscribers("kit://handbook"))
		}
	})
}
