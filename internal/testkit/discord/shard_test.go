package discord

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// gatewayClient is a bare gateway connection that identifies as one shard.
type gatewayClient struct {
	t  *testing.T
	ws *websocket.Conn
}

func dialShard(t *testing.T, s *Server, shard []int) *gatewayClient {
	t.Helper()
	ws, _, err := websocket.DefaultDialer.Dial(s.GatewayURL(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	c := &gatewayClient{t: t, ws: ws}
	if e := c.next(); e.Op != opHello {
		t.Fatalf("first payload op %d, want hello", e.Op)
	}
	d := map[string]any{"token": "Bot " + s.Token(), "intents": intentGuilds | intentGuildMessages | intentDirectMessages | intentMessageContent}
	if shard != nil {
		d["shard"] = shard
	}
	if err := ws.WriteJSON(map[string]any{"op": opIdentify, "d": d}); err != nil {
		t.Fatal(err)
	}
	return c
}

// next reads one payload; a generous deadline only guards against a hung test.
func (c *gatewayClient) next() gwEvent {
	c.t.Helper()
	e, err := c.read()
	if err != nil {
		c.t.Fatal(err)
	}
	return e
}

func (c *gatewayClient) read() (gwEvent, error) {
	_ = c.ws.SetReadDeadline(time.Now().Add(30 * time.Second))
	var e gwEvent
	err := c.ws.ReadJSON(&e)
	return e, err
}

// until reads dispatches until one of type typ arrives.
func (c *gatewayClient) until(typ string) gwEvent {
	c.t.Helper()
	for {
		if e := c.next(); e.Type == typ {
			return e
		}
	}
}

// TestEventsGoToTheShardOfTheirGuild identifies two sessions as shards 0 and 1 of 2: READY says
// which shard each is, a guild's message reaches only the session of the guild's shard, a
// direct message only shard 0, and the server counts one live session per shard.
func TestEventsGoToTheShardOfTheirGuild(t *testing.T) {
	s := New(Config{Shards: 2})
	defer s.Close()
	g0, g1 := GuildOnShard(0, 2, 0), GuildOnShard(1, 2, 0)
	if ShardOf(g0, 2) != 0 || ShardOf(g1, 2) != 1 {
		t.Fatalf("GuildOnShard gave guilds on shards %d and %d", ShardOf(g0, 2), ShardOf(g1, 2))
	}
	s.AddChannel(Channel{ID: "10", GuildID: g0, Type: ChannelGuildText})
	s.AddChannel(Channel{ID: "11", GuildID: g1, Type: ChannelGuildText})
	clients := []*gatewayClient{dialShard(t, s, []int{0, 2}), dialShard(t, s, []int{1, 2})}
	for i, c := range clients {
		var ready struct {
			Shard  []int `json:"shard"`
			Guilds []struct {
				ID string `json:"id"`
			} `json:"guilds"`
		}
		if err := json.Unmarshal(c.until("READY").Data, &ready); err != nil {
			t.Fatal(err)
		}
		want := []string{g0, g1}[i]
		if len(ready.Shard) != 2 || ready.Shard[0] != i || len(ready.Guilds) != 1 || ready.Guilds[0].ID != want {
			t.Errorf("shard %d READY: shard %v guilds %+v, want [%d 2] and guild %s only", i, ready.Shard, ready.Guilds, i, want)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.WaitFor(ctx, func() bool { l := s.LiveShards(); return l[0] == 1 && l[1] == 1 }); err != nil {
		t.Fatalf("live shards %v: %v", s.LiveShards(), err)
	}

	for _, m := range []UserMessage{
		{ChannelID: "11", GuildID: g1, AuthorID: "7", Content: "for shard 1"},
		{ChannelID: "10", GuildID: g0, AuthorID: "7", Content: "for shard 0"},
		{ChannelID: "12", AuthorID: "7", Content: "a DM"},
	} {
		if _, err := s.Post(m); err != nil {
			t.Fatal(err)
		}
	}
	content := func(e gwEvent) string {
		var m struct {
			Content string `json:"content"`
		}
		_ = json.Unmarshal(e.Data, &m)
		return m.Content
	}
	// Events of one session arrive in order: shard 0 sees its guild's message, then the DM.
	if got := content(clients[0].until("MESSAGE_CREATE")); got != "for shard 0" {
		t.Errorf("shard 0 first got %q, want its guild's message", got)
	}
	if got := content(clients[0].until("MESSAGE_CREATE")); got != "a DM" {
		t.Errorf("shard 0 then got %q, want the direct message", got)
	}
	if got := content(clients[1].until("MESSAGE_CREATE")); got != "for shard 1" {
		t.Errorf("shard 1 got %q, want its guild's message", got)
	}
	if s.ShardIdentifies(0) != 1 || s.ShardIdentifies(1) != 1 {
		t.Errorf("identifies by shard: %d, %d; want 1 each", s.ShardIdentifies(0), s.ShardIdentifies(1))
	}
}

// TestIdentifyingWithTooFewShardsIsRefused: a bot that needs two shards and identifies without a
// shard field (one shard) is closed with 4011, as Discord does; a shard id out of range with 4010.
func TestIdentifyingWithTooFewShardsIsRefused(t *testing.T) {
	s := New(Config{Shards: 2})
	defer s.Close()
	for _, tc := range []struct {
		shard []int
		code  int
	}{{nil, 4011}, {[]int{2, 2}, 4010}} {
		c := dialShard(t, s, tc.shard)
		_, err := c.read()
		var ce *websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != tc.code {
			t.Errorf("identify with shard %v: %v, want close code %d", tc.shard, err, tc.code)
		}
	}
}

// TestTwoSessionsOfOneShardBothGetItsEvents identifies two sessions as the same shard [1, 2],
// as two replicas do while one hands the shard to the other: Discord accepts both, both are
// live, and each message of a guild on that shard reaches both of them; once one session
// closes, the other still gets the next message.
func TestTwoSessionsOfOneShardBothGetItsEvents(t *testing.T) {
	s := New(Config{Shards: 2})
	defer s.Close()
	g1 := GuildOnShard(1, 2, 0)
	s.AddChannel(Channel{ID: "11", GuildID: g1, Type: ChannelGuildText})
	clients := []*gatewayClient{dialShard(t, s, []int{1, 2}), dialShard(t, s, []int{1, 2})}
	for _, c := range clients {
		c.until("READY")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.WaitFor(ctx, func() bool { return s.LiveShards()[1] == 2 }); err != nil {
		t.Fatalf("live shards %v: %v", s.LiveShards(), err)
	}
	content := func(e gwEvent) string {
		var m struct {
			Content string `json:"content"`
		}
		_ = json.Unmarshal(e.Data, &m)
		return m.Content
	}
	if _, err := s.Post(UserMessage{ChannelID: "11", GuildID: g1, AuthorID: "7", Content: "to both"}); err != nil {
		t.Fatal(err)
	}
	for i, c := range clients {
		if got := content(c.until("MESSAGE_CREATE")); got != "to both" {
			t.Errorf("session %d got %q, want the guild's message", i, got)
		}
	}
	clients[0].ws.Close()
	if err := s.WaitFor(ctx, func() bool { return s.LiveShards()[1] == 1 }); err != nil {
		t.Fatalf("live shards %v after one session closed: %v", s.LiveShards(), err)
	}
	if _, err := s.Post(UserMessage{ChannelID: "11", GuildID: g1, AuthorID: "7", Content: "to the other"}); err != nil {
		t.Fatal(err)
	}
	if got := content(clients[1].until("MESSAGE_CREATE")); got != "to the other" {
		t.Errorf("the remaining session got %q, want the next message", got)
	}
	if n := s.ShardIdentifies(1); n != 2 {
		t.Errorf("shard 1 identified %d times, want 2", n)
	}
}
