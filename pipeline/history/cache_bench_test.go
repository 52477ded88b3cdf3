package history

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"relaybot/adapters"
	"relaybot/agent"
	"relaybot/chat"
	"relaybot/store"
	"relaybot/tools"
)

// The prompt-cache benchmark (issue 41): a long private conversation through a fake provider
// that caches prompt prefixes the way OpenAI documents it. A prompt of 1,024 tokens or more is
// cached; a later prompt is served from the cache up to the longest prefix it shares with an
// earlier one, counted from 1,024 tokens in steps of 128. The provider reads the prompt as it
// renders it: the tools' schemas first, then the messages in order.
const (
	cacheMinTokens  = 1024
	cacheStepTokens = 128
)

// prefixCache is the fake provider's cache: every prompt it was sent, rendered.
type prefixCache struct {
	seen []string
}

// render is a request as the provider reads it: tools, then each message.
func render(specs []tools.Spec, msgs []chat.Message) string {
	var b strings.Builder
	for _, s := range specs {
		j, _ := json.Marshal(struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		}{s.Name, s.Description, s.Parameters})
		b.Write(j)
	}
	for _, m := range msgs {
		j, _ := json.Marshal(struct {
			Role       string          `json:"role"`
			Content    string          `json:"content"`
			ToolCalls  []chat.ToolCall `json:"tool_calls,omitempty"`
			ToolCallID string          `json:"tool_call_id,omitempty"`
		}{string(m.Role), m.Content, m.ToolCalls, m.ToolCallID})
		b.Write(j)
	}
	return b.String()
}

// send takes one prompt and returns its tokens and the part of them served from the cache.
func (c *prefixCache) send(prompt string) (tokens, cached int) {
	tokens = EstimateText(prompt)
	best := 0
	for _, s := range c.seen {
		n := 0
		for n < len(s) && n < len(prompt) && s[n] == prompt[n] {
			n++
		}
		best = max(best, n)
	}
	c.seen = append(c.seen, prompt)
	if t := EstimateText(prompt[:best]); t >= cacheMinTokens {
		cached = cacheMinTokens + (t-cacheMinTokens)/cacheStepTokens*cacheStepTokens
	}
	return tokens, min(cached, tokens)
}

// memConversations is the benchmark's store: one conversation, its rounds in memory.
type memConversations struct {
	conv   store.Conversation
	rounds []store.Round
}

func (m *memConversations) Conversation(context.Context, chat.Key) (store.Conversation, error) {
	return m.conv, nil
}

func (m *memConversations) ResetConversation(context.Context, chat.Key) (store.Conversation, error) {
	return m.conv, nil
}

func (m *memConversations) SaveSummary(_ context.Context, _ int64, summary string, through int64) error {
	m.conv.Summary, m.conv.SummaryTurnID = summary, through
	return nil
}

func (m *memConversations) Rounds(_ context.Context, _ int64, after int64, limit int) ([]store.Round, error) {
	var out []store.Round
	for _, r := range m.rounds {
		if r.TurnID > after {
			out = append(out, r)
		}
	}
	if limit > 0 && len(out) > limit {
		out = out[len(out)-limit:]
	}
	return slices.Clone(out), nil
}

// summariser is the fake provider's answer to a compaction call; it goes through the cache too.
type summariser struct {
	cache *prefixCache
	calls []benchCall
	words int
}

func (s *summariser) Run(_ context.Context, req agent.Request, _ func(agent.Event)) *agent.Result {
	tokens, cached := s.cache.send(render(req.Tools, req.Messages))
	s.calls = append(s.calls, benchCall{tokens: tokens, cached: cached})
	text := strings.Repeat("The user and the assistant discussed the weather stations and their readings. ", s.words/12+1)
	return &agent.Result{Status: chat.StatusOK, Messages: []chat.Message{{Role: chat.RoleAssistant, Content: text}},
		LLMCalls: []chat.ModelCall{{Model: "bench", Round: 1, Status: chat.StatusOK, TokensIn: tokens, CachedIn: cached}}}
}

// benchCall is one model call's prompt: its tokens and the part served from the cache.
type benchCall struct{ tokens, cached int }

// benchTurn is one turn's calls (a summary call first when the turn compacted).
type benchTurn struct {
	calls     []benchCall
	compacted bool // a summary replaced older rounds in this turn
	leftOut   int  // rounds of the conversation not sent (dropped or summarised)
}

func (t benchTurn) share() float64 {
	tokens, cached := 0, 0
	for _, c := range t.calls {
		tokens += c.tokens
		cached += c.cached
	}
	return float64(cached) / float64(max(tokens, 1))
}

// words is deterministic filler text of about n characters.
func words(rng *rand.Rand, n int) string {
	vocab := strings.Fields("station reading pressure humidity wind north valley river sensor battery morning evening " +
		"forecast rain cloud sunny report average minimum maximum change trend week hour logger field calibrate")
	var b strings.Builder
	for b.Len() < n {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(vocab[rng.IntN(len(vocab))])
	}
	return b.String()
}

// benchSpecs are six tools whose schemas weigh about what a bot's native tools do.
func benchSpecs() []tools.Spec {
	var out []tools.Spec
	for i, name := range []string{"weather_station", "fetch_url", "current_time", "search_notes", "convert_units", "plot_series"} {
		rng := rand.New(rand.NewPCG(uint64(i), 7))
		params := fmt.Sprintf(`{"type":"object","properties":{"query":{"type":"string","description":%q},"limit":{"type":"integer","description":%q}},"required":["query"]}`,
			words(rng, 300), words(rng, 120))
		out = append(out, tools.Spec{Name: name, Description: words(rng, 500), Parameters: json.RawMessage(params)})
	}
	return out
}

// cacheBenchConfig is one run of the conversation.
type cacheBenchConfig struct {
	turns     int
	window    int
	output    int
	compactAt float64 // negative: no compaction, older rounds left out
}

// runCacheBench plays turns turns: every second one calls a tool whose result is about 1,500
// characters (two model calls: the call, then the answer after its result).
func runCacheBench(t testing.TB, cfg cacheBenchConfig) []benchTurn {
	ctx := context.Background()
	cache := &prefixCache{}
	st := &memConversations{conv: store.Conversation{ID: 1, Platform: "telegram", ChatID: "42", UserID: "42", Active: true}}
	sum := &summariser{cache: cache, words: max(cfg.window/16, 100)}
	day := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	k, err := New(sum, Store{Conversations: st, Messages: st}, Options{
		SystemPrompt:       "You are the assistant of a weather-station club. " + words(rand.New(rand.NewPCG(1, 1)), 1200),
		Rounds:             100,
		CompactAt:          cfg.compactAt,
		ToolResultMaxChars: 20000,
	}, []ModelBudget{{Name: "bench", ContextWindow: cfg.window, MaxOutputTokens: cfg.output}}, func() time.Time { return day })
	if err != nil {
		t.Fatal(err)
	}
	specs := benchSpecs()
	rng := rand.New(rand.NewPCG(41, 41))
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	var out []benchTurn
	for i := range cfg.turns {
		key := chat.Key{Platform: chat.Telegram, ChatID: "42", UserID: "42"}
		h, err := k.Read(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		sum.calls = nil
		in := adapters.Inbound{Chat: chat.Ref{Platform: chat.Telegram, ChatID: "42"}, Kind: adapters.Private, UserID: "42", Text: words(rng, 60+rng.IntN(140))}
		msgs := k.Transcript(ctx, h, in, specs, false, log)
		turn := benchTurn{calls: sum.calls, compacted: h.Compacted}
		tokens, cached := cache.send(render(specs, msgs))
		turn.calls = append(turn.calls, benchCall{tokens, cached})
		k.Observe([]chat.ModelCall{{Model: "bench", Round: 1, Status: chat.StatusOK, TokensIn: tokens}}, h.Estimate)
		round := []chat.Message{{Role: chat.RoleUser, Content: in.Text}}
		if i%2 == 1 {
			id := fmt.Sprintf("call_%d", i)
			call := chat.Message{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: id, Name: "weather_station", Arguments: `{"query":"` + words(rng, 30) + `"}`}}}
			result := chat.Message{Role: chat.RoleTool, ToolCallID: id, Name: "weather_station", Content: words(rng, 1500)}
			tokens, cached := cache.send(render(specs, append(slices.Clone(msgs), call, result)))
			turn.calls = append(turn.calls, benchCall{tokens, cached})
			round = append(round, call, result)
		}
		round = append(round, chat.Message{Role: chat.RoleAssistant, Content: words(rng, 250+rng.IntN(350))})
		st.rounds = append(st.rounds, store.Round{TurnID: int64(i + 1), StartedAt: day, Messages: round})
		turn.leftOut = i - len(h.Rounds) + h.from
		out = append(out, turn)
	}
	return out
}

// cacheFigures are what the benchmark reports of one run.
type cacheFigures struct {
	share          float64 // of every prompt token, summary calls included
	firstCompacted int     // index of the first turn that compacted or left rounds out; -1 none
	worstAfter     float64 // the lowest share of a turn after it, cut turns excepted
	worstTurn      int
	costRatio      map[float64]float64 // input cost with the cache / without, by cached price
	ttft, ttftCold time.Duration       // modelled mean time to first token, with and without the cache
}

// TTFT model: a fixed 150 ms, then the prompt read at 4,000 tokens a second, cached tokens ten
// times faster.
func modelledTTFT(tokens, cached int) time.Duration {
	ms := 150 + float64(tokens-cached)/4.0 + float64(cached)/40.0
	return time.Duration(ms * float64(time.Millisecond))
}

func figures(turns []benchTurn) cacheFigures {
	f := cacheFigures{firstCompacted: -1, worstAfter: 1, worstTurn: -1, costRatio: map[float64]float64{}}
	tokens, cached, calls := 0, 0, 0
	var ttft, cold time.Duration
	prevLeftOut := 0
	for i, t := range turns {
		for _, c := range t.calls {
			tokens += c.tokens
			cached += c.cached
			calls++
			ttft += modelledTTFT(c.tokens, c.cached)
			cold += modelledTTFT(c.tokens, 0)
		}
		cut := t.compacted || t.leftOut != prevLeftOut
		prevLeftOut = t.leftOut
		if cut && f.firstCompacted < 0 {
			f.firstCompacted = i
		}
		if f.firstCompacted >= 0 && !cut && t.share() < f.worstAfter {
			f.worstAfter, f.worstTurn = t.share(), i
		}
	}
	f.share = float64(cached) / float64(tokens)
	for _, p := range []float64{0.1, 0.25, 0.5} {
		f.costRatio[p] = (float64(tokens-cached) + p*float64(cached)) / float64(tokens)
	}
	f.ttft, f.ttftCold = ttft/time.Duration(calls), cold/time.Duration(calls)
	return f
}

// benchConfigs: a window small enough that a 60-turn conversation is compacted (or, with
// compaction off, has older rounds left out) several times.
var benchConfigs = []struct {
	name string
	cfg  cacheBenchConfig
}{
	{"compaction", cacheBenchConfig{turns: 60, window: 16000, output: 2000, compactAt: DefaultCompactAt}},
	{"left_out", cacheBenchConfig{turns: 60, window: 16000, output: 2000, compactAt: -1}},
}

// BenchmarkPromptCache reports the share of prompt tokens the fake provider served from its
// cache over the conversation, the input cost relative to no cache at a cached price of a tenth,
// a quarter and a half, and the modelled time to first token.
//
//	go test ./pipeline/history -run '^$' -bench PromptCache -benchtime 1x -v
func BenchmarkPromptCache(b *testing.B) {
	for _, bc := range benchConfigs {
		b.Run(bc.name, func(b *testing.B) {
			var turns []benchTurn
			for range b.N {
				turns = runCacheBench(b, bc.cfg)
			}
			f := figures(turns)
			b.ReportMetric(f.share*100, "%cached")
			b.ReportMetric(f.worstAfter*100, "%worst_turn_after_first_cut")
			b.ReportMetric(f.costRatio[0.1]*100, "%input_cost@0.1")
			b.ReportMetric(f.costRatio[0.25]*100, "%input_cost@0.25")
			b.ReportMetric(f.costRatio[0.5]*100, "%input_cost@0.5")
			b.ReportMetric(float64(f.ttft.Milliseconds()), "ttft_ms")
			b.ReportMetric(float64(f.ttftCold.Milliseconds()), "ttft_nocache_ms")
			if testing.Verbose() {
				for i, t := range turns {
					b.Logf("turn %2d: %5.1f%% cached of %6d tokens, %d calls, compacted %v, left out %d", i+1, t.share()*100, sumTokens(t), len(t.calls), t.compacted, t.leftOut)
				}
			}
		})
	}
}

func sumTokens(t benchTurn) int {
	n := 0
	for _, c := range t.calls {
		n += c.tokens
	}
	return n
}

// The goal of issue 41, held on every change: over a 60-turn conversation that is compacted (or
// has rounds left out) several times, at least 90% of the prompt tokens are served from the
// provider's cache, and no turn after the first cut gets less than half of its prompt from it,
// except a turn that cuts a block.
func TestALongConversationIsServedFromThePromptCache(t *testing.T) {
	for _, bc := range benchConfigs {
		t.Run(bc.name, func(t *testing.T) {
			turns := runCacheBench(t, bc.cfg)
			f := figures(turns)
			if f.firstCompacted < 0 {
				t.Fatalf("the conversation was never compacted nor cut: the window is too large to test anything")
			}
			if f.share < 0.9 {
				t.Errorf("%.1f%% of the prompt tokens were served from the cache, want at least 90%%", f.share*100)
			}
			if f.worstAfter < 0.5 {
				t.Errorf("turn %d got %.1f%% of its prompt from the cache, want at least 50%% after the first cut", f.worstTurn+1, f.worstAfter*100)
			}
		})
	}
}
