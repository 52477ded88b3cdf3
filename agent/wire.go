package agent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	openai "github.com/sashabaranov/go-openai"
)

// The runner talks to every provider through go-openai, whose types know OpenAI's wire shapes
// only. wireTransport sits between go-openai and the network and closes the gap both ways:
//
//   - Answers (a streamed chunk, or a whole completion) are rewritten into shapes go-openai
//     decodes: a content given as an array of typed parts (Mistral) becomes its text, a reasoning
//     field named "reasoning" (Groq, Ollama) becomes reasoning_content. Fields go-openai would drop
//     (unknown fields of the assistant message and of each tool call, such as Gemini's
//     extra_content.google.thought_signature) are captured raw for the call that asked.
//   - Requests get the captured fields back: the runner hands the transport, per call, the raw
//     fields of each assistant message and tool call of the transcript, and the transport merges
//     them into the JSON body go-openai wrote, unchanged.
//
// The per-call data travels in the request's context (wireCall), since go-openai builds the
// request itself and passes the caller's context down.
type wireTransport struct {
	base http.RoundTripper
}

// wireCall is the per-call state the runner shares with the transport: what to add to the
// request, and what the answer carried beyond go-openai's types. The answer's body is read by
// go-openai on the runner's goroutine, so the captured fields need no lock.
type wireCall struct {
	// send[i] holds the raw fields of the i-th message of the request.
	send []wireExtras
	// got collects the unknown fields of choice 0's assistant message and tool calls.
	got wireExtras
	// gotReasoningContent records that choice 0 carried reasoning in a reasoning_content field
	// (not Groq's "reasoning", Mistral's thinking parts or <think> tags).
	gotReasoningContent bool
	// stream is the streamed answer's normaliser, which the runner reads chunks from (next)
	// instead of go-openai's stream reader; nil when the answer is not an event stream.
	stream *sseNormaliser
	// breakpoints are the messages of the request that get a cache_control breakpoint (the
	// models configured for them only); nil: none.
	breakpoints []breakpoint
	// cache is what the answer's usage said of the provider's prompt cache in fields go-openai
	// does not decode (DeepSeek's, Anthropic-compatible gateways', OpenRouter's cache writes).
	cache cacheReport
}

// wireExtras are the raw fields of one assistant message beyond the ones the runner models.
type wireExtras struct {
	// Message is a JSON object of the message's unknown fields; nil when none.
	Message json.RawMessage
	// Calls maps a tool call to a JSON object of its unknown fields. Keys are "id:"+the call's id,
	// or "index:"+its index when the provider sent no id.
	Calls map[string]json.RawMessage
}

func (e *wireExtras) empty() bool { return len(e.Message) == 0 && len(e.Calls) == 0 }

// callKey is the key of wireExtras.Calls for a call.
func callKey(id string, index int) string {
	if id != "" {
		return "id:" + id
	}
	return "index:" + strconv.Itoa(index)
}

type wireCallKey struct{}

func withWireCall(ctx context.Context, wc *wireCall) context.Context {
	return context.WithValue(ctx, wireCallKey{}, wc)
}

// Fields of an assistant message (and of a stream delta) that go-openai decodes or that carry no
// state a provider needs back; everything else is kept raw.
var knownMessageFields = map[string]bool{
	"role": true, "content": true, "reasoning_content": true, "reasoning": true, "tool_calls": true,
	"refusal": true, "function_call": true, "name": true, "audio": true, "annotations": true,
	"tool_call_id": true,
}

// Fields of a tool call go-openai decodes.
var knownCallFields = map[string]bool{"index": true, "id": true, "type": true, "function": true}

// RoundTrip adds the call's raw fields to the request and normalises the answer.
func (t *wireTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	wc, _ := req.Context().Value(wireCallKey{}).(*wireCall)
	if wc == nil {
		return t.base.RoundTrip(req)
	}
	if (hasExtras(wc.send) || len(wc.breakpoints) > 0) && req.Body != nil {
		body, err := io.ReadAll(req.Body)
		_ = req.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("reading the request body: %w", err)
		}
		if patched, err := addExtras(body, wc.send, wc.breakpoints); err == nil {
			body = patched
		}
		req = req.Clone(req.Context())
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.ContentLength = int64(len(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch mt {
	case "text/event-stream":
		wc.stream = &sseNormaliser{src: resp.Body, r: bufio.NewReaderSize(resp.Body, sseLineBuffer), wc: wc}
		resp.Body = wc.stream
	case "application/json":
		body, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("reading the answer: %w", err)
		}
		if n, ok := normaliseObject(body, "message", wc); ok {
			body = n
		}
		resp.Body = io.NopCloser(bytes.NewReader(body))
		resp.ContentLength = int64(len(body))
		resp.Header.Del("Content-Length")
	}
	return resp, nil
}

func hasExtras(send []wireExtras) bool {
	for i := range send {
		if !send[i].empty() {
			return true
		}
	}
	return false
}

// addExtras merges the raw fields into the messages of a chat completions request body (a field
// go-openai already wrote is left as it is) and marks the cache breakpoints.
func addExtras(body []byte, send []wireExtras, marks []breakpoint) ([]byte, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return nil, err
	}
	var msgs []map[string]json.RawMessage
	if err := json.Unmarshal(top["messages"], &msgs); err != nil {
		return nil, err
	}
	for _, b := range marks {
		if b.index < len(msgs) {
			if err := markBreakpoint(msgs[b.index], b.split); err != nil {
				return nil, err
			}
		}
	}
	for i := range msgs {
		if i >= len(send) || send[i].empty() {
			continue
		}
		if err := mergeFields(msgs[i], send[i].Message); err != nil {
			return nil, err
		}
		if len(send[i].Calls) == 0 || len(msgs[i]["tool_calls"]) == 0 {
			continue
		}
		var calls []map[string]json.RawMessage
		if err := json.Unmarshal(msgs[i]["tool_calls"], &calls); err != nil {
			return nil, err
		}
		for j, c := range calls {
			var id string
			_ = json.Unmarshal(c["id"], &id)
			if err := mergeFields(c, send[i].Calls[callKey(id, j)]); err != nil {
				return nil, err
			}
		}
		raw, err := json.Marshal(calls)
		if err != nil {
			return nil, err
		}
		msgs[i]["tool_calls"] = raw
	}
	raw, err := json.Marshal(msgs)
	if err != nil {
		return nil, err
	}
	top["messages"] = raw
	return json.Marshal(top)
}

// mergeFields adds the fields of the JSON object extra to dst, keeping dst's own.
func mergeFields(dst map[string]json.RawMessage, extra json.RawMessage) error {
	if len(extra) == 0 {
		return nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(extra, &fields); err != nil {
		return err
	}
	for k, v := range fields {
		if _, ok := dst[k]; !ok {
			dst[k] = v
		}
	}
	return nil
}

// sseLineBuffer is the normaliser's read buffer: a chunk's line is a few hundred bytes (a longer
// one is put together from several reads), so a larger one only costs memory for every stream in
// flight.
const sseLineBuffer = 512

// sseNormaliser rewrites a server-sent event stream line by line: each "data:" line holding a
// JSON chunk is normalised, everything else passes unchanged. The runner reads its chunks
// straight from it (next); Read serves go-openai's own reader when the runner uses that.
type sseNormaliser struct {
	src io.Closer
	r   *bufio.Reader
	wc  *wireCall
	buf []byte // normalised bytes not yet read
	err error
	// errText collects the lines that are not events, as go-openai's error accumulator does: a
	// provider's error sent into the stream as plain JSON.
	errText []byte
	done    bool // [DONE] was read
	dec     chunkDecoder
}

func (s *sseNormaliser) Read(p []byte) (int, error) {
	for len(s.buf) == 0 {
		if s.err != nil {
			return 0, s.err
		}
		var line []byte
		line, s.err = s.readLine()
		s.buf = s.normaliseLine(line)
	}
	n := copy(p, s.buf)
	s.buf = s.buf[n:]
	return n, nil
}

// readLine reads the next line with its newline. ReadSlice hands out the reader's own buffer,
// which stays untouched until the next read, so a line is copied only when it is longer than
// the buffer.
func (s *sseNormaliser) readLine() ([]byte, error) {
	line, err := s.r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		full := append([]byte(nil), line...)
		for errors.Is(err, bufio.ErrBufferFull) {
			line, err = s.r.ReadSlice('\n')
			full = append(full, line...)
		}
		line = full
	}
	return line, err
}

func (s *sseNormaliser) Close() error { return s.src.Close() }

func (s *sseNormaliser) normaliseLine(line []byte) []byte {
	rest, ok := bytes.CutPrefix(line, []byte("data:"))
	if !ok {
		return line
	}
	n, changed := s.normalisePayload(bytes.TrimSpace(rest))
	if !changed {
		return line
	}
	out := make([]byte, 0, len(n)+8)
	out = append(out, "data: "...)
	out = append(out, n...)
	return append(out, '\n')
}

// normalisePayload normalises the JSON of one event; false when it is left as it is.
func (s *sseNormaliser) normalisePayload(payload []byte) ([]byte, bool) {
	if len(payload) == 0 || payload[0] != '{' || plainChunk(payload) {
		return nil, false
	}
	return normaliseObject(payload, "delta", s.wc)
}

// streamEmptyLimit is go-openai's default EmptyMessagesLimit: the lines other than events
// (blank lines, comments, event names) a stream may send in a row before it is given up.
const streamEmptyLimit = 300

// errStreamErrorUnreadable: the stream sent an error event that is not an OpenAI error object.
var errStreamErrorUnreadable = errors.New("the stream sent an error that could not be read")

// next reads the stream's next chunk into resp, as go-openai's stream reader (Recv) reads it,
// with the same errors: io.EOF after [DONE] (or at the end of the stream), a provider's error
// event or plain JSON error as "error, " and its *openai.APIError, and
// openai.ErrTooManyEmptyStreamMessages. It reads the lines in place, where go-openai copies
// each line twice and runs two regular expressions on it: the model client's cost per chunk is
// then little more than decoding the chunk's JSON, which the lean decoder does where it can
// vouch for giving what json.Unmarshal gives. resp must be the zero value; its Choices are
// valid until the next call.
func (s *sseNormaliser) next(resp *openai.ChatCompletionStreamResponse) error {
	var empty int
	for {
		if s.done {
			return io.EOF
		}
		line, err := s.readLine()
		if err != nil {
			return s.streamErr(err)
		}
		line = bytes.TrimSpace(line)
		payload, isData := bytes.CutPrefix(line, []byte("data:"))
		payload = bytes.TrimLeft(payload, " \t\r\n")
		if isData && bytes.HasPrefix(payload, []byte(`{"error":`)) {
			s.keepErrText(payload)
			return s.streamErr(nil)
		}
		if !isData {
			s.keepErrText(line)
			if empty++; empty > streamEmptyLimit {
				return openai.ErrTooManyEmptyStreamMessages
			}
			continue
		}
		if string(payload) == "[DONE]" {
			s.done = true
			return io.EOF
		}
		if n, changed := s.normalisePayload(payload); changed {
			payload = n
		}
		if s.dec.decode(payload, resp) {
			return nil
		}
		return json.Unmarshal(payload, resp)
	}
}

// maxStreamErrText bounds the error text kept of a stream.
const maxStreamErrText = 64 << 10

func (s *sseNormaliser) keepErrText(b []byte) {
	if len(s.errText)+len(b) <= maxStreamErrText {
		s.errText = append(s.errText, b...)
	}
}

// streamErr is the error that ends the stream: the provider's error it sent, if any, else
// readErr.
func (s *sseNormaliser) streamErr(readErr error) error {
	if len(s.errText) > 0 {
		var e openai.ErrorResponse
		if json.Unmarshal(s.errText, &e) == nil && e.Error != nil {
			return fmt.Errorf("error, %w", e.Error)
		}
	}
	if readErr == nil {
		return errStreamErrorUnreadable
	}
	return readErr
}

// normaliseObject rewrites a chunk (field "delta") or a whole completion (field "message") into
// the shape go-openai decodes, and captures choice 0's unknown fields into wc. It reports whether
// the JSON changed; a body it cannot read is left to go-openai.
func normaliseObject(body []byte, field string, wc *wireCall) ([]byte, bool) {
	// One typed pass finds the messages; the whole object is rebuilt only when one changed,
	// which most chunks of most providers never need.
	var obj struct {
		Choices []struct {
			Index   int                        `json:"index"`
			Delta   map[string]json.RawMessage `json:"delta"`
			Message map[string]json.RawMessage `json:"message"`
		} `json:"choices"`
		Usage json.RawMessage `json:"usage"`
	}
	if err := json.Unmarshal(body, &obj); err != nil {
		return nil, false
	}
	if !isNull(obj.Usage) {
		wc.cache.take(obj.Usage)
	}
	if len(obj.Choices) == 0 {
		return nil, false
	}
	changed := make([]map[string]json.RawMessage, len(obj.Choices))
	rewrite := false
	for i, ch := range obj.Choices {
		msg := ch.Delta
		if field == "message" {
			msg = ch.Message
		}
		if msg != nil && normaliseMessage(msg, ch.Index == 0, field == "delta", wc) {
			changed[i] = msg
			rewrite = true
		}
	}
	if !rewrite {
		return nil, false
	}
	var top map[string]json.RawMessage
	var choices []map[string]json.RawMessage
	if json.Unmarshal(body, &top) != nil || json.Unmarshal(top["choices"], &choices) != nil || len(choices) != len(changed) {
		return nil, false
	}
	for i, msg := range changed {
		if msg == nil {
			continue
		}
		raw, err := json.Marshal(msg)
		if err != nil {
			return nil, false
		}
		choices[i][field] = raw
	}
	raw, err := json.Marshal(choices)
	if err != nil {
		return nil, false
	}
	top["choices"] = raw
	out, err := json.Marshal(top)
	if err != nil {
		return nil, false
	}
	return out, true
}

// normaliseMessage rewrites one delta or message in place and reports whether it changed; for
// choice 0 (capture) it records the fields go-openai would drop.
func normaliseMessage(msg map[string]json.RawMessage, capture, delta bool, wc *wireCall) bool {
	changed := false
	if capture && isString(msg["reasoning_content"]) && string(msg["reasoning_content"]) != `""` {
		wc.gotReasoningContent = true
	}
	if c := msg["content"]; len(c) > 0 && c[0] == '[' {
		text, thinking := splitParts(c)
		msg["content"], _ = json.Marshal(text)
		if thinking != "" && !isString(msg["reasoning_content"]) {
			msg["reasoning_content"], _ = json.Marshal(thinking)
		}
		changed = true
	}
	if r := msg["reasoning"]; isString(r) && !isString(msg["reasoning_content"]) {
		msg["reasoning_content"] = r
		delete(msg, "reasoning")
		changed = true
	}
	if !capture {
		return changed
	}
	for k, v := range msg {
		if !knownMessageFields[k] && !isNull(v) {
			wc.got.Message = addField(wc.got.Message, k, v, delta)
		}
	}
	var calls []map[string]json.RawMessage
	if err := json.Unmarshal(msg["tool_calls"], &calls); err != nil {
		return changed
	}
	for j, c := range calls {
		var id string
		_ = json.Unmarshal(c["id"], &id)
		index := j
		if delta {
			// A streamed call is known by its index when it has one; Mistral sends whole calls
			// without one, known by their id.
			if err := json.Unmarshal(c["index"], &index); err != nil || id != "" {
				index = -1
			}
		}
		for k, v := range c {
			if knownCallFields[k] || isNull(v) {
				continue
			}
			if wc.got.Calls == nil {
				wc.got.Calls = map[string]json.RawMessage{}
			}
			key := callKey(id, index)
			wc.got.Calls[key] = addField(wc.got.Calls[key], k, v, delta)
		}
	}
	return changed
}

// splitParts reads a content given as an array of typed parts: the text of its "text" parts,
// and the reasoning of its "thinking" parts (Mistral's Magistral models, whose thinking part holds
// text parts of its own). Other parts (references, images) are not text the user is shown.
func splitParts(raw json.RawMessage) (text, thinking string) {
	var parts []struct {
		Type     string          `json:"type"`
		Text     string          `json:"text"`
		Thinking json.RawMessage `json:"thinking"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", ""
	}
	var t, r strings.Builder
	for _, p := range parts {
		switch p.Type {
		case "text", "":
			t.WriteString(p.Text)
		case "thinking":
			if isString(p.Thinking) {
				var s string
				_ = json.Unmarshal(p.Thinking, &s)
				r.WriteString(s)
				continue
			}
			inner, _ := splitParts(p.Thinking)
			r.WriteString(inner)
		}
	}
	return t.String(), r.String()
}

// addField records field k of a message or call: in a stream, an array continues the array of
// earlier chunks (items arrive over chunks); any other value replaces the earlier one.
func addField(obj json.RawMessage, k string, v json.RawMessage, delta bool) json.RawMessage {
	if delta && len(v) > 0 && v[0] == '[' && len(obj) > 0 {
		var fields map[string]json.RawMessage
		if json.Unmarshal(obj, &fields) == nil && len(fields[k]) > 0 && fields[k][0] == '[' {
			var prev, next []json.RawMessage
			if json.Unmarshal(fields[k], &prev) == nil && json.Unmarshal(v, &next) == nil {
				if joined, err := json.Marshal(append(prev, next...)); err == nil {
					v = joined
				}
			}
		}
	}
	return setField(obj, k, v)
}

// setField returns the JSON object obj with field k set to v (the latest value of a field wins).
func setField(obj json.RawMessage, k string, v json.RawMessage) json.RawMessage {
	fields := map[string]json.RawMessage{}
	if len(obj) > 0 {
		_ = json.Unmarshal(obj, &fields)
	}
	fields[k] = v
	out, err := json.Marshal(fields)
	if err != nil {
		return obj
	}
	return out
}

func isString(v json.RawMessage) bool { return len(v) > 0 && v[0] == '"' }

func isNull(v json.RawMessage) bool {
	v = bytes.TrimSpace(v)
	return len(v) == 0 || string(v) == "null"
}

// plainKey reports an object key of OpenAI's own chunks (and Azure's filter results), at any
// depth: a chunk holding only these needs neither rewriting nor capturing. A switch, not a map:
// it runs for every key of every chunk, and compiles to a few comparisons without hashing.
func plainKey(k []byte) bool {
	switch string(k) {
	case "id", "object", "created", "model", "system_fingerprint",
		"service_tier", "choices", "index", "delta", "role",
		"content", "tool_calls", "function", "name", "arguments",
		"type", "refusal", "logprobs", "finish_reason", "usage",
		"prompt_tokens", "completion_tokens", "total_tokens",
		"prompt_tokens_details", "completion_tokens_details", "cached_tokens",
		"reasoning_tokens", "audio_tokens", "accepted_prediction_tokens",
		"rejected_prediction_tokens", "obfuscation", "annotations",
		"content_filter_results", "prompt_filter_results", "prompt_index",
		"hate", "self_harm", "sexual", "violence", "jailbreak",
		"protected_material_text", "protected_material_code", "filtered",
		"severity", "detected":
		return true
	}
	return false
}

// plainChunk reports, in one pass over the bytes and without allocating, that a stream chunk
// is in OpenAI's own shape: every object key is a plainKey and no content is an array.
// Most chunks of most providers are; normaliseObject parses only the others. Anything it is
// unsure of (an escaped key, broken JSON) counts as not plain.
func plainChunk(b []byte) bool {
	for i := 0; i < len(b); i++ {
		if b[i] != '"' {
			continue
		}
		start := i + 1
		j := start
		for j < len(b) && b[j] != '"' {
			if b[j] == '\\' {
				j++
			}
			j++
		}
		if j >= len(b) {
			return false
		}
		str := b[start:j]
		k := j + 1
		for k < len(b) && (b[k] == ' ' || b[k] == '\t' || b[k] == '\n' || b[k] == '\r') {
			k++
		}
		i = j
		if k >= len(b) || b[k] != ':' {
			continue // a string value, not a key
		}
		if bytes.IndexByte(str, '\\') >= 0 || !plainKey(str) {
			return false
		}
		if string(str) == "content" {
			v := k + 1
			for v < len(b) && (b[v] == ' ' || b[v] == '\t' || b[v] == '\n' || b[v] == '\r') {
				v++
			}
			if v < len(b) && b[v] == '[' {
				return false
			}
		}
	}
	return true
}
