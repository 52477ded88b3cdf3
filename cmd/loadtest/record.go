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

// baseChatID is the id of chat 0; chat i is baseChatID+i, a private chat with user baseChatID+i.
const baseChatID = 1_000_000

// userText is the message chat sends on turn; turnPattern finds chat and turn in the model's
// requests.
func userText(chat, turn int) string {
	return "load c" + strconv.Itoa(chat) + " t" + strconv.Itoa(turn) + ": tell me something"
}

var turnPattern = regexp.MustCompile(`load c(\d+) t(\d+):`)

// chatRun is one simulated chat: the turn in flight and what the fakes saw of it.
type chatRun struct {
	idx int
	id  int64

	mu        sync.Mutex
	turn      int // the turn in flight, -1 before the first
	active    bool
	sentAt    time.Time
	first     time.Time // first send or edit of the bot after sentAt
	final     time.Time // first send or edit carrying the whole answer
	lastToken time.Time // the model's last token of the turn's last stream
	edits     int
	sends     int
	late      int // sends and edits after the final text, before the next message
	done      chan struct{}
	calls     []time.Time // successful sends and edits in this chat, every turn
}

// turnResult is one finished (or abandoned) turn.
type turnResult struct {
	chat, turn                    int
	sent, first, final, lastToken time.Time
	edits, sends                  int
	timedOut                      bool
}

// begin starts turn: the returned channel closes when its final text shows in the chat.
func (c *chatRun) begin(turn int, at time.Time) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.turn, c.active, c.sentAt = turn, true, at
	c.first, c.final, c.lastToken = time.Time{}, time.Time{}, time.Time{}
	c.edits, c.sends = 0, 0
	c.done = make(chan struct{})
	return c.done
}

// end closes the turn in flight and returns what was seen of it.
func (c *chatRun) end(timedOut bool) turnResult {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.active = false
	return turnResult{
		chat: c.idx, turn: c.turn, sent: c.sentAt, first: c.first, final: c.final, lastToken: c.lastToken,
		edits: c.edits, sends: c.sends, timedOut: timedOut,
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
	strays      atomic.Int64 // sends and edits in no chat of the run
	tokens      atomic.Int64 // delta chunks streamed to the bot
	streams     atomic.Int64 // streams to the bot
	toolReplies atomic.Int64 // streams calling a tool: one audit row each

	globalMu sync.Mutex
	global   []time.Time // successful sends and edits in every chat
}

func newRecorder(chats int, expect string) *recorder {
	r := &recorder{expect: strings.TrimSpace(expect), chats: make([]*chatRun, chats)}
	for i := range r.chats {
		r.chats[i] = &chatRun{idx: i, id: baseChatID + int64(i), turn: -1}
	}
	return r
}

// counted are the methods Telegram's limits count.
func counted(method string) bool {
	switch method {
	case "sendMessage", "editMessageText", "sendPhoto", "sendDocument":
		return true
	}
	return false
}

// onCall implements the fake Telegram's OnCall.
func (r *recorder) onCall(call tgkit.Call) {
	if !counted(call.Method) {
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
	i := call.ChatID - baseChatID
	if i < 0 || i >= int64(len(r.chats)) {
		r.strays.Add(1)
		return
	}
	r.globalMu.Lock()
	r.global = append(r.global, call.Time)
	r.globalMu.Unlock()

	c := r.chats[i]
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, call.Time)
	if !c.active || !c.final.IsZero() {
		c.late++
		r.late.Add(1)
		return
	}
	if c.first.IsZero() {
		c.first = call.Time
	}
	if call.Method == "editMessageText" {
		c.edits++
	} else {
		c.sends++
	}
	if strings.TrimSpace(call.Params["text"]) == r.expect {
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
