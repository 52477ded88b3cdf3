// Package history is the part of the pipeline that gives each turn its past: the conversation
// a message belongs to (its key), the rounds read from the store within the model's token
// budget, older rounds summarised (compaction) when they grow past it, and the transcript the
// model is sent. It knows nothing of the queue, the turn's delivery or the quotas: the turn
// hands it a meter for the compaction calls.
package history

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"relaybot/adapters"
	"relaybot/agent"
	"relaybot/chat"
	"relaybot/store"
	"relaybot/tools"
)

// History is what a turn of one conversation is given of its past, and what building it cost.
// It holds the conversation's key: whether a group shares the conversation, and so whether user
// messages carry their sender's name for the model, follows from the key alone.
type History struct {
	Key  chat.Key
	Conv store.Conversation
	// Rounds are the finished rounds after the conversation's summary, oldest first.
	Rounds []store.Round
	// Calls are the model calls compaction made (Round 0).
	Calls []chat.ModelCall
	// Compacted reports that a summary replaced older rounds.
	Compacted bool
	// elided counts the tool results sent as an elision note, from the first round sent.
	elided, from int
	// Estimate is the corrected token estimate of the transcript built, tools included.
	Estimate int
	// Meter accounts for compaction's model calls (the turn's meter, its calls made round 0);
	// nil: none.
	Meter agent.Meter
	// BeforeCompact, when set, is handed the rounds compaction is about to summarise, before
	// their words leave the transcript (memory extracts their facts first).
	BeforeCompact func(ctx context.Context, rounds []store.Round)
}

// shared reports whether the members of a group share the conversation (its key names no user).
func (h *History) shared() bool { return h.Key.UserID == "" }

// speaker prefixes a group member's message with their name.
func (h *History) speaker(name, text string) string {
	if !h.shared() || name == "" {
		return text
	}
	return "[" + name + "] " + text
}

// toAgent readies stored history for the model. In a conversation shared by a group, user
// messages carry their sender's name in the text, so the model knows who said what (the name
// field of the API cannot hold arbitrary names). Images are not stored: a message that had some
// says so instead.
func (h *History) toAgent(ms []chat.Message) []chat.Message {
	out := make([]chat.Message, 0, len(ms))
	for _, m := range ms {
		if m.Role == chat.RoleUser {
			m.Content = h.speaker(m.Name, m.Content)
			if n := len(m.Images); n > 0 {
				m.Content = imagesNote(n) + m.Content
			}
		}
		m.Name, m.Images = "", nil
		out = append(out, m)
	}
	return out
}

// summaryInput renders the earlier summary and the first n rounds as text for the summariser,
// within room tokens: the newest messages are kept when they do not all fit, long tool results
// and arguments are cut.
func (h *History) summaryInput(n, room int) string {
	var lines []string
	for _, r := range h.Rounds[:n] {
		for _, m := range r.Messages {
			switch m.Role {
			case store.RoleUser:
				lines = append(lines, "User: "+h.speaker(m.Name, m.Content))
			case store.RoleAssistant:
				if strings.TrimSpace(m.Content) != "" {
					lines = append(lines, "Assistant: "+m.Content)
				}
				for _, c := range m.ToolCalls {
					lines = append(lines, fmt.Sprintf("Assistant called %s(%s)", c.Name, cut(c.Arguments, summaryArgsChars)))
				}
			case store.RoleTool:
				lines = append(lines, fmt.Sprintf("Result of %s: %s", m.Name, cut(m.Content, summaryToolChars)))
			}
		}
	}
	head := ""
	if earlier := h.Conv.Summary; strings.TrimSpace(earlier) != "" {
		head = "Earlier summary:\n" + earlier + "\n\n"
	}
	room -= EstimateText(head)
	start := len(lines)
	for start > 0 && room-EstimateText(lines[start-1])-1 >= 0 {
		room -= EstimateText(lines[start-1]) + 1
		start--
	}
	body := strings.Join(lines[start:], "\n")
	if start > 0 {
		body = fmt.Sprintf("[%d older lines left out]\n", start) + body
	}
	return head + "Conversation:\n" + body
}

// Runner runs the model call that summarises older rounds (agent.Runner).
type Runner interface {
	Run(ctx context.Context, req agent.Request, emit func(agent.Event)) *agent.Result
}

// Store is what the history reads and writes of the database: one query type a field, as
// *store.Database has them. Both are required.
type Store struct {
	Conversations Conversations // *store.ConversationQuery
	Messages      Rounds        // *store.MessageQuery
}

// Conversations keeps the conversations and their summaries.
type Conversations interface {
	Conversation(ctx context.Context, key chat.Key) (store.Conversation, error)
	ResetConversation(ctx context.Context, key chat.Key) (store.Conversation, error)
	// SaveSummary records the summary of the rounds up to throughTurnID.
	SaveSummary(ctx context.Context, conversationID int64, summary string, throughTurnID int64) error
}

// Rounds reads a conversation's finished rounds.
type Rounds interface {
	// Rounds returns the finished rounds after turn afterTurnID, the newest limit of them,
	// oldest first.
	Rounds(ctx context.Context, conversationID, afterTurnID int64, limit int) ([]store.Round, error)
}

// Keeper gives each turn its history: it reads it from the store, keeps it within the model's
// budget (estimating tokens, corrected by what the providers report, and summarising older
// rounds when they grow past CompactAt of it), and converts it for the model. It is safe for
// concurrent use.
type Keeper struct {
	runner  Runner
	store   Store
	opts    Options
	budgets []ModelBudget
	now     func() time.Time
	// usage corrects the token estimate by what providers report.
	usage *usageCorrection
}

// New returns the Keeper of the conversations in st. budgets are the configured models', the
// primary first (empty: one model of DefaultContextWindow); now is the clock (nil: time.Now).
func New(runner Runner, st Store, o Options, budgets []ModelBudget, now func() time.Time) (*Keeper, error) {
	if st.Conversations == nil || st.Messages == nil {
		return nil, fmt.Errorf("history: Store.Conversations and Store.Messages are required")
	}
	if err := o.fill(budgets); err != nil {
		return nil, err
	}
	if now == nil {
		now = time.Now
	}
	return &Keeper{runner: runner, store: st, opts: o, budgets: budgets, now: now, usage: &usageCorrection{}}, nil
}

// Read returns the conversation of key with the rounds after its summary.
func (k *Keeper) Read(ctx context.Context, key chat.Key) (*History, error) {
	conv, err := k.store.Conversations.Conversation(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("conversation %s: %w", key, err)
	}
	return k.Load(ctx, key, conv)
}

// Load returns conversation conv of key with the rounds after its summary, up to
// Options.Rounds.
func (k *Keeper) Load(ctx context.Context, key chat.Key, conv store.Conversation) (*History, error) {
	h := &History{Key: key, Conv: conv}
	if k.opts.Rounds <= 0 {
		return h, nil
	}
	var err error
	if h.Rounds, err = k.store.Messages.Rounds(ctx, conv.ID, conv.SummaryTurnID, k.opts.Rounds); err != nil {
		return nil, fmt.Errorf("history of conversation %d: %w", conv.ID, err)
	}
	return h, nil
}

// ResetIfIdle starts a fresh conversation when h's last round is older than IdleReset.
func (k *Keeper) ResetIfIdle(ctx context.Context, h *History) error {
	idle := k.opts.IdleReset
	if idle <= 0 || len(h.Rounds) == 0 || k.now().Sub(h.Rounds[len(h.Rounds)-1].StartedAt) <= idle {
		return nil
	}
	conv, err := k.store.Conversations.ResetConversation(ctx, h.Key)
	if err != nil {
		return fmt.Errorf("idle reset of conversation %d: %w", h.Conv.ID, err)
	}
	h.Conv, h.Rounds = conv, nil
	return nil
}

// Transcript builds the messages of a turn within the model's budget: the system prompt (with
// the summary of older rounds), the rounds of the history's window (window.go), and the new
// message. When the history passes CompactAt of its room or the rounds cap (or force is set), its
// older rounds are summarised first, down to keepShare of the room (all of them with force).
func (k *Keeper) Transcript(ctx context.Context, h *History, in adapters.Inbound, specs []tools.Spec, force bool, log *slog.Logger) []chat.Message {
	mb := k.Budget(h.Conv.Model)
	b := k.budget(mb, h, in, specs)
	cs := h.costs(b.factor)
	if k.compacts(h, b, cs, force) {
		if err := k.compactFor(ctx, h, b, cs, specs, force, log); err != nil {
			log.Warn("history: history not compacted; older rounds are left out instead", "err", err)
		} else {
			b = k.budget(mb, h, in, specs)
			cs = h.costs(b.factor)
		}
	}
	limit := b.historyLimit()
	var w window
	if k.opts.CompactAt <= 0 || (window{}).cost(cs, len(cs)) > limit {
		w = replay(cs, b.stableRoom(), k.opts.ToolResultShare)
	}
	sel := h.sendWindow(cs, w, limit)
	h.elided, h.from = sel.elided, sel.from
	if sel.from > 0 {
		log.Info("history: older rounds left out to fit the context window", "left_out", sel.from, "window", mb.ContextWindow)
	}
	msgs := make([]chat.Message, 0, len(sel.messages)+2)
	msgs = append(msgs, k.systemMessage(h.Conv))
	msgs = append(msgs, sel.messages...)
	msgs = append(msgs, k.userMessage(h, in))
	h.Estimate = estimateMessages(msgs) + estimateTools(specs)
	return msgs
}

// compacts reports whether h's older rounds are to be summarised before this turn: with force,
// or with compaction on when the rounds pass CompactAt of their room or fill the rounds cap.
func (k *Keeper) compacts(h *History, b budget, cs []roundCost, force bool) bool {
	if force {
		return true
	}
	at := k.opts.CompactAt
	if at <= 0 || len(h.Rounds) == 0 {
		return false
	}
	need := (window{}).cost(cs, len(cs))
	return float64(need) > at*float64(b.historyLimit()) || k.opts.Rounds > 0 && len(h.Rounds) >= k.opts.Rounds
}

// compactFor summarises h's older rounds for a turn: every round with force (the model refused
// the context), else all but the newest that fit keepShare of the room (and half the rounds cap).
func (k *Keeper) compactFor(ctx context.Context, h *History, b budget, cs []roundCost, specs []tools.Spec, force bool, log *slog.Logger) error {
	if force {
		return k.Compact(ctx, h, len(h.Rounds), log)
	}
	keep := newestFitting(cs, int(keepShare*float64(b.historyLimit())))
	if k.opts.Rounds > 0 {
		keep = min(keep, k.opts.Rounds/2)
	}
	return k.compactAtEnd(ctx, h, len(h.Rounds)-keep, specs, b, log)
}

// budget measures what a turn of h spends besides its history.
func (k *Keeper) budget(mb ModelBudget, h *History, in adapters.Inbound, specs []tools.Spec) budget {
	factor := quantised(k.usage.of(mb.Name))
	user := estimateMessage(k.userMessage(h, in))
	fixed := estimateMessage(k.systemMessage(h.Conv)) + user + estimateTools(specs)
	if maxChars := k.opts.ToolResultMaxChars; len(specs) > 0 && maxChars > 0 {
		// Room for one tool result of the turn, at most three quarters of what the answer leaves.
		fixed += min((maxChars+3)/4, (mb.ContextWindow-mb.MaxOutputTokens)*3/4)
	}
	return budget{window: mb.ContextWindow, output: mb.MaxOutputTokens, fixed: int(float64(fixed) * factor),
		user: int(float64(user) * factor), factor: factor}
}

// Budget returns the budget of a model by its configured name; the first configured model's
// when name is empty or unknown.
func (k *Keeper) Budget(name string) ModelBudget {
	models := k.budgets
	for _, mb := range models {
		if mb.Name == name {
			return mb
		}
	}
	if len(models) > 0 {
		return models[0]
	}
	return ModelBudget{ContextWindow: DefaultContextWindow, MaxOutputTokens: DefaultContextWindow / 4}
}

// Compact summarises the first n rounds of h (with the earlier summary) in one model call and
// stores the summary with the conversation; h then holds the rounds after it. The rounds are
// given to the summariser as text, cut to fit its window.
func (k *Keeper) Compact(ctx context.Context, h *History, n int, log *slog.Logger) error {
	if n <= 0 || n > len(h.Rounds) {
		return ErrNothingToCompact
	}
	if h.BeforeCompact != nil {
		h.BeforeCompact(ctx, h.Rounds[:n])
	}
	mb := k.Budget(h.Conv.Model)
	words := max(mb.ContextWindow/16, 100)
	instruction := fmt.Sprintf(summaryInstruction, words)
	room := int(float64(mb.ContextWindow-mb.MaxOutputTokens-EstimateText(instruction)-64) / k.usage.of(mb.Name))
	return k.summarise(ctx, h, n, agent.Request{Model: h.Conv.Model, Estimate: k.Estimate, Messages: []chat.Message{
		{Role: chat.RoleSystem, Content: instruction},
		{Role: chat.RoleUser, Content: h.summaryInput(n, room)},
	}}, log)
}

// compactAtEnd summarises the first n rounds of h as Compact does, but asks for the summary at
// the end of the conversation as the turns send it (its system prompt, tools and rounds, then
// the request), so that the provider's cache serves all of it but the newest round; the summary
// covers every round, the n summarised and the newer ones kept. A conversation the summariser's
// window cannot hold that way is summarised as text (Compact).
func (k *Keeper) compactAtEnd(ctx context.Context, h *History, n int, specs []tools.Spec, b budget, log *slog.Logger) error {
	if n <= 0 || n > len(h.Rounds) {
		return ErrNothingToCompact
	}
	words := max(b.window/16, 100)
	msgs := []chat.Message{k.systemMessage(h.Conv)}
	for _, r := range h.Rounds {
		msgs = append(msgs, h.toAgent(r.Messages)...)
	}
	msgs = append(msgs, chat.Message{Role: chat.RoleUser, Content: fmt.Sprintf(summaryRequest, words)})
	if float64(estimateMessages(msgs)+estimateTools(specs))*b.factor > float64(b.window-b.output) {
		return k.Compact(ctx, h, n, log)
	}
	return k.summarise(ctx, h, n, agent.Request{Model: h.Conv.Model, Estimate: k.Estimate, Messages: msgs,
		Tools: specs, ToolsListedOnly: true}, log)
}

// summarise runs req, whose answer summarises the first n rounds of h, and stores the summary.
func (k *Keeper) summarise(ctx context.Context, h *History, n int, req agent.Request, log *slog.Logger) error {
	if h.Meter != nil {
		req.Meter = h.Meter
	}
	res := k.runner.Run(ctx, req, nil)
	for _, c := range res.LLMCalls {
		c.Round = 0
		h.Calls = append(h.Calls, c)
	}
	if res.Status != chat.StatusOK {
		return fmt.Errorf("summary of %d rounds: %w", n, res.Err)
	}
	summary := ""
	if len(res.Messages) > 0 {
		summary = strings.TrimSpace(res.Messages[len(res.Messages)-1].Content)
	}
	if summary == "" {
		return fmt.Errorf("summary of %d rounds: the model answered with no text", n)
	}
	through := h.Rounds[n-1].TurnID
	if err := k.store.Conversations.SaveSummary(ctx, h.Conv.ID, summary, through); err != nil {
		return err
	}
	h.Conv.Summary, h.Conv.SummaryTurnID = summary, through
	h.Rounds = h.Rounds[n:]
	h.Compacted = true
	log.Info("history: older rounds summarised", "rounds", n, "through_turn", through, "summary_chars", utf8.RuneCountInString(summary))
	return nil
}

// systemMessage is the system prompt of a conversation's turn, the parts that change least
// first, so that the provider's cache serves as much of it as it can: its own prompt (/system)
// or the configured one and the extra text (the skill index), which stay the same from turn to
// turn; the summary of older rounds, which changes when rounds are summarised; the date, which
// changes once a day. What changes every turn goes in the newest message, never here.
func (k *Keeper) systemMessage(conv store.Conversation) chat.Message {
	prompt := k.opts.SystemPrompt
	if strings.TrimSpace(conv.SystemPrompt) != "" {
		prompt = conv.SystemPrompt
	}
	if k.opts.SystemPromptExtra != nil {
		if extra := strings.TrimSpace(k.opts.SystemPromptExtra()); extra != "" {
			prompt = strings.TrimSpace(prompt + "\n\n" + extra)
		}
	}
	stable := strings.TrimSpace(prompt)
	now := k.now().UTC()
	prompt = withSummary(stable, conv.Summary)
	prompt = strings.TrimSpace(prompt + "\n\n" + fmt.Sprintf("Current date: %s (%s), UTC.", now.Format("2006-01-02"), now.Weekday()))
	m := chat.Message{Role: chat.RoleSystem, Content: prompt}
	if strings.HasPrefix(prompt, stable) {
		m.Stable = len(stable)
	}
	return m
}

// userMessage is the new message of a turn of h.
func (k *Keeper) userMessage(h *History, in adapters.Inbound) chat.Message {
	return chat.Message{
		Role:    chat.RoleUser,
		Content: h.speaker(in.UserName, in.Text),
		Images:  k.Images(in),
	}
}

// Images returns the user's images that fit MaxImageBytes.
func (k *Keeper) Images(in adapters.Inbound) []chat.Image {
	var out []chat.Image
	for _, im := range in.Images {
		if limit := k.opts.MaxImageBytes; limit > 0 && len(im.Data) > limit {
			continue
		}
		out = append(out, chat.Image{MIME: im.MIME, Data: im.Data})
	}
	return out
}
