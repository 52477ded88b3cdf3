// Package llm is a fake OpenAI-compatible chat completions API for tests and benchmarks. It
// serves POST /v1/chat/completions (structured output included: a response_format the real API
// would refuse is refused), POST /v1/embeddings (deterministic vectors) and the audio endpoints on a loopback httptest server, streamed (server-sent events,
// "data: {...}" lines ended by "data: [DONE]") or whole, from replies the test scripts: a queue of
// Reply values, or a Handler that decides from the request. It can inject the faults real
// providers show (HTTP errors before the stream, a stream cut without finish_reason, a hang, slow
// tokens) and records every request for assertions.
//
// Reply.Events and Reply.Body send a provider's stream or answer verbatim; Recordings holds the
// shapes of the providers the bot supports (OpenAI, Azure, Gemini, DeepSeek, Groq, Mistral, xAI,
// Ollama, vLLM), written from their API documentation.
//
// Like the real API it rejects (400) a transcript where an assistant message's tool calls are not
// answered by the tool messages that follow it.
package llm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"
)

// Reply scripts the answer to one request.
type Reply struct {
	// Status, when neither 0 nor 200, is answered with an OpenAI-style error body before any
	// stream begins (401, 429, 500, ...). Error is its message.
	Status int
	Error  string
	// Code is the error body's code (OpenAI's "content_policy_violation",
	// "context_length_exceeded", "insufficient_quota", ...); empty sends null, as OpenAI does for
	// most errors. "insufficient_quota" is also the body's type, as OpenAI sends it.
	Code string
	// RetryAfter, when set with a 429, goes out as the Retry-After header (seconds).
	RetryAfter int

	// Chunks are sent one stream event each (the first carries role "assistant"); a non-streamed
	// reply joins them into one message.
	Chunks []Chunk
	// FinishReason is sent in a chunk with an empty delta after Chunks, as OpenAI does. Empty means
	// "tool_calls" when the chunks carry tool calls, else "stop".
	FinishReason string
	// Usage is reported when the request asks for it (stream_options.include_usage, and always for
	// non-streamed replies). Nil estimates it: a token per 4 characters of the request's messages
	// in, a token per chunk out.
	Usage *Usage

	// TokenDelay waits before each chunk (slow tokens).
	TokenDelay time.Duration
	// Cut ends the stream after Chunks with no finish_reason and no [DONE]; a non-streamed reply
	// sends half of its JSON body.
	Cut bool
	// Hang stops after Chunks (before the whole body when not streaming) and waits until the
	// client goes away or the server closes.
	Hang bool

	// Events, when set, replace Chunks, the finish chunk and the usage chunk of a streamed reply:
	// each is sent verbatim as one "data: " event (a provider's recorded stream shape), then
	// "data: [DONE]" unless Cut. Body, when set, is the verbatim JSON of a non-streamed reply.
	Events []string
	Body   string
}

// Chunk is one stream event's delta.
type Chunk struct {
	Content string
	// Reasoning goes out as the reasoning_content field (DeepSeek style); <think> tags in Content
	// are just content.
	Reasoning string
	ToolCalls []ToolCallDelta
	// Wait, when not nil, holds this chunk until the channel is closed (or the client goes away):
	// tests use it to act at a known point of the stream.
	Wait <-chan struct{}
}

// ToolCallDelta is one fragment of a tool call. The first fragment of a call usually carries ID
// and Name; later ones only Index and a piece of Arguments. An empty ID is left out of the wire,
// as Ollama does.
type ToolCallDelta struct {
	Index     int
	ID        string
	Name      string
	Arguments string
}

// Usage is token usage as the API reports it.
type Usage struct {
	PromptTokens     int
	CompletionTokens int
	// CachedTokens is the part of PromptTokens served from the provider's prompt cache
	// (prompt_tokens_details.cached_tokens, sent when not zero); CacheWriteTokens the part written
	// to it (a recording's shape only).
	CachedTokens, CacheWriteTokens int
}

// Handler decides the reply to a request. It may be called from several goroutines at once.
type Handler func(req Request) Reply

// Request is one recorded request.
type Request struct {
	Header http.Header
	Body   []byte
	// The decoded parts of Body.
	Model        string
	Stream       bool
	IncludeUsage bool
	Messages     []Message
	// Tools are the names of the function tools offered.
	Tools      []string
	ToolChoice json.RawMessage
	// ResponseFormat is the request's response_format as sent (nil when none); SchemaName the
	// name of its json_schema, when it asks for structured output.
	ResponseFormat json.RawMessage
	SchemaName     string
}

// Message is a message of a recorded request.
type Message struct {
	// Raw is the message's JSON as the client sent it (fields the decoded parts leave out
	// included).
	Raw              json.RawMessage
	Role             string
	Content          string // the text parts joined
	ImageURLs        []string
	Name             string
	ReasoningContent string
	ToolCallID       string
	ToolCalls        []ToolCall
}

// ToolCall is an assembled tool call of a recorded assistant message.
type ToolCall struct {
	ID        string
	Name      string
	Arguments string
}

// Server is the fake API. Its zero value is not usable; call NewServer.
type Server struct {
	// URL is the API base URL, ending in /v1, to use as a client's base URL.
	URL string

	srv    *httptest.Server
	closed chan struct{}
	once   sync.Once

	mu       sync.Mutex
	handler  Handler
	queue    []Reply
	requests []Request
	streamed func(Streamed)

	audio    AudioHandler
	audioReq []AudioRequest

	embedDims        map[string]int
	embedReq         []EmbeddingRequest
	embedFail        int
	embedFailStatus  int
	rerankReq        []RerankRequest
	rerankFail       int
	rerankFailStatus int
}

// Streamed describes a stream whose scripted chunks were all sent.
type Streamed struct {
	Request Request
	// Chunks is the number of delta chunks sent (content and tool-call fragments), not counting
	// the finish and usage chunks.
	Chunks int
	// FirstChunk is when the first delta chunk was about to be written: the model's first
	// token. LastChunk is when the last one was: the model's last token.
	FirstChunk, LastChunk time.Time
}

// OnStreamed makes f hear of every streamed reply once its last scripted chunk went out (before
// the finish chunk; cut and hanging replies included). The load tool uses it to time the
// model's last token. f runs on the request's goroutine and may be called concurrently.
func (s *Server) OnStreamed(f func(Streamed)) {
	s.mu.Lock()
	s.streamed = f
	s.mu.Unlock()
}

// NewServer starts a fake API that answers from its queue (see Push) until SetHandler is called.
func NewServer() *Server {
	s := &Server{closed: make(chan struct{})}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL + "/v1"
	return s
}

// Close stops the server, releasing hanging replies first.
func (s *Server) Close() {
	s.once.Do(func() { close(s.closed) })
	s.srv.CloseClientConnections()
	s.srv.Close()
}

// Push appends replies to the queue; each request takes the next one. A request that finds the
// queue empty gets a 500 saying so.
func (s *Server) Push(replies ...Reply) {
	s.mu.Lock()
	s.queue = append(s.queue, replies...)
	s.mu.Unlock()
}

// SetHandler makes h decide every following reply, instead of the queue.
func (s *Server) SetHandler(h Handler) {
	s.mu.Lock()
	s.handler = h
	s.mu.Unlock()
}

// Requests returns the requests received so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// RequestCount returns how many requests arrived.
func (s *Server) RequestCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.requests)
}

// Text is a reply streaming each part as one chunk.
func Text(parts ...string) Reply {
	r := Reply{Chunks: make([]Chunk, len(parts))}
	for i, p := range parts {
		r.Chunks[i].Content = p
	}
	return r
}

// Call scripts one tool call for ToolCalls: Args are the argument fragments, one chunk each.
type Call struct {
	ID   string // empty: no id on the wire, as Ollama sends
	Name string
	Args []string
}

// ToolCalls is a reply calling the given tools, call i at index i: its first chunk carries the id,
// the name and the first fragment, each further fragment gets its own chunk.
func ToolCalls(calls ...Call) Reply {
	var r Reply
	for i, c := range calls {
		args := c.Args
		if len(args) == 0 {
			args = []string{""}
		}
		for j, a := range args {
			d := ToolCallDelta{Index: i, Arguments: a}
			if j == 0 {
				d.ID, d.Name = c.ID, c.Name
			}
			r.Chunks = append(r.Chunks, Chunk{ToolCalls: []ToolCallDelta{d}})
		}
	}
	return r
}

// Fault is a reply failing with an HTTP status before any stream.
func Fault(status int, message string) Reply {
	return Reply{Status: status, Error: message}
}

// Refusal is a reply failing as a provider refuses a request it will not take: the HTTP status
// and an OpenAI error body with code (see Reply.Code).
func Refusal(status int, code, message string) Reply {
	return Reply{Status: status, Code: code, Error: message}
}

// ContentPolicyMessage is the message of OpenAI's refusal of content its safety system rejects.
const ContentPolicyMessage = "Your request was rejected as a result of our safety system. Your prompt may contain text that is not allowed by our safety system."

// RefuseContaining is a Handler that refuses, as OpenAI's safety system does (400,
// content_policy_violation), every request one of whose messages contains text, wherever in the
// transcript it is; the other requests get next's reply. A client that sends a refused message
// again in a later request is refused again, as it would be by the real API.
func RefuseContaining(text string, next Handler) Handler {
	return func(req Request) Reply {
		for _, m := range req.Messages {
			if strings.Contains(m.Content, text) {
				return Refusal(http.StatusBadRequest, "content_policy_violation", ContentPolicyMessage)
			}
		}
		return next(req)
	}
}

// serve answers one request: the audio endpoints, or a chat completion with the next reply.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/v1/audio/") {
		s.serveAudio(w, r)
		return
	}
	if r.Method == http.MethodPost && r.URL.Path == "/v1/embeddings" {
		s.serveEmbeddings(w, r)
		return
	}
	if r.Method == http.MethodPost && r.URL.Path == "/v1/rerank" {
		s.serveRerank(w, r)
		return
	}
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		writeError(w, http.StatusNotFound, "invalid_request_error", "unknown endpoint "+r.Method+" "+r.URL.Path)
		return
	}
	req, n, ok := s.readRequest(w, r)
	if !ok {
		return
	}
	reply, ok := s.nextReply(req)
	if !ok {
		writeError(w, http.StatusInternalServerError, "server_error",
			fmt.Sprintf("llm fake: no scripted reply left for request %d", n))
		return
	}
	s.answer(w, r, req, reply, n)
}

// readRequest reads, records and checks a chat completion request; n is its number (from 1).
// A request the real API would refuse is recorded too, and answered 400 here (ok false).
func (s *Server) readRequest(w http.ResponseWriter, r *http.Request) (req Request, n int, ok bool) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "reading body: "+err.Error())
		return Request{}, 0, false
	}
	req, err = decodeRequest(body)
	req.Header = r.Header.Clone()
	req.Body = body

	s.mu.Lock()
	s.requests = append(s.requests, req)
	n = len(s.requests)
	s.mu.Unlock()
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
		return req, n, false
	}
	if err := validTranscript(req.Messages); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
		return req, n, false
	}
	return req, n, true
}

// nextReply asks the handler for req's reply, or takes the next scripted one; ok is false when
// there is no handler and the script has run out.
func (s *Server) nextReply(req Request) (reply Reply, ok bool) {
	s.mu.Lock()
	h := s.handler
	if h == nil && len(s.queue) > 0 {
		reply = s.queue[0]
		s.queue = s.queue[1:]
		ok = true
	}
	s.mu.Unlock()
	if h != nil {
		return h(req), true
	}
	return reply, ok
}

// answer writes reply to request number n: an HTTP error, the reply's verbatim events or body,
// or its chunks streamed or as one completion.
func (s *Server) answer(w http.ResponseWriter, r *http.Request, req Request, reply Reply, n int) {
	if reply.Status != 0 && reply.Status != http.StatusOK {
		if reply.RetryAfter > 0 {
			w.Header().Set("Retry-After", fmt.Sprint(reply.RetryAfter))
		}
		msg := reply.Error
		if msg == "" {
			msg = http.StatusText(reply.Status)
		}
		writeCodedError(w, reply.Status, errorType(reply.Status, reply.Code), reply.Code, msg)
		return
	}
	if reply.Usage == nil {
		reply.Usage = &Usage{PromptTokens: estimateTokens(req.Messages), CompletionTokens: len(reply.Chunks)}
	}
	id := fmt.Sprintf("chatcmpl-fake-%d", n)
	if req.Stream && len(reply.Events) > 0 {
		s.streamEvents(w, r, req, reply)
		return
	}
	if !req.Stream && reply.Body != "" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, reply.Body)
		return
	}
	if req.Stream {
		s.stream(w, r, req, reply, id)
	} else {
		s.whole(w, r, req, reply, id)
	}
}

// wait blocks for d (or on ch when not nil) unless the client goes away or the server closes;
// it reports whether to go on.
func (s *Server) wait(r *http.Request, d time.Duration, ch <-chan struct{}) bool {
	var timer <-chan time.Time
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timer = t.C
	} else if ch == nil {
		return r.Context().Err() == nil
	}
	select {
	case <-timer:
		if ch != nil {
			return s.wait(r, 0, ch)
		}
		return true
	case <-ch:
		return true
	case <-r.Context().Done():
		return false
	case <-s.closed:
		return false
	}
}

func (s *Server) hang(r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-s.closed:
	}
}

func (s *Server) stream(w http.ResponseWriter, r *http.Request, req Request, reply Reply, id string) {
	flusher, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	if flusher != nil {
		flusher.Flush()
	}
	var buf bytes.Buffer
	send := func(c wireChunk) bool {
		c.ID, c.Object, c.Created, c.Model = id, "chat.completion.chunk", created, req.Model
		buf.Reset()
		buf.WriteString("data: ")
		if err := json.NewEncoder(&buf).Encode(c); err != nil {
			panic(fmt.Sprintf("llm fake: encoding chunk: %v", err))
		}
		buf.WriteString("\n")
		if _, err := w.Write(buf.Bytes()); err != nil {
			return false
		}
		if flusher != nil {
			flusher.Flush()
		}
		return true
	}
	var first time.Time
	for i, ch := range reply.Chunks {
		if (reply.TokenDelay > 0 || ch.Wait != nil) && !s.wait(r, reply.TokenDelay, ch.Wait) {
			return
		}
		d := &wireDelta{Content: ch.Content, ReasoningContent: ch.Reasoning}
		if i == 0 {
			d.Role = "assistant"
		}
		for _, tc := range ch.ToolCalls {
			d.ToolCalls = append(d.ToolCalls, wireToolCallDelta(tc))
		}
		if i == 0 {
			first = time.Now() // before the write: a client may read it before Flush returns
		}
		if !send(wireChunk{Choices: []wireChoice{{Delta: d}}}) {
			return
		}
	}
	s.mu.Lock()
	observe := s.streamed
	s.mu.Unlock()
	if observe != nil {
		observe(Streamed{Request: req, Chunks: len(reply.Chunks), FirstChunk: first, LastChunk: time.Now()})
	}
	if reply.Hang {
		s.hang(r)
		return
	}
	if reply.Cut {
		return
	}
	finish := finishReason(reply)
	if !send(wireChunk{Choices: []wireChoice{{Delta: &wireDelta{}, FinishReason: &finish}}}) {
		return
	}
	if req.IncludeUsage {
		if !send(wireChunk{Choices: []wireChoice{}, Usage: wireUsageOf(reply.Usage)}) {
			return
		}
	}
	_, _ = io.WriteString(w, "data: [DONE]\n\n")
	if flusher != nil {
		flusher.Flush()
	}
}

// streamEvents sends a reply's verbatim events.
func (s *Server) streamEvents(w http.ResponseWriter, r *http.Request, req Request, reply Reply) {
	flusher, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	for _, ev := range reply.Events {
		if reply.TokenDelay > 0 && !s.wait(r, reply.TokenDelay, nil) {
			return
		}
		if _, err := io.WriteString(w, "data: "+ev+"\n\n"); err != nil {
			return
		}
		if flusher != nil {
			flusher.Flush()
		}
	}
	s.mu.Lock()
	observe := s.streamed
	s.mu.Unlock()
	if observe != nil {
		observe(Streamed{Request: req, Chunks: len(reply.Events), LastChunk: time.Now()})
	}
	if reply.Hang {
		s.hang(r)
		return
	}
	if reply.Cut {
		return
	}
	_, _ = io.WriteString(w, "data: [DONE]\n\n")
	if flusher != nil {
		flusher.Flush()
	}
}

func (s *Server) whole(w http.ResponseWriter, r *http.Request, req Request, reply Reply, id string) {
	for _, ch := range reply.Chunks {
		if (reply.TokenDelay > 0 || ch.Wait != nil) && !s.wait(r, reply.TokenDelay, ch.Wait) {
			return
		}
	}
	if reply.Hang {
		s.hang(r)
		return
	}
	var content, reasoning strings.Builder
	var calls []wireToolCall
	for _, ch := range reply.Chunks {
		content.WriteString(ch.Content)
		reasoning.WriteString(ch.Reasoning)
		for _, tc := range ch.ToolCalls {
			for len(calls) <= tc.Index {
				calls = append(calls, wireToolCall{Type: "function"})
			}
			c := &calls[tc.Index]
			if c.ID == "" {
				c.ID = tc.ID
			}
			if c.Function.Name == "" {
				c.Function.Name = tc.Name
			}
			c.Function.Arguments += tc.Arguments
		}
	}
	msg := &wireMessage{Role: "assistant", ReasoningContent: reasoning.String(), ToolCalls: calls}
	if content.Len() > 0 || len(calls) == 0 {
		text := content.String()
		msg.Content = &text
	}
	finish := finishReason(reply)
	body, err := json.Marshal(wireChunk{
		ID: id, Object: "chat.completion", Created: created, Model: req.Model,
		Choices: []wireChoice{{Message: msg, FinishReason: &finish}},
		Usage:   wireUsageOf(reply.Usage),
	})
	if err != nil {
		panic(fmt.Sprintf("llm fake: encoding reply: %v", err))
	}
	w.Header().Set("Content-Type", "application/json")
	if reply.Cut {
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(body[:len(body)/2])
		return
	}
	w.Header().Set("Content-Length", fmt.Sprint(len(body)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

func finishReason(reply Reply) string {
	if reply.FinishReason != "" {
		return reply.FinishReason
	}
	for _, ch := range reply.Chunks {
		if len(ch.ToolCalls) > 0 {
			return "tool_calls"
		}
	}
	return "stop"
}

func estimateTokens(msgs []Message) int {
	n := 0
	for _, m := range msgs {
		n += (len(m.Content)+len(m.ReasoningContent)+3)/4 + 1
		for _, tc := range m.ToolCalls {
			n += (len(tc.Name) + len(tc.Arguments) + 3) / 4
		}
	}
	return n
}

func errorType(status int, code string) string {
	if code == "insufficient_quota" {
		return code
	}
	switch status {
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case http.StatusBadRequest, http.StatusNotFound:
		return "invalid_request_error"
	}
	return "server_error"
}

func writeError(w http.ResponseWriter, status int, typ, msg string) {
	writeCodedError(w, status, typ, "", msg)
}

// writeCodedError writes OpenAI's error body: message, type, param and code (null when empty).
func writeCodedError(w http.ResponseWriter, status int, typ, code, msg string) {
	var c any
	if code != "" {
		c = code
	}
	body, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": c}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// validTranscript applies the API's rule that tool calls are answered right after they are made.
func validTranscript(msgs []Message) error {
	if len(msgs) == 0 {
		return fmt.Errorf("messages: must not be empty")
	}
	var open map[string]bool
	for i, m := range msgs {
		if m.Role == "tool" {
			if !open[m.ToolCallID] {
				return fmt.Errorf("messages[%d]: tool message answers tool_call_id %q that no preceding assistant message called", i, m.ToolCallID)
			}
			delete(open, m.ToolCallID)
			continue
		}
		if len(open) > 0 {
			return fmt.Errorf("messages[%d]: an assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'; %d unanswered", i, len(open))
		}
		if m.Role == "assistant" && len(m.ToolCalls) > 0 {
			open = make(map[string]bool, len(m.ToolCalls))
			for _, tc := range m.ToolCalls {
				if tc.ID == "" {
					return fmt.Errorf("messages[%d]: tool call without id", i)
				}
				open[tc.ID] = true
			}
		}
	}
	if len(open) > 0 {
		return fmt.Errorf("messages: an assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'; %d unanswered", len(open))
	}
	return nil
}
