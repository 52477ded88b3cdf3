package llm

import (
	"strconv"
	"sync"
	"time"
)

// Generate configures Generator, the scripted model of load tests and benchmarks.
type Generate struct {
	// Tokens is the number of content chunks of each text answer (default 100).
	Tokens int
	// Token is the content of each chunk (default "tok ").
	Token string
	// Rate is the tokens per second a reply streams at; 0 streams as fast as possible.
	Rate float64
	// ToolShare is the share of turns, 0 to 1, whose first answer calls ToolName instead of
	// answering; the answer after the tool result is text. A turn is a request whose last message
	// is not a tool message. Turns are picked evenly, not at random (0.25: every fourth turn).
	ToolShare float64
	// ToolName and ToolArgs make the call (default "echo" and `{"text":"hi"}`).
	ToolName string
	ToolArgs string
}

// Generator returns a Handler answering every request from g. It is safe for concurrent use.
func Generator(g Generate) Handler {
	if g.Tokens <= 0 {
		g.Tokens = 100
	}
	if g.Token == "" {
		g.Token = "tok "
	}
	if g.ToolName == "" {
		g.ToolName = "echo"
	}
	if g.ToolArgs == "" {
		g.ToolArgs = `{"text":"hi"}`
	}
	var delay time.Duration
	if g.Rate > 0 {
		delay = time.Duration(float64(time.Second) / g.Rate)
	}
	text := Reply{Chunks: make([]Chunk, g.Tokens), TokenDelay: delay}
	for i := range text.Chunks {
		text.Chunks[i].Content = g.Token
	}
	var (
		mu    sync.Mutex
		turns int
	)
	return func(req Request) Reply {
		if n := len(req.Messages); g.ToolShare <= 0 || (n > 0 && req.Messages[n-1].Role == "tool") {
			return text
		}
		mu.Lock()
		t := turns
		turns++
		mu.Unlock()
		// Turn t calls the tool when the running count of tool turns steps up at t.
		if int(float64(t+1)*g.ToolShare) == int(float64(t)*g.ToolShare) {
			return text
		}
		r := ToolCalls(Call{ID: "call_gen_" + strconv.Itoa(t), Name: g.ToolName, Args: []string{g.ToolArgs}})
		r.TokenDelay = delay
		return r
	}
}
