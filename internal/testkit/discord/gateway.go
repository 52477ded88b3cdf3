package discord

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// Gateway intents the server honours (Discord's bits).
const (
	intentGuilds         = 1 << 0
	intentGuildMessages  = 1 << 9
	intentDirectMessages = 1 << 12
	intentMessageContent = 1 << 15
)

// Gateway opcodes.
const (
	opDispatch       = 0
	opHeartbeat      = 1
	opIdentify       = 2
	opResume         = 6
	opInvalidSession = 9
	opHello          = 10
	opHeartbeatAck   = 11
)

type gwConn struct {
	ws  *websocket.Conn
	wmu sync.Mutex
}

func (c *gwConn) write(v any) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.ws.WriteJSON(v)
}

type gwEvent struct {
	Op   int             `json:"op"`
	Seq  int             `json:"s"`
	Type string          `json:"t"`
	Data json.RawMessage `json:"d"`
}

// session is one gateway session; it outlives its connections so it can be resumed.
type session struct {
	id      string
	intents int
	// shard and shards are the session's [shard_id, num_shards] ([0, 1] without a shard field).
	shard, shards int
	seq           int
	events        []gwEvent // every dispatch, for resume
	conn          *gwConn   // nil while disconnected
	ready         bool
	dmu           sync.Mutex // orders dispatches and resume replays
}

func (ss *session) live() bool { return ss.conn != nil && ss.ready }

var upgrader = websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}

func (s *Server) serveGateway(w http.ResponseWriter, r *http.Request) {
	ws, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	c := &gwConn{ws: ws}
	defer ws.Close()
	ws.SetCloseHandler(func(int, string) error { return nil }) // see awaitClientClose
	if err := c.write(map[string]any{"op": opHello, "d": map[string]any{"heartbeat_interval": s.cfg.HeartbeatInterval.Milliseconds()}}); err != nil {
		return
	}
	var current *session
	defer func() {
		if current == nil {
			return
		}
		s.mu.Lock()
		if current.conn == c {
			current.conn = nil
			s.notifyLocked()
		}
		s.mu.Unlock()
	}()
	for {
		var p struct {
			Op   int             `json:"op"`
			Data json.RawMessage `json:"d"`
		}
		if err := ws.ReadJSON(&p); err != nil {
			if _, ok := errors.AsType[*websocket.CloseError](err); ok {
				awaitClientClose(ws)
			}
			return
		}
		switch p.Op {
		case opHeartbeat:
			if err := c.write(map[string]any{"op": opHeartbeatAck}); err != nil {
				return
			}
		case opIdentify:
			var id struct {
				Token   string `json:"token"`
				Intents int    `json:"intents"`
				Shard   []int  `json:"shard"`
			}
			if err := json.Unmarshal(p.Data, &id); err != nil || !s.tokenOK(id.Token) {
				closeWith(c, 4004, "Authentication failed.")
				return
			}
			shard, shards := 0, 1
			if id.Shard != nil {
				if len(id.Shard) != 2 || id.Shard[1] < 1 || id.Shard[0] < 0 || id.Shard[0] >= id.Shard[1] {
					closeWith(c, 4010, "Invalid shard.")
					return
				}
				shard, shards = id.Shard[0], id.Shard[1]
			}
			if shards < s.cfg.Shards {
				closeWith(c, 4011, "Sharding required.")
				return
			}
			current = s.identify(c, id.Intents, shard, shards)
		case opResume:
			var rs struct {
				Token     string `json:"token"`
				SessionID string `json:"session_id"`
				Seq       int    `json:"seq"`
			}
			if err := json.Unmarshal(p.Data, &rs); err != nil || !s.tokenOK(rs.Token) {
				closeWith(c, 4004, "Authentication failed.")
				return
			}
			current = s.resume(c, rs.SessionID, rs.Seq)
			if current == nil {
				if err := c.write(map[string]any{"op": opInvalidSession, "d": false}); err != nil {
					return
				}
			}
		}
	}
}

// awaitClientClose waits, a few seconds at most, for a client that sent a close frame to close
// the connection, instead of echoing the frame and closing it first. discordgo's Close sends
// the frame, then sleeps a second holding its session's lock before it closes the connection;
// its reader, woken meanwhile by an echo or a closed connection, would block on that lock. A
// goroutine blocked on a mutex is not durably blocked, so in a testing/synctest bubble the
// clock would stop and that second never pass.
func awaitClientClose(ws *websocket.Conn) {
	c := ws.NetConn()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, _ = io.Copy(io.Discard, c)
}

func closeWith(c *gwConn, code int, text string) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, text), time.Now().Add(time.Second))
}

func (s *Server) tokenOK(tok string) bool {
	return strings.TrimPrefix(tok, "Bot ") == s.cfg.Token
}

func randomID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (s *Server) identify(c *gwConn, intents, shard, shards int) *session {
	ss := &session{id: randomID(), intents: intents, shard: shard, shards: shards}
	ss.dmu.Lock()
	defer ss.dmu.Unlock()
	s.mu.Lock()
	s.identifies++
	s.shardIdentifies[shard]++
	s.sessions[ss.id] = ss
	ss.conn = c
	var guilds []string // the guilds of this shard
	for _, g := range s.guilds {
		if ss.wants(g) {
			guilds = append(guilds, g)
		}
	}
	s.mu.Unlock()

	var unavailable []any
	for _, g := range guilds {
		unavailable = append(unavailable, map[string]any{"id": g, "unavailable": true})
	}
	s.dispatchLocked(ss, "READY", map[string]any{
		"v": 10, "session_id": ss.id, "resume_gateway_url": s.GatewayURL(),
		"user":        map[string]any{"id": s.cfg.BotID, "username": s.cfg.BotName, "discriminator": "0", "bot": true},
		"application": map[string]any{"id": s.cfg.ApplicationID, "flags": 0},
		"guilds":      nonNilAny(unavailable), "private_channels": []any{},
		"shard": []int{shard, shards},
	})
	if intents&intentGuilds != 0 {
		for _, g := range guilds {
			s.dispatchLocked(ss, "GUILD_CREATE", s.guildJSON(g))
		}
	}
	s.mu.Lock()
	ss.ready = true
	s.notifyLocked()
	s.mu.Unlock()
	return ss
}

func nonNilAny(v []any) []any {
	if v == nil {
		return []any{}
	}
	return v
}

func (s *Server) guildJSON(guildID string) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	channels, threads := []any{}, []any{}
	for _, c := range s.channels {
		if c.GuildID != guildID {
			continue
		}
		if c.Type == ChannelPublicThread {
			threads = append(threads, channelJSON(c))
		} else {
			channels = append(channels, channelJSON(c))
		}
	}
	return map[string]any{"id": guildID, "name": "guild " + guildID, "channels": channels, "threads": threads,
		"roles": []any{}, "members": []any{}, "unavailable": false}
}

func (s *Server) resume(c *gwConn, sessionID string, seq int) *session {
	s.mu.Lock()
	ss, ok := s.sessions[sessionID]
	s.mu.Unlock()
	if !ok {
		return nil
	}
	ss.dmu.Lock()
	defer ss.dmu.Unlock()
	s.mu.Lock()
	s.resumes++
	ss.conn = c
	var missed []gwEvent
	for _, e := range ss.events {
		if e.Seq > seq {
			missed = append(missed, e)
		}
	}
	s.mu.Unlock()
	for _, e := range missed {
		if c.write(e) != nil {
			return ss
		}
	}
	s.dispatchLocked(ss, "RESUMED", map[string]any{})
	s.mu.Lock()
	s.notifyLocked()
	s.mu.Unlock()
	return ss
}

// dispatchLocked numbers an event, keeps it for resume and writes it when connected. ss.dmu is held.
func (s *Server) dispatchLocked(ss *session, typ string, data any) {
	raw, err := json.Marshal(data)
	if err != nil {
		panic(fmt.Sprintf("discord test server: marshal %s: %v", typ, err))
	}
	s.mu.Lock()
	ss.seq++
	e := gwEvent{Op: opDispatch, Seq: ss.seq, Type: typ, Data: raw}
	ss.events = append(ss.events, e)
	conn := ss.conn
	s.mu.Unlock()
	if conn != nil {
		// A failed write means the connection dropped; the event stays for the resume.
		_ = conn.write(e)
	}
}

// ShardOf returns the shard that receives the events of guild guildID when the bot uses
// shards shards: (guild_id >> 22) % shards, as on Discord; "" (a direct message) is shard 0.
func ShardOf(guildID string, shards int) int {
	id, err := strconv.ParseUint(guildID, 10, 64)
	if err != nil || shards <= 1 {
		return 0
	}
	return int((id >> 22) % uint64(shards))
}

// GuildOnShard returns the id of the n-th guild (n from 0) whose events go to shard shard of
// shards, for tests that want a guild on a given shard.
func GuildOnShard(shard, shards, n int) string {
	return strconv.FormatUint(uint64(n*shards+shard+1_000)<<22, 10)
}

// wants reports whether the session receives the events of guild guildID ("" for a DM).
func (ss *session) wants(guildID string) bool {
	return ShardOf(guildID, ss.shards) == ss.shard
}

// dispatch sends an event of guild guildID ("" for a direct message) to every identified
// session of the guild's shard whose intents want it; it returns errNoSession when no session
// has identified yet.
func (s *Server) dispatch(typ string, intents int, guildID string, build func(ss *session) any) error {
	s.mu.Lock()
	var targets []*session
	for _, ss := range s.sessions {
		if ss.intents&intents == intents && ss.wants(guildID) {
			targets = append(targets, ss)
		}
	}
	s.mu.Unlock()
	if len(targets) == 0 {
		return errNoSession
	}
	for _, ss := range targets {
		ss.dmu.Lock()
		s.dispatchLocked(ss, typ, build(ss))
		ss.dmu.Unlock()
	}
	return nil
}

// DropGateway cuts every gateway connection without a close frame, as a network failure
// would. Sessions stay resumable; events dispatched meanwhile are replayed on resume.
func (s *Server) DropGateway() {
	s.mu.Lock()
	var conns []*gwConn
	for _, ss := range s.sessions {
		if ss.conn != nil {
			conns = append(conns, ss.conn)
			ss.conn = nil
		}
	}
	s.notifyLocked()
	s.mu.Unlock()
	for _, c := range conns {
		_ = c.ws.NetConn().Close()
	}
}

// UserMessage is a message a user posts.
type UserMessage struct {
	ChannelID string
	GuildID   string // empty for a DM
	AuthorID  string
	Content   string
	// MentionBot adds the bot to the message's mentions (the content should carry <@botid>).
	MentionBot bool
	// ReplyTo is the id of a message this one replies to.
	ReplyTo     string
	RoleIDs     []string
	Attachments []Attachment
	// Voice makes the message a voice message (FlagVoiceMessage): Post refuses one that is not a
	// single audio/ogg attachment with a duration and a waveform, and no content, as Discord
	// does.
	Voice bool
}

// Post stores a user's message and dispatches MESSAGE_CREATE. Unknown channels are registered
// (a guild text channel when GuildID is set, else a DM channel).
func (s *Server) Post(um UserMessage) (Message, error) {
	s.mu.Lock()
	if _, ok := s.channels[um.ChannelID]; !ok {
		typ := ChannelGuildText
		if um.GuildID == "" {
			typ = ChannelDM
		}
		s.addChannelLocked(Channel{ID: um.ChannelID, GuildID: um.GuildID, Type: typ, Name: "channel-" + um.ChannelID})
	}
	if c := s.channels[um.ChannelID]; c.Archived {
		if c.Locked {
			s.mu.Unlock()
			return Message{}, fmt.Errorf("post message in %s: the thread is archived and locked", um.ChannelID)
		}
		c.Archived = false // a member's message reopens an archived thread that is not locked
	}
	m := &message{Message: Message{ID: s.newIDLocked(), ChannelID: um.ChannelID, GuildID: um.GuildID,
		AuthorID: um.AuthorID, Content: um.Content, ReferenceID: um.ReplyTo, CreatedAt: time.Now()}}
	if um.Voice {
		if len(um.Attachments) != 1 || um.Attachments[0].ContentType != "audio/ogg" || um.Content != "" ||
			um.Attachments[0].DurationSecs <= 0 || um.Attachments[0].Waveform == "" {
			s.mu.Unlock()
			return Message{}, fmt.Errorf("a voice message is one audio/ogg attachment with duration_secs and a waveform, and no content")
		}
		m.Flags |= FlagVoiceMessage
	}
	for _, a := range um.Attachments {
		a.ID = s.newIDLocked()
		a.URL = fmt.Sprintf("%s/attachments/%s/%s/%s", s.url, m.ChannelID, a.ID, a.Filename)
		m.Attachments = append(m.Attachments, a)
	}
	s.computePings(m, nil)
	if um.MentionBot && !slices.Contains(m.MentionUsers, s.cfg.BotID) {
		m.MentionUsers = append(m.MentionUsers, s.cfg.BotID)
	}
	s.storeLocked(m)
	s.notifyLocked()
	full := s.messageJSON(m)
	s.mu.Unlock()

	if um.GuildID != "" {
		full["member"] = map[string]any{"roles": nonNil(um.RoleIDs)}
	}
	need := intentDirectMessages
	if um.GuildID != "" {
		need = intentGuildMessages
	}
	mentioned := slices.Contains(m.MentionUsers, s.cfg.BotID)
	err := s.dispatch("MESSAGE_CREATE", need, um.GuildID, func(ss *session) any {
		// Without the message content intent, guild messages that do not mention the bot arrive
		// without content, embeds or attachments, as on Discord.
		if um.GuildID != "" && !mentioned && ss.intents&intentMessageContent == 0 {
			stripped := make(map[string]any, len(full))
			for k, v := range full {
				stripped[k] = v
			}
			stripped["content"], stripped["attachments"], stripped["embeds"] = "", []any{}, []any{}
			return stripped
		}
		return full
	})
	if err != nil {
		return Message{}, fmt.Errorf("post message in %s: %w", um.ChannelID, err)
	}
	return copyMessage(m.Message), nil
}

// Interaction is an interaction a user started.
type Interaction struct {
	ID, Token string
}

// ClickButton dispatches INTERACTION_CREATE for a button press on a bot message, as the user
// userID (with roles in guild channels).
func (s *Server) ClickButton(messageID, customID, userID string, roleIDs []string) (Interaction, error) {
	s.mu.Lock()
	m, ok := s.messages[messageID]
	if !ok || m.deleted {
		s.mu.Unlock()
		return Interaction{}, fmt.Errorf("click button on %s: unknown message", messageID)
	}
	if !slices.ContainsFunc(m.Buttons, func(b Button) bool { return b.CustomID == customID }) {
		s.mu.Unlock()
		return Interaction{}, fmt.Errorf("click button %q on %s: the message has no such button", customID, messageID)
	}
	it := s.newInteractionLocked(m.ChannelID, m.GuildID)
	it.messageID = messageID
	msgJSON := s.messageJSON(m)
	s.mu.Unlock()
	payload := s.interactionJSON(it, 3, map[string]any{"custom_id": customID, "component_type": 2}, userID, roleIDs)
	payload["message"] = msgJSON
	return Interaction{ID: it.id, Token: it.token}, s.dispatch("INTERACTION_CREATE", 0, m.GuildID, func(*session) any { return payload })
}

// SlashCommand dispatches INTERACTION_CREATE for an application command used in a channel.
func (s *Server) SlashCommand(channelID, guildID, name, userID string, roleIDs []string) (Interaction, error) {
	s.mu.Lock()
	if _, ok := s.channels[channelID]; !ok {
		typ := ChannelGuildText
		if guildID == "" {
			typ = ChannelDM
		}
		s.addChannelLocked(Channel{ID: channelID, GuildID: guildID, Type: typ})
	}
	cmdID := ""
	for _, c := range s.commands {
		if c.Name == name {
			cmdID = c.ID
		}
	}
	if cmdID == "" {
		s.mu.Unlock()
		return Interaction{}, fmt.Errorf("slash command /%s: not registered", name)
	}
	it := s.newInteractionLocked(channelID, guildID)
	s.mu.Unlock()
	payload := s.interactionJSON(it, 2, map[string]any{"id": cmdID, "name": name, "type": 1}, userID, roleIDs)
	return Interaction{ID: it.id, Token: it.token}, s.dispatch("INTERACTION_CREATE", 0, guildID, func(*session) any { return payload })
}

// InteractionResponse returns the message that answers an interaction (its original response),
// and whether there is one.
func (s *Server) InteractionResponse(in Interaction) (Message, bool) {
	s.mu.Lock()
	it, ok := s.interactions[in.Token]
	if !ok || it.originalID == "" {
		s.mu.Unlock()
		return Message{}, false
	}
	id := it.originalID
	s.mu.Unlock()
	return s.Message(id)
}

// Followups returns the follow-up messages the bot sent for an interaction, oldest first.
func (s *Server) Followups(in Interaction) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	it, ok := s.interactions[in.Token]
	if !ok {
		return nil
	}
	var out []Message
	for _, id := range s.order[it.channelID] {
		m := s.messages[id]
		if m.InteractionID == it.id && m.ID != it.originalID {
			out = append(out, m.Message)
		}
	}
	return out
}

// Acknowledged reports whether the bot answered an interaction's callback.
func (s *Server) Acknowledged(in Interaction) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	it, ok := s.interactions[in.Token]
	return ok && it.responded
}

func (s *Server) newInteractionLocked(channelID, guildID string) *interaction {
	it := &interaction{id: s.newIDLocked(), token: "itoken-" + randomID(), channelID: channelID, guildID: guildID, created: time.Now()}
	s.interactions[it.token] = it
	return it
}

func (s *Server) interactionJSON(it *interaction, typ int, data map[string]any, userID string, roleIDs []string) map[string]any {
	user := map[string]any{"id": userID, "username": "user" + userID, "discriminator": "0"}
	out := map[string]any{
		"id": it.id, "application_id": s.cfg.ApplicationID, "type": typ, "data": data, "token": it.token,
		"version": 1, "channel_id": it.channelID, "locale": "en-US",
	}
	if it.guildID != "" {
		out["guild_id"] = it.guildID
		out["member"] = map[string]any{"user": user, "roles": nonNil(roleIDs)}
	} else {
		out["user"] = user
	}
	return out
}
