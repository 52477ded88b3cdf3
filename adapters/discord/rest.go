package discord

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/gorilla/websocket"

	"relaybot/adapters"
	"relaybot/adapters/delivery"
	"relaybot/chat"
)

// rest makes the adapter's REST requests that are no message in a chat (lookups, the gateway's
// address, command registration), each through the delivery engine in the bot-wide class:
// Discord counts them against the bot's global limit.
type rest struct {
	session *discordgo.Session
	engine  *delivery.Engine
}

// newSession builds a discordgo session with the adapter's transport and gateway settings.
func newSession(opts Options, rt http.RoundTripper) (*discordgo.Session, error) {
	s, err := discordgo.New("Bot " + opts.Token)
	if err != nil {
		return nil, fmt.Errorf("discord: creating session: %w", err)
	}
	s.Client = &http.Client{Transport: rt}
	// The delivery engine owns retries and rate limits: discordgo must hand 429s and 5xx back.
	s.ShouldRetryOnRateLimit = false
	s.MaxRestRetries = 0
	s.Identify.Intents = discordgo.IntentsGuilds | discordgo.IntentsGuildMessages |
		discordgo.IntentsDirectMessages | discordgo.IntentsMessageContent
	// Reconnecting is Run's job (keepConnected): discordgo's own loop cannot be cancelled and
	// can reopen the gateway after Close. Open still resumes the session (session id and
	// sequence are kept), so events sent meanwhile are replayed.
	s.ShouldReconnectOnError = false
	// Handlers only filter and spawn, so they run in gateway order on the reader goroutine.
	s.SyncEvents = true
	s.Dialer = &websocket.Dialer{Proxy: http.ProxyFromEnvironment, HandshakeTimeout: 15 * time.Second}
	if opts.GatewayDial != nil {
		s.Dialer.Proxy, s.Dialer.NetDialContext = nil, opts.GatewayDial // no proxy between a test and its server
	}
	return s, nil
}

// reqOpts are the per-request options of every REST call the adapter makes, each through the
// delivery engine: the caller's context, marked as paced by the engine (the transport paces
// the requests discordgo makes on its own), no internal retries of 429s or 5xx.
func reqOpts(ctx context.Context) []discordgo.RequestOption {
	return []discordgo.RequestOption{
		discordgo.WithContext(accounted(ctx)),
		discordgo.WithRetryOnRatelimit(false),
		discordgo.WithRestRetries(0),
	}
}

// botWide makes run's one REST request, which Discord counts against the bot's global limit
// though it is no message in a chat, through the delivery engine: paced within this replica's
// share of that limit, at the priority of final messages, its 429s waited out and its temporary
// failures retried. what names the request in its error.
func (r *rest) botWide(ctx context.Context, what string, run func(ctx context.Context) error) error {
	return r.engine.Do(ctx, delivery.Request{Chat: chat.Ref{Platform: chat.Discord}, Class: delivery.ClassBotWide, Kind: delivery.EventLookup,
		Run: func(ctx context.Context) error { return classify(what, run(ctx)) }})
}

// channel looks a channel up over REST.
func (r *rest) channel(ctx context.Context, channelID string) (*discordgo.Channel, error) {
	var c *discordgo.Channel
	err := r.botWide(ctx, "looking up channel "+channelID, func(ctx context.Context) (err error) {
		c, err = r.session.Channel(channelID, reqOpts(ctx)...)
		return err
	})
	return c, err
}

// member looks a guild member up over REST.
func (r *rest) member(ctx context.Context, guildID, userID string) (*discordgo.Member, error) {
	var m *discordgo.Member
	err := r.botWide(ctx, fmt.Sprintf("looking up member %s of guild %s", userID, guildID), func(ctx context.Context) (err error) {
		m, err = r.session.GuildMember(guildID, userID, reqOpts(ctx)...)
		return err
	})
	return m, err
}

// gatewayBot asks for the shard count Discord recommends and the identify concurrency.
func (r *rest) gatewayBot(ctx context.Context) (*discordgo.GatewayBotResponse, error) {
	var gb *discordgo.GatewayBotResponse
	err := r.botWide(ctx, "GET /gateway/bot", func(ctx context.Context) (err error) {
		gb, err = r.session.GatewayBot(reqOpts(ctx)...)
		return err
	})
	return gb, err
}

// registerCommands registers cs as the global application commands of application appID.
func (r *rest) registerCommands(ctx context.Context, appID string, cs adapters.Commands) error {
	return r.botWide(ctx, "registering application commands", func(ctx context.Context) error {
		_, err := r.session.ApplicationCommandBulkOverwrite(appID, "", applicationCommands(cs), reqOpts(ctx)...)
		return err
	})
}

// applicationCommands are the bot's commands as Discord's application commands: each argument an
// optional string option, offering its choices when it has some.
func applicationCommands(cs adapters.Commands) []*discordgo.ApplicationCommand {
	out := make([]*discordgo.ApplicationCommand, 0, len(cs))
	for _, c := range cs {
		ac := &discordgo.ApplicationCommand{Name: c.Name, Description: c.Description()}
		for _, a := range c.Args {
			o := &discordgo.ApplicationCommandOption{Type: discordgo.ApplicationCommandOptionString, Name: a.Name, Description: a.Help}
			for _, ch := range a.Choices {
				o.Choices = append(o.Choices, &discordgo.ApplicationCommandOptionChoice{Name: ch, Value: ch})
			}
			ac.Options = append(ac.Options, o)
		}
		out = append(out, ac)
	}
	return out
}
