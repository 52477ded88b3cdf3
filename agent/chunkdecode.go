package agent

import (
	"bytes"
	"strconv"
	"unicode/utf8"

	openai "github.com/sashabaranov/go-openai"
	"github.com/valyala/fastjson"
)

// chunkDecoder reads a streamed chunk into go-openai's ChatCompletionStreamResponse without
// reflection: encoding/json's reflection over go-openai's types was the largest single cost of
// reading a stream. It gives exactly what json.Unmarshal gives, or declines: the caller then hands
// the chunk to json.Unmarshal. It declines whatever it cannot vouch for: JSON that fastjson's
// strict validator refuses (or a control byte in a chunk with escapes, which that validator can
// miss), a type the struct field would refuse, a name twice in one object, an unknown name
// json.Unmarshal would match to a field case-insensitively (or any non-ASCII one), text
// json.Unmarshal would repair (invalid UTF-8, a lone or mismatched surrogate escape), a number
// that does not fit the field.
//
// One decoder serves one stream, on the goroutine that reads it; its parser's memory is reused
// from chunk to chunk.
type chunkDecoder struct {
	p   fastjson.Parser
	raw []byte // a value's JSON text, still escaped
	// The strings every chunk of a stream repeats, kept so they are allocated once per stream.
	id, object, model, fingerprint string
	// choiceBuf holds the choices of the last chunk decoded: a response's Choices are valid until
	// the next decode, so a stream's chunks need no new slice each (most have one choice).
	choiceBuf []openai.ChatCompletionStreamChoice
}

// The JSON names of the fields of go-openai's types the decoder fills, in the order of the
// indexes the setters get.
var (
	responseNames     = []string{"id", "object", "created", "model", "choices", "system_fingerprint", "prompt_annotations", "prompt_filter_results", "usage"}
	choiceNames       = []string{"index", "delta", "logprobs", "finish_reason", "content_filter_results"}
	deltaNames        = []string{"content", "role", "function_call", "tool_calls", "refusal", "reasoning_content"}
	toolCallNames     = []string{"index", "id", "type", "function"}
	functionNames     = []string{"name", "arguments"}
	usageNames        = []string{"prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details", "completion_tokens_details"}
	promptDetailNames = []string{"audio_tokens", "cached_tokens"}
	outputDetailNames = []string{"audio_tokens", "reasoning_tokens", "accepted_prediction_tokens", "rejected_prediction_tokens"}
	filterNames       = []string{"hate", "self_harm", "sexual", "violence", "jailbreak", "profanity"}
	severityNames     = []string{"filtered", "severity"}
	detectedNames     = []string{"filtered", "detected"}
	promptFilterNames = []string{"index", "content_filter_results"}
	annotationNames   = []string{"prompt_index", "content_filter_results"}
	logprobsNames     = []string{"content", "refusal"}
	tokenLogprobNames = []string{"token", "bytes", "logprob", "top_logprobs"}
	topLogprobNames   = []string{"token", "bytes", "logprob"}
)

// decode fills resp, which must be the zero value, from the chunk's JSON as json.Unmarshal would,
// and reports true; on false resp is the zero value again, for json.Unmarshal. resp's Choices
// are the decoder's own, valid until the next decode.
func (d *chunkDecoder) decode(payload []byte, resp *openai.ChatCompletionStreamResponse) bool {
	v, err := d.p.ParseBytes(payload)
	// The parser is lenient where encoding/json is not (numbers, control characters, escapes);
	// the validator is as strict, and runs second so that the parser's depth limit bounds it.
	if err != nil || v.Type() != fastjson.TypeObject || fastjson.ValidateBytes(payload) != nil || escapedControl(payload) {
		return false
	}
	if !d.response(v, resp) {
		*resp = openai.ChatCompletionStreamResponse{}
		return false
	}
	return true
}

// escapedControl reports a byte below 0x20 in a chunk that has an escape. fastjson's validator
// misses a control character in a string before the string's last escape (it checks the part
// after it only; FuzzChunkDecoder found it), which encoding/json refuses. Outside strings JSON
// allows only its white space there, which a one-line chunk seldom has: declining those is safe.
func escapedControl(b []byte) bool {
	if bytes.IndexByte(b, '\\') < 0 {
		return false
	}
	for _, c := range b {
		if c < 0x20 {
			return true
		}
	}
	return false
}

func (d *chunkDecoder) response(v *fastjson.Value, r *openai.ChatCompletionStreamResponse) bool {
	return d.fields(v, responseNames, func(i int, v *fastjson.Value) bool {
		switch i {
		case 0:
			return d.repeated(v, &r.ID, &d.id)
		case 1:
			return d.repeated(v, &r.Object, &d.object)
		case 2:
			return d.int64(v, &r.Created)
		case 3:
			return d.repeated(v, &r.Model, &d.model)
		case 4:
			return d.choices(v, &r.Choices)
		case 5:
			return d.repeated(v, &r.SystemFingerprint, &d.fingerprint)
		case 6:
			return slice(d, v, &r.PromptAnnotations, (*chunkDecoder).annotation)
		case 7:
			return slice(d, v, &r.PromptFilterResults, (*chunkDecoder).promptFilter)
		default:
			return pointer(d, v, &r.Usage, (*chunkDecoder).usage)
		}
	})
}

func (d *chunkDecoder) choice(v *fastjson.Value, c *openai.ChatCompletionStreamChoice) bool {
	return d.fields(v, choiceNames, func(i int, v *fastjson.Value) bool {
		switch i {
		case 0:
			return d.int(v, &c.Index)
		case 1:
			return d.delta(v, &c.Delta)
		case 2:
			return pointer(d, v, &c.Logprobs, (*chunkDecoder).logprobs)
		case 3:
			return d.string(v, (*string)(&c.FinishReason))
		default:
			return d.filters(v, &c.ContentFilterResults)
		}
	})
}

func (d *chunkDecoder) delta(v *fastjson.Value, m *openai.ChatCompletionStreamChoiceDelta) bool {
	return d.fields(v, deltaNames, func(i int, v *fastjson.Value) bool {
		switch i {
		case 0:
			return d.string(v, &m.Content)
		case 1:
			return d.string(v, &m.Role)
		case 2:
			return pointer(d, v, &m.FunctionCall, (*chunkDecoder).function)
		case 3:
			return slice(d, v, &m.ToolCalls, (*chunkDecoder).toolCall)
		case 4:
			return d.string(v, &m.Refusal)
		default:
			return d.string(v, &m.ReasoningContent)
		}
	})
}

func (d *chunkDecoder) toolCall(v *fastjson.Value, c *openai.ToolCall) bool {
	return d.fields(v, toolCallNames, func(i int, v *fastjson.Value) bool {
		switch i {
		case 0:
			return pointer(d, v, &c.Index, (*chunkDecoder).int)
		case 1:
			return d.string(v, &c.ID)
		case 2:
			return d.string(v, (*string)(&c.Type))
		default:
			return d.function(v, &c.Function)
		}
	})
}

func (d *chunkDecoder) function(v *fastjson.Value, f *openai.FunctionCall) bool {
	return d.fields(v, functionNames, func(i int, v *fastjson.Value) bool {
		return d.string(v, []*string{&f.Name, &f.Arguments}[i])
	})
}

func (d *chunkDecoder) usage(v *fastjson.Value, u *openai.Usage) bool {
	return d.fields(v, usageNames, func(i int, v *fastjson.Value) bool {
		switch i {
		case 0:
			return d.int(v, &u.PromptTokens)
		case 1:
			return d.int(v, &u.CompletionTokens)
		case 2:
			return d.int(v, &u.TotalTokens)
		case 3:
			return pointer(d, v, &u.PromptTokensDetails, (*chunkDecoder).promptDetails)
		default:
			return pointer(d, v, &u.CompletionTokensDetails, (*chunkDecoder).outputDetails)
		}
	})
}

func (d *chunkDecoder) promptDetails(v *fastjson.Value, p *openai.PromptTokensDetails) bool {
	return d.fields(v, promptDetailNames, func(i int, v *fastjson.Value) bool {
		return d.int(v, []*int{&p.AudioTokens, &p.CachedTokens}[i])
	})
}

func (d *chunkDecoder) outputDetails(v *fastjson.Value, c *openai.CompletionTokensDetails) bool {
	return d.fields(v, outputDetailNames, func(i int, v *fastjson.Value) bool {
		return d.int(v, []*int{&c.AudioTokens, &c.ReasoningTokens, &c.AcceptedPredictionTokens, &c.RejectedPredictionTokens}[i])
	})
}

// filters reads Azure's content filter results.
func (d *chunkDecoder) filters(v *fastjson.Value, f *openai.ContentFilterResults) bool {
	return d.fields(v, filterNames, func(i int, v *fastjson.Value) bool {
		switch i {
		case 0:
			return d.severity(v, &f.Hate.Filtered, &f.Hate.Severity)
		case 1:
			return d.severity(v, &f.SelfHarm.Filtered, &f.SelfHarm.Severity)
		case 2:
			return d.severity(v, &f.Sexual.Filtered, &f.Sexual.Severity)
		case 3:
			return d.severity(v, &f.Violence.Filtered, &f.Violence.Severity)
		case 4:
			return d.detected(v, &f.JailBreak.Filtered, &f.JailBreak.Detected)
		default:
			return d.detected(v, &f.Profanity.Filtered, &f.Profanity.Detected)
		}
	})
}

func (d *chunkDecoder) severity(v *fastjson.Value, filtered *bool, severity *string) bool {
	return d.fields(v, severityNames, func(i int, v *fastjson.Value) bool {
		if i == 0 {
			return d.bool(v, filtered)
		}
		return d.string(v, severity)
	})
}

func (d *chunkDecoder) detected(v *fastjson.Value, filtered, detected *bool) bool {
	return d.fields(v, detectedNames, func(i int, v *fastjson.Value) bool {
		return d.bool(v, []*bool{filtered, detected}[i])
	})
}

func (d *chunkDecoder) promptFilter(v *fastjson.Value, p *openai.PromptFilterResult) bool {
	return d.promptFilters(v, promptFilterNames, &p.Index, &p.ContentFilterResults)
}

func (d *chunkDecoder) annotation(v *fastjson.Value, p *openai.PromptAnnotation) bool {
	return d.promptFilters(v, annotationNames, &p.PromptIndex, &p.ContentFilterResults)
}

// promptFilters reads a prompt's index and its filter results, the two fields (named names) of
// both of go-openai's types for them.
func (d *chunkDecoder) promptFilters(v *fastjson.Value, names []string, index *int, f *openai.ContentFilterResults) bool {
	return d.fields(v, names, func(i int, v *fastjson.Value) bool {
		if i == 0 {
			return d.int(v, index)
		}
		return d.filters(v, f)
	})
}

func (d *chunkDecoder) logprobs(v *fastjson.Value, l *openai.ChatCompletionStreamChoiceLogprobs) bool {
	return d.fields(v, logprobsNames, func(i int, v *fastjson.Value) bool {
		if i == 0 {
			return slice(d, v, &l.Content, (*chunkDecoder).tokenLogprob)
		}
		return slice(d, v, &l.Refusal, (*chunkDecoder).tokenLogprob)
	})
}

func (d *chunkDecoder) tokenLogprob(v *fastjson.Value, t *openai.ChatCompletionTokenLogprob) bool {
	return d.fields(v, tokenLogprobNames, func(i int, v *fastjson.Value) bool {
		if i == 3 {
			return slice(d, v, &t.TopLogprobs, (*chunkDecoder).topLogprob)
		}
		return d.logprob(i, v, &t.Token, &t.Bytes, &t.Logprob)
	})
}

func (d *chunkDecoder) topLogprob(v *fastjson.Value, t *openai.ChatCompletionTokenLogprobTopLogprob) bool {
	return d.fields(v, topLogprobNames, func(i int, v *fastjson.Value) bool {
		return d.logprob(i, v, &t.Token, &t.Bytes, &t.Logprob)
	})
}

// logprob reads field i of the three both logprob types begin with: token, bytes, logprob.
func (d *chunkDecoder) logprob(i int, v *fastjson.Value, token *string, bytes *[]int64, logprob *float64) bool {
	switch i {
	case 0:
		return d.string(v, token)
	case 1:
		return slice(d, v, bytes, (*chunkDecoder).int64)
	}
	return d.float64(v, logprob)
}

// fields calls set for each member of the object v whose name is names[i], as json.Unmarshal
// fills a struct whose fields have those names; a null leaves the struct as it is. False when v
// is neither, when set declines, or when a member is one the decoder cannot vouch for (see
// chunkDecoder).
func (d *chunkDecoder) fields(v *fastjson.Value, names []string, set func(i int, v *fastjson.Value) bool) bool {
	switch v.Type() {
	case fastjson.TypeNull:
		return true
	case fastjson.TypeObject:
	default:
		return false
	}
	var seen uint32
	ok := true
	v.GetObject().Visit(func(key []byte, v *fastjson.Value) {
		if !ok {
			return
		}
		i := fieldIndex(key, names)
		switch {
		case i == ignored:
		case i < 0 || seen&(1<<i) != 0:
			ok = false
		default:
			seen |= 1 << i
			ok = set(i, v)
		}
	})
	return ok
}

// ignored is fieldIndex's answer for a name json.Unmarshal skips.
const ignored = -2

// fieldIndex is the index of key in names, ignored for a name json.Unmarshal would not match to
// any of them, or -1 for one it might match other than exactly: json.Unmarshal matches names
// case-insensitively, with Unicode's folding (the Kelvin sign matches a k). names are lower-case
// ASCII.
func fieldIndex(key []byte, names []string) int {
	for i, n := range names {
		if string(key) == n {
			return i
		}
	}
	for _, c := range key {
		if c >= utf8.RuneSelf || c == '\\' {
			return -1 // not ASCII, or an escape the parser left as it was
		}
	}
	for _, n := range names {
		if asciiEqualFold(key, n) {
			return -1
		}
	}
	return ignored
}

func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range b {
		if lowerASCII(b[i]) != lowerASCII(s[i]) {
			return false
		}
	}
	return true
}

func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// slice reads a JSON array into *dst as json.Unmarshal does: null leaves it nil, [] makes it
// empty but not nil, a null element stays the zero value.
func slice[T any](d *chunkDecoder, v *fastjson.Value, dst *[]T, read func(*chunkDecoder, *fastjson.Value, *T) bool) bool {
	switch v.Type() {
	case fastjson.TypeNull:
		return true
	case fastjson.TypeArray:
	default:
		return false
	}
	items := v.GetArray()
	out := make([]T, len(items))
	for i, item := range items {
		if item.Type() != fastjson.TypeNull && !read(d, item, &out[i]) {
			return false
		}
	}
	*dst = out
	return true
}

// choices reads a chunk's choices into the decoder's own slice, as slice would into a new one.
func (d *chunkDecoder) choices(v *fastjson.Value, dst *[]openai.ChatCompletionStreamChoice) bool {
	switch v.Type() {
	case fastjson.TypeNull:
		return true
	case fastjson.TypeArray:
	default:
		return false
	}
	items := v.GetArray()
	if cap(d.choiceBuf) < len(items) || d.choiceBuf == nil {
		d.choiceBuf = make([]openai.ChatCompletionStreamChoice, 0, max(len(items), 1))
	}
	out := d.choiceBuf[:len(items)]
	clear(out)
	for i, item := range items {
		if item.Type() != fastjson.TypeNull && !d.choice(item, &out[i]) {
			return false
		}
	}
	*dst = out
	return true
}

// pointer reads a value into a new *T, as json.Unmarshal does for a pointer field; null leaves
// it nil.
func pointer[T any](d *chunkDecoder, v *fastjson.Value, dst **T, read func(*chunkDecoder, *fastjson.Value, *T) bool) bool {
	if v.Type() == fastjson.TypeNull {
		return true
	}
	p := new(T)
	if !read(d, v, p) {
		return false
	}
	*dst = p
	return true
}

// text is a JSON string's text as json.Unmarshal decodes it, valid until the next parse; null
// reports isNull, anything else or a string json.Unmarshal would repair reports !ok.
func (d *chunkDecoder) text(v *fastjson.Value) (text []byte, isNull, ok bool) {
	// The raw text is only to be had before the value is unescaped (by Type or StringBytes).
	d.raw = v.MarshalTo(d.raw[:0])
	raw := d.raw
	if string(raw) == "null" {
		return nil, true, true
	}
	if len(raw) < 2 || raw[0] != '"' {
		return nil, false, false
	}
	raw = raw[1 : len(raw)-1]
	if bytes.IndexByte(raw, '\\') >= 0 {
		if !pairedSurrogates(raw) {
			return nil, false, false
		}
		raw, _ = v.StringBytes()
	}
	if !utf8.Valid(raw) {
		return nil, false, false
	}
	return raw, false, true
}

// pairedSurrogates reports that every \u escape of a UTF-16 surrogate in the (valid) JSON string
// text raw is a high one followed by a low one, which fastjson and encoding/json decode alike; a
// lone surrogate encoding/json turns into U+FFFD and fastjson does not.
func pairedSurrogates(raw []byte) bool {
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		if raw[i+1] != 'u' {
			i++
			continue
		}
		r := hex4(raw[i+2 : i+6])
		switch {
		case r >= 0xDC00 && r <= 0xDFFF:
			return false
		case r >= 0xD800 && r <= 0xDBFF:
			if i+12 > len(raw) || raw[i+6] != '\\' || raw[i+7] != 'u' {
				return false
			}
			if lo := hex4(raw[i+8 : i+12]); lo < 0xDC00 || lo > 0xDFFF {
				return false
			}
			i += 11
		default:
			i += 5
		}
	}
	return true
}

// hex4 reads four hex digits (validated already).
func hex4(b []byte) rune {
	var r rune
	for _, c := range b {
		switch {
		case c >= 'a':
			c -= 'a' - 10
		case c >= 'A':
			c -= 'A' - 10
		default:
			c -= '0'
		}
		r = r<<4 | rune(c)
	}
	return r
}

func (d *chunkDecoder) string(v *fastjson.Value, dst *string) bool {
	t, isNull, ok := d.text(v)
	if ok && !isNull {
		*dst = string(t)
	}
	return ok
}

// repeated reads a string the stream's chunks repeat; last keeps the previous value, to be
// shared when it comes again.
func (d *chunkDecoder) repeated(v *fastjson.Value, dst, last *string) bool {
	t, isNull, ok := d.text(v)
	if !ok || isNull {
		return ok
	}
	if string(t) != *last {
		*last = string(t)
	}
	*dst = *last
	return true
}

// number is a JSON number's literal, as json.Unmarshal hands it to strconv; !ok for anything but
// a number or null.
func (d *chunkDecoder) number(v *fastjson.Value) (lit []byte, isNull, ok bool) {
	switch v.Type() {
	case fastjson.TypeNull:
		return nil, true, true
	case fastjson.TypeNumber:
		d.raw = v.MarshalTo(d.raw[:0])
		return d.raw, false, true
	}
	return nil, false, false
}

func (d *chunkDecoder) int64(v *fastjson.Value, dst *int64) bool {
	lit, isNull, ok := d.number(v)
	if !ok || isNull {
		return ok
	}
	n, err := strconv.ParseInt(string(lit), 10, 64)
	if err != nil {
		return false
	}
	*dst = n
	return true
}

func (d *chunkDecoder) int(v *fastjson.Value, dst *int) bool {
	var n int64
	if !d.int64(v, &n) || int64(int(n)) != n {
		return false
	}
	*dst = int(n)
	return true
}

func (d *chunkDecoder) float64(v *fastjson.Value, dst *float64) bool {
	lit, isNull, ok := d.number(v)
	if !ok || isNull {
		return ok
	}
	f, err := strconv.ParseFloat(string(lit), 64)
	if err != nil {
		return false
	}
	*dst = f
	return true
}

func (d *chunkDecoder) bool(v *fastjson.Value, dst *bool) bool {
	switch v.Type() {
	case fastjson.TypeNull:
	case fastjson.TypeTrue:
		*dst = true
	case fastjson.TypeFalse:
		*dst = false
	default:
		return false
	}
	return true
}
