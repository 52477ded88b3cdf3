package main

import (
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"relaybot/internal/testkit/llm"
	tgkit "relaybot/internal/testkit/telegram"
)

// baseChatID is the id of chat 0; chat i is a private chat with user baseChatID+i (its id is
// the user's), or the supergroup -(baseChatID+i) where that user writes.
const baseChatID = 1_000_000

// Surfaces: how a chat shows an answer in progress. In a private chat the bot streams drafts
// (sendMessageDraft) and sends the final text; in a group, where drafts are refused, it sends a
// message and edits it.
const (
	surfacePrivate = "private"
	surfaceGroup   = "group"
)

// userText is the message chat sends on turn; turnPattern finds chat and turn in the model's
// requests.
func userText(chat, turn int) string {
	return "load c" + strconv.Itoa(chat) + " t" + strconv.Itoa(turn) + ": tell me something"
}

var turnPattern = regexp.MustCompile(`load c(\d+) t(\d+):`)

// chatRun is one simulated chat: the turn in flight and what the fakes saw of it.
type chatRun struct {
	idx     int
	id      int64
	surface string // surfacePrivate or surfaceGroup

	mu        sync.Mutex
	turn      int // the turn in flight, -1 before the first
	active    bool
	sentAt    time.Time
	visible   time.Time // first draft, send or edit of the bot after sentAt showing text
	first     time.Time // first send or edit of the bot after sentAt
	final     time.Time // first send or edit carrying the whole answer
	lastToken time.Time // the model's last token of the turn's last stream
	drafts    int
	edits     int
	sends     int
	late      int // drafts, sends and edits after the final text, before the next message
	done      chan struct{}
	calls     []time.Time // successful sends and edits in this chat, every turn
}

// turnResult is one finished (or abandoned) turn.
type turnResult struct {
	chat, turn                             int
	surface                                string
	sent, visible, first, final, lastToken time.Time
	drafts, edits, sends                   int
	timedOut                               bool
}

// begin starts turn: the returned channel closes when its final text shows in the chat.
func (c *chatRun) begin(turn int, at time.Time) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.turn, c.active, c.sentAt = turn, true, at
	c.visible, c.first, c.final, c.lastToken = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	c.drafts, c.edits, c.sends = 0, 0, 0
	c.done = make(chan struct{})
	return c.done
}

// end closes the turn in flight and returns what was seen of it.
func (c *chatRun) end(timedOut bool) turnResult {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.active = false
	return turnResult{
		chat: c.idx, turn: c.turn, surface: c.surface, sent: c.sentAt, visible: c.visible, first: c.first, final: c.final,
		lastToken: c.lastToken, drafts: c.drafts, edits: c.edits, sends: c.sends, timedOut: timedOut,
	}
}

// recorder hears every call of the fake Telegram and every stream of the fake model.
type recorder struct {
	expect string // the whole answer as the user sees it (trimmed)
	chats  []*chatRun

	http429     atomic.Int64
	notModified atomic.Int64
	failed      atomic.Int64 // other failures of sends and edits (4xx, 5xx)
	late        atomic.Int64
	strays      atomic.Int64 // drafts, sends and edits in no chat of the run
	tokens      atomic.Int64 // delta chunks streamed to the bot
	streams     atomic.Int64 // streams to the bot
	toolReplies atomic.Int64 // streams calling a tool: one audit row each

	globalMu sync.Mutex
	global   []time.Time // successful drafts, sends and edits in every chat
}

// newRecorder makes the recorder of chats chats, each on the surface surfaceOf gives its index.
func newRecorder(chats int, expect string, surfaceOf func(int) string) *recorder {
	r := &recorder{expect: strings.TrimSpace(expect), chats: make([]*chatRun, chats)}
	for i := range r.chats {
		c := &chatRun{idx: i, id: baseChatID + int64(i), surface: surfaceOf(i), turn: -1}
		if c.surface == surfaceGroup {
			c.id = -c.id
		}
		r.chats[i] = c
	}
	return r
}

// chatOf returns the run's chat of a Telegram chat id, or nil.
func (r *recorder) chatOf(id int64) *chatRun {
	i := id - baseChatID
	if id < 0 {
		i = -id - baseChatID
	}
	if i < 0 || i >= int64(len(r.chats)) || r.chats[i].id != id {
		return nil
	}
	return r.chats[i]
}

// counted are the methods Telegram's limits count (drafts on a per-chat budget of their own,
// and in the global one); draft reports whether one of them is a draft, which shows text
// without sending a message.
func counted(method string) (ok, draft bool) {
	switch method {
	case "sendMessage", "editMessageText", "sendPhoto", "sendDocument":
		return true, false
	case "sendMessageDraft", "sendRichMessageDraft":
		return true, true
	}
	return false, false
}

// onCall implements the fake Telegram's OnCall.
func (r *recorder) onCall(call tgkit.Call) {
	ok, draft := counted(call.Method)
	if !ok {
		return
	}
	switch {
	case call.Code == 429:
		r.http429.Add(1)
		return
	case call.Code == 400 && strings.Contains(call.Description, "message is not modified"):
		r.notModified.Add(1)
		return
	case call.Code != 200:
		r.failed.Add(1)
		return
	}
	c := r.chatOf(call.ChatID)
	if c == nil {
		r.strays.Add(1)
		return
	}
	r.globalMu.Lock()
	r.global = append(r.global, call.Time)
	r.globalMu.Unlock()

	c.mu.Lock()
	defer c.mu.Unlock()
	if !draft { // a chat's drafts do not draw on its budget for messages
		c.calls = append(c.calls, call.Time)
	}
	if !c.active || !c.final.IsZero() {
		c.late++
		r.late.Add(1)
		return
	}
	text := strings.TrimSpace(call.Params["text"])
	if c.visible.IsZero() && (text != "" || call.Params["rich_message"] != "") {
		c.visible = call.Time // an empty draft shows "Thinking…", not the answer
	}
	switch {
	case draft:
		c.drafts++
		return // a draft is never the final text: it disappears unless a message persists it
	case call.Method == "editMessageText":
		c.edits++
	default:
		c.sends++
	}
	if c.first.IsZero() {
		c.first = call.Time
	}
	if text == r.expect {
		c.final = call.Time
		close(c.done)
	}
}

// onStreamed implements the fake model's OnStreamed for the bot's streams.
func (r *recorder) onStreamed(s llm.Streamed) {
	chat, turn, ok := turnOf(s.Request)
	if !ok || chat >= len(r.chats) {
		return // a baseline stream
	}
	r.tokens.Add(int64(s.Chunks))
	r.streams.Add(1)
	c := r.chats[chat]
	c.mu.Lock()
	if c.turn == turn && c.active {
		c.lastToken = s.LastChunk
	}
	c.mu.Unlock()
}

// turnOf finds the chat and turn of a request from its last user message.
func turnOf(req llm.Request) (chat, turn int, ok bool) {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		m := req.Messages[i]
		if m.Role != "user" {
			continue
		}
		sub := turnPattern.FindStringSubmatch(m.Content)
		if sub == nil {
			return 0, 0, false
		}
		chat, _ = strconv.Atoi(sub[1])
		turn, _ = strconv.Atoi(sub[2])
		return chat, turn, true
	}
	return 0, 0, false
}

// handler answers the bot from gen (counting the tool calls it makes) and the baseline client
// from plain text. A request of the bot offering no tools (a summary of older rounds, when the
// history is compacted) is answered with plain text too: a tool call there runs no tool and
// leaves no audit row, so counting it made the run report audit rows missing.
func (r *recorder) handler(gen, plain llm.Handler) llm.Handler {
	return func(req llm.Request) llm.Reply {
		if _, _, ok := turnOf(req); !ok || len(req.Tools) == 0 {
			return plain(req)
		}
		rep := gen(req)
		if len(rep.Chunks) > 0 && len(rep.Chunks[0].ToolCalls) > 0 {
			r.toolReplies.Add(1)
		}
		return rep
	}
}

// budgetFree reports whether the final text of a turn could go out at lastToken without waiting
// for Telegram's budget as the bot keeps it: fewer than 3 sends and edits in the chat in the 3 s
// before, fewer than perSecond-1 in all chats in the second before (the bot keeps some slack),
// and no other final text waiting for its slot (pending: turns whose last token came and whose
// final had not shown). Call times must be sorted.
func budgetFree(chatCalls, global []time.Time, lastToken time.Time, pending, perSecond int) bool {
	return pending == 0 &&
		countIn(chatCalls, lastToken.Add(-3*time.Second), lastToken) < 3 &&
		countIn(global, lastToken.Add(-time.Second), lastToken) < perSecond-1
}

// pendingFinals returns, for each turn, how many other turns had their model's last token before
// its own and their final text after it: the finals queued ahead of it.
func pendingFinals(last, final []time.Time) []int {
	ls, fs := sortedTimes(last), sortedTimes(final)
	out := make([]int, len(last))
	for i, t := range last {
		before := sort.Search(len(ls), func(j int) bool { return !ls[j].Before(t) })
		done := sort.Search(len(fs), func(j int) bool { return !fs[j].Before(t) })
		out[i] = max(0, before-done)
	}
	return out
}

// countIn counts the times in sorted ts within (from, to].
func countIn(ts []time.Time, from, to time.Time) int {
	lo := sort.Search(len(ts), func(i int) bool { return ts[i].After(from) })
	hi := sort.Search(len(ts), func(i int) bool { return ts[i].After(to) })
	return hi - lo
}
