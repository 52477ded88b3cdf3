package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"relaybot/adapters"
	"relaybot/adapters/discord"
	"relaybot/adapters/telegram"
	"relaybot/agent"
	"relaybot/chat"
	dtk "relaybot/internal/testkit/discord"
	"relaybot/internal/testkit/llm"
	tgkit "relaybot/internal/testkit/telegram"
	"relaybot/provider"
)

// streamResult is what one answer streamed through one platform mode showed its user.
type streamResult struct {
	Mode        string  `json:"mode"`
	Chars       int     `json:"chars"`
	ChunkMillis float64 `json:"chunk_ms"`
	// FirstVisibleMs: the model's first token (the fake model wrote and flushed its first
	// chunk) → the first request that showed text (the web chat: the first event the page
	// read with the bot's text).
	FirstVisibleMs float64 `json:"first_visible_ms"`
	// LongestStallMs: the longest time the visible text stood still while the model produced
	// (the model's first token to the first text counts).
	LongestStallMs float64 `json:"longest_stall_ms"`
	// LongestStallAtMs: when that stall began, from the model's first token.
	LongestStallAtMs float64 `json:"longest_stall_at_ms"`
	// FinalLagMs: the model's last chunk → the final text delivered (Finish returned).
	FinalLagMs float64 `json:"final_lag_ms"`
	// Messages the answer ended in; Requests the sends, edits and drafts it took.
	Messages    int     `json:"messages"`
	Requests    int     `json:"requests"`
	ReqPerSec   float64 `json:"req_per_sec"`
	RateLimited int     `json:"rate_limited"`
}

// streamMain measures the streaming surfaces one answer at a time, in this process: the fake
// model streams an answer through the agent runner (the first words at once, then 8 chunks per
// update) into the real Telegram and Discord adapters talking to the testkit servers, which
// enforce the platforms' budgets with real 429s, and into the web chat, read by a page's event
// stream, all on loopback.
func streamMain(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("loadtest stream", flag.ContinueOnError)
	chars := fs.Int("chars", 9000, "answer length in characters")
	chunkList := fs.String("chunk", "5ms,20ms", "time between model chunks, comma-separated")
	modeList := fs.String("modes", "telegram-drafts,telegram-edits,telegram-rich,telegram-group,web-chat,discord-edits", "platform modes, comma-separated")
	asJSON := fs.Bool("json", false, "print the results as JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *chars < 100 || *chars > 200000 {
		return fmt.Errorf("stream: -chars must be 100..200000, got %d", *chars)
	}
	var results []streamResult
	for _, cs := range strings.Split(*chunkList, ",") {
		every, err := time.ParseDuration(strings.TrimSpace(cs))
		if err != nil || every <= 0 || every > time.Second {
			return fmt.Errorf("stream: -chunk %q: want durations up to 1s", cs)
		}
		for _, mode := range strings.Split(*modeList, ",") {
			res, err := streamOnce(ctx, strings.TrimSpace(mode), *chars, every)
			if err != nil {
				return fmt.Errorf("stream %s at %s per chunk: %w", mode, every, err)
			}
			results = append(results, res)
		}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(results)
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "mode\tchars\tchunk\tfirst text\tlongest stall\tmodel end → final\tmessages\trequests\treq/s\t429s\t")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%d\t%.0f ms\t%.0f ms\t%.0f ms\t%.0f ms\t%d\t%d\t%.2f\t%d\t\n", r.Mode, r.Chars, r.ChunkMillis,
			r.FirstVisibleMs, r.LongestStallMs, r.FinalLagMs, r.Messages, r.Requests, r.ReqPerSec, r.RateLimited)
	}
	return tw.Flush()
}

// answerChunks makes an answer of about chars characters in chunks of one word, with a
// paragraph break every 60 words and a code block in the middle, as models write.
func answerChunks(chars int) []llm.Chunk {
	words := []string{"streaming ", "answers ", "should ", "never ", "stall; ", "the ", "user ", "reads ", "along. "}
	var out []llm.Chunk
	n := 0
	for i := 0; n < chars; i++ {
		w := words[i%len(words)]
		switch {
		case i%60 == 59:
			w += "\n\n"
		case i == 400:
			w = "\n\n```go\nfor i := range parts {\n\tsend(parts[i])\n}\n```\n\n"
		}
		out = append(out, llm.Chunk{Content: w})
		n += len(w)
	}
	return out
}

// streamTarget is one platform mode's reply and what its server saw.
type streamTarget struct {
	reply adapters.Reply
	// visible returns the successful text-showing requests once the final text was delivered.
	visible  func(final string) (times []time.Time, requests, limited int)
	messages func() int
	close    func()
}

func streamOnce(ctx context.Context, mode string, chars int, every time.Duration) (streamResult, error) {
	model := llm.NewServer()
	defer model.Close()
	model.Push(llm.Reply{Chunks: answerChunks(chars), TokenDelay: every})
	var mu sync.Mutex
	var firstToken, modelEnd time.Time
	model.OnStreamed(func(st llm.Streamed) {
		mu.Lock()
		firstToken = st.FirstChunk
		mu.Unlock()
	})
	runner, err := agent.NewRunner([]agent.Model{{Endpoint: provider.Endpoint{Name: "m", BaseURL: model.URL, Model: "m"}}}, agent.Options{FlushChunks: 8})
	if err != nil {
		return streamResult{}, err
	}
	target, err := newStreamTarget(ctx, mode)
	if err != nil {
		return streamResult{}, err
	}
	defer target.close()

	var text string
	emit := func(e agent.Event) {
		c, ok := e.(agent.Chunk)
		if !ok {
			return
		}
		mu.Lock()
		now := time.Now()
		if c.Final {
			modelEnd = now
		}
		text = c.Text
		mu.Unlock()
		target.reply.Update(c.Text)
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	res := runner.Run(rctx, agent.Request{Messages: []chat.Message{{Role: "user", Content: "write"}}, Stream: true}, emit)
	if res.Err != nil {
		return streamResult{}, res.Err
	}
	if err := target.reply.Finish(rctx, text, nil); err != nil {
		return streamResult{}, err
	}
	done := time.Now()
	times, requests, limited := target.visible(text)
	mu.Lock()
	defer mu.Unlock()
	out := streamResult{
		Mode: mode, Chars: len(text), ChunkMillis: ms(every), FinalLagMs: ms(done.Sub(modelEnd)),
		Messages: target.messages(), Requests: requests, RateLimited: limited,
		ReqPerSec: float64(requests) / done.Sub(firstToken).Seconds(),
	}
	last := firstToken
	for i, t := range times {
		if i == 0 {
			out.FirstVisibleMs = ms(t.Sub(firstToken))
		}
		if t.After(modelEnd) {
			break
		}
		out.stall(last, t, firstToken)
		last = t
	}
	out.stall(last, modelEnd, firstToken)
	return out, nil
}

// stall counts the time from one visible update to the next (or the model's end) as a stall.
func (r *streamResult) stall(from, to, firstToken time.Time) {
	if d := ms(to.Sub(from)); d > r.LongestStallMs {
		r.LongestStallMs, r.LongestStallAtMs = d, ms(from.Sub(firstToken))
	}
}

// newStreamTarget starts the platform server and adapter of mode and opens the reply.
func newStreamTarget(ctx context.Context, mode string) (*streamTarget, error) {
	switch mode {
	case "telegram-edits", "telegram-drafts", "telegram-group", "telegram-rich":
		return newTelegramTarget(ctx, mode)
	case "discord-edits":
		return newDiscordTarget(ctx)
	case "web-chat":
		return newWebTarget(ctx)
	}
	return nil, fmt.Errorf("unknown mode %q (telegram-edits, telegram-drafts, telegram-rich, telegram-group, web-chat, discord-edits)", mode)
}

// newTelegramTarget is a reply of the Telegram adapter on the testkit's Telegram: in a private
// chat (by edits, drafts, or drafts ending in a rich message) or in a supergroup.
func newTelegramTarget(ctx context.Context, mode string) (*streamTarget, error) {
	var mu sync.Mutex
	var calls []tgkit.Call
	srv, err := tgkit.New(tgkit.Options{OnCall: func(c tgkit.Call) {
		mu.Lock()
		calls = append(calls, c)
		mu.Unlock()
	}})
	if err != nil {
		return nil, err
	}
	ad, err := telegram.New(telegram.Options{Token: srv.Token(), APIEndpoint: srv.Endpoint(), Stream: true,
		Drafts: mode == "telegram-drafts" || mode == "telegram-rich", Rich: mode == "telegram-rich"})
	if err != nil {
		srv.Close()
		return nil, err
	}
	tc := tgkit.Chat{ID: 4242, Type: "private"}
	if mode == "telegram-group" {
		tc = tgkit.Chat{ID: -4242, Type: "supergroup"}
	}
	srv.Send(tgkit.Inbound{Chat: tc, From: tgkit.User{ID: 4242, FirstName: "Load"}, Text: "write"})
	ref := chat.Ref{Platform: chat.Telegram, ChatID: fmt.Sprint(tc.ID)}
	return &streamTarget{
		reply: ad.Engine().NewReply(ctx, ref, adapters.SendOptions{ReplyTo: "1", Stoppable: true}),
		visible: func(string) ([]time.Time, int, int) {
			mu.Lock()
			defer mu.Unlock()
			var ts []time.Time
			n, limited := 0, 0
			for _, c := range calls {
				switch c.Method {
				case "sendMessage", "editMessageText", "sendMessageDraft", "sendRichMessage", "deleteMessage":
					n++
					if c.Code == 429 {
						limited++
					}
					if c.Code == 200 && c.Method != "deleteMessage" { // a delete shows no new text
						ts = append(ts, c.Time)
					}
				}
			}
			return ts, n, limited
		},
		messages: func() int { return len(srv.BotMessages(tc.ID)) },
		close:    func() { ad.Engine().Close(); srv.Close() },
	}, nil
}

// newDiscordTarget is a reply of the Discord adapter in a DM on the testkit's Discord.
func newDiscordTarget(ctx context.Context) (*streamTarget, error) {
	srv := dtk.New(dtk.Config{})
	ch := "700000000000000001"
	srv.AddChannel(dtk.Channel{ID: ch, Type: dtk.ChannelDM})
	ad, err := discord.New(discord.Options{Token: srv.Token(), APIBase: srv.APIBase()})
	if err != nil {
		srv.Close()
		return nil, err
	}
	ref := chat.Ref{Platform: chat.Discord, ChatID: ch}
	return &streamTarget{
		reply: ad.Engine().NewReply(ctx, ref, adapters.SendOptions{}),
		visible: func(string) ([]time.Time, int, int) {
			var ts []time.Time
			n, limited := 0, 0
			for _, c := range srv.CallsTo(dtk.RouteCreateMessage, dtk.RouteEditMessage) {
				n++
				if c.Status == 429 {
					limited++
				}
				if c.Status == 200 {
					ts = append(ts, c.Time)
				}
			}
			return ts, n, limited
		},
		messages: func() int { return len(srv.BotMessages(ch)) },
		close:    func() { ad.Engine().Close(); srv.Close() },
	}, nil
}
