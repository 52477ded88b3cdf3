package agent

import (
	"encoding/json"
	"reflect"
	"syscall"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"relaybot/internal/testkit/llm"
)

// leanChunks are chunks the lean decoder must read itself (lean: true) or must leave to
// json.Unmarshal (lean: false); either way the runner must get what json.Unmarshal gives.
var leanChunks = []struct {
	name  string
	chunk string
	lean  bool
}{
	{"the load generator's token", `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1767225600,"model":"bench","choices":[{"index":0,"delta":{"content":"tok "},"finish_reason":null}]}`, true},
	{"OpenAI logprobs", `{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-4.1","choices":[{"index":0,"delta":{"content":"Hi"},"logprobs":{"content":[{"token":"Hi","logprob":-0.0012,"bytes":[72,105],"top_logprobs":[{"token":"Hi","logprob":-0.0012,"bytes":[72,105]},{"token":"Hello","logprob":-6.75e-1,"bytes":null}]}],"refusal":null},"finish_reason":null}]}`, true},
	{"logprobs with empty lists", `{"choices":[{"index":0,"delta":{},"logprobs":{"content":[],"refusal":[]}}]}`, true},
	{"Azure filter results in full", `{"choices":[{"content_filter_results":{"hate":{"filtered":false,"severity":"safe"},"self_harm":{"filtered":false,"severity":"safe"},"sexual":{"filtered":true,"severity":"medium"},"violence":{"filtered":false,"severity":"low"},"jailbreak":{"filtered":false,"detected":true},"profanity":{"filtered":true,"detected":false},"protected_material_text":{"filtered":false,"detected":false}},"delta":{"content":"x"},"finish_reason":"content_filter","index":0}],"created":1,"id":"az","model":"gpt-4o","object":"chat.completion.chunk"}`, true},
	{"prompt annotations", `{"choices":[],"prompt_annotations":[{"prompt_index":1,"content_filter_results":{"hate":{"filtered":false,"severity":"safe"}}},null]}`, true},
	{"nulls everywhere", `{"id":null,"object":null,"created":null,"model":null,"choices":[{"index":null,"delta":null,"logprobs":null,"finish_reason":null,"content_filter_results":null},null],"system_fingerprint":null,"prompt_annotations":null,"prompt_filter_results":null,"usage":null}`, true},
	{"null inside a tool call", `{"choices":[{"index":0,"delta":{"role":null,"content":null,"refusal":null,"reasoning_content":null,"function_call":null,"tool_calls":[{"index":null,"id":null,"type":null,"function":null},null]}}]}`, true},
	{"tool call without index", `{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"D681PevKs","function":{"name":"shell","arguments":"{\"command\": \"pwd\"}"}}]},"finish_reason":"tool_calls"}]}`, true},
	{"tool call with index 3", `{"choices":[{"index":0,"delta":{"tool_calls":[{"index":3,"function":{"arguments":"]}"}}]}}]}`, true},
	{"the old function_call", `{"choices":[{"index":0,"delta":{"function_call":{"name":"f","arguments":"{}"}}}]}`, true},
	{"usage with details", `{"choices":[],"usage":{"prompt_tokens":40,"completion_tokens":12,"total_tokens":52,"prompt_tokens_details":{"cached_tokens":8,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":4,"audio_tokens":0,"accepted_prediction_tokens":1,"rejected_prediction_tokens":2},"cost":0.0012}}`, true},
	{"empty usage", `{"choices":[],"usage":{}}`, true},
	{"unknown fields of any shape", `{"x_groq":{"id":"req_1","usage":{"queue_time":0.01}},"prompt_token_ids":[1,2,3],"service_tier":"default","obfuscation":"k2","choices":[{"index":0,"stop_reason":null,"delta":{"content":"a"}}]}`, true},
	{"unicode escapes", `{"choices":[{"index":0,"delta":{"content":"caf\u00e9 \u4f60\u597d \u0000 \/ \"q\" \\ \b\f\n\r\t"}}]}`, true},
	{"a surrogate pair", `{"choices":[{"index":0,"delta":{"content":"\ud83d\ude00 smile"}}]}`, true},
	{"raw UTF-8", `{"choices":[{"index":0,"delta":{"content":"😀 café"}}]}`, true},
	{"an escaped backslash before a u", `{"choices":[{"index":0,"delta":{"content":"C:\\udir"}}]}`, true},
	{"escaped key", `{"choices":[{"index":0,"delta":{"con\u0074ent":"x"}}]}`, true},
	{"negative zero and big numbers", `{"created":-0,"choices":[{"index":9223372036854775807,"delta":{}}]}`, true},
	{"whitespace between tokens", " { \"choices\" : [ { \"index\" : 0 , \"delta\" : { \"content\" : \"a\" } } ] } ", true},

	{"a lone high surrogate", `{"choices":[{"index":0,"delta":{"content":"\ud83d smile"}}]}`, false},
	{"a lone low surrogate", `{"choices":[{"index":0,"delta":{"content":"\ude00"}}]}`, false},
	{"two high surrogates", `{"choices":[{"index":0,"delta":{"content":"\ud83d\ud83d"}}]}`, false},
	{"a high surrogate before a letter", `{"choices":[{"index":0,"delta":{"content":"\ud83d\u0041"}}]}`, false},
	{"invalid UTF-8", "{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\xffb\"}}]}", false},
	{"a field name in capitals", `{"choices":[{"index":0,"delta":{"Content":"x"}}]}`, false},
	{"a field name with the Kelvin sign", `{"choices":[{"index":0,"delta":{"content":"x","\u212aey":1}}],"\u212a":1}`, false},
	{"a name twice", `{"choices":[{"index":0,"delta":{"content":"a","content":"b"}}]}`, false},
	{"choices twice", `{"choices":[{"index":0,"delta":{"content":"a"}}],"choices":[{"finish_reason":"stop"}]}`, false},
	{"a fractional index", `{"choices":[{"index":0.5,"delta":{}}]}`, false},
	{"an exponent in created", `{"created":1e9,"choices":[]}`, false},
	{"an index too big", `{"choices":[{"index":9223372036854775808,"delta":{}}]}`, false},
	{"content as a number", `{"choices":[{"index":0,"delta":{"content":5}}]}`, false},
	{"delta as a string", `{"choices":[{"index":0,"delta":"hi"}]}`, false},
	{"a boolean as a string", `{"choices":[{"content_filter_results":{"hate":{"filtered":"no"}},"index":0}]}`, false},
	{"a logprob out of range", `{"choices":[{"index":0,"logprobs":{"content":[{"token":"a","logprob":1e400}]}}]}`, false},
	{"a control character", "{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\tb\"}}]}", false},
	{"a control character before an escape", "{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\x10\\\\n\"}}]}", false},
	{"a control character in an ignored key before an escape", "{\"x\x01\\n\":1,\"choices\":[]}", false},
	{"a leading zero", `{"created":01,"choices":[]}`, false},
	{"an invalid escape", `{"choices":[{"index":0,"delta":{"content":"\x41"}}]}`, false},
	{"a trailing comma", `{"choices":[],}`, false},
	{"trailing data", `{"choices":[]} {}`, false},
	{"cut JSON", `{"choices":[{"index":0,"delta":{"content":"x`, false},
	{"an array", `[1,2]`, false},
	{"null", `null`, false},
}

// payloadOf is what next hands the decoder for a chunk: the normalised JSON.
func payloadOf(chunk []byte) []byte {
	s := &sseNormaliser{wc: &wireCall{}}
	if n, changed := s.normalisePayload(chunk); changed {
		return n
	}
	return chunk
}

// checkChunk decodes payload both ways with d and fails unless the lean decoder gave what
// json.Unmarshal gives or declined (leaving the response as it was). It reports whether the lean
// decoder read the chunk.
func checkChunk(t *testing.T, d *chunkDecoder, payload []byte) bool {
	t.Helper()
	var want openai.ChatCompletionStreamResponse
	wantErr := json.Unmarshal(payload, &want)
	var got openai.ChatCompletionStreamResponse
	if !d.decode(payload, &got) {
		if !reflect.DeepEqual(got, openai.ChatCompletionStreamResponse{}) {
			t.Fatalf("declined %s but left %+v for json.Unmarshal", payload, got)
		}
		return false
	}
	if wantErr != nil {
		t.Fatalf("read %s, which json.Unmarshal refuses (%v), as %+v", payload, wantErr, got)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("read %s as\n%#v\njson.Unmarshal reads\n%#v", payload, got, want)
	}
	return true
}

func TestTheLeanDecoderReadsChunksAsJSONUnmarshalDoes(t *testing.T) {
	var d chunkDecoder // one decoder for all, as for a stream: reuse must not leak between chunks
	for _, c := range leanChunks {
		t.Run(c.name, func(t *testing.T) {
			if got := checkChunk(t, &d, payloadOf([]byte(c.chunk))); got != c.lean {
				t.Errorf("lean decoder read the chunk: %v, want %v (%s)", got, c.lean, c.chunk)
			}
		})
	}
}

func TestTheLeanDecoderReadsEveryRecordedProvidersChunks(t *testing.T) {
	for _, rec := range llm.Recordings() {
		t.Run(rec.Provider, func(t *testing.T) {
			var d chunkDecoder
			for _, chunk := range append(rec.ToolRound.Events, rec.Answer.Events...) {
				if !checkChunk(t, &d, payloadOf([]byte(chunk))) {
					t.Errorf("the lean decoder declined %s's chunk %s", rec.Provider, payloadOf([]byte(chunk)))
				}
			}
		})
	}
}

func TestTheLeanDecoderSharesTheStringsAStreamRepeats(t *testing.T) {
	var d chunkDecoder
	chunk := []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4.1","system_fingerprint":"fp","choices":[{"index":0,"delta":{"content":"tok "}}]}`)
	var first openai.ChatCompletionStreamResponse
	if !d.decode(chunk, &first) {
		t.Fatal("declined a plain chunk")
	}
	allocs := testing.AllocsPerRun(100, func() {
		var r openai.ChatCompletionStreamResponse
		if !d.decode(chunk, &r) {
			t.Fatal("declined a plain chunk")
		}
	})
	// The content only: the id, object, model and fingerprint are the first chunk's, and the
	// choices the decoder's own.
	if allocs > 1 {
		t.Errorf("a repeated chunk costs %.0f allocations, want at most 1", allocs)
	}
}

func FuzzChunkDecoder(f *testing.F) {
	for _, c := range leanChunks {
		f.Add([]byte(c.chunk))
	}
	for _, rec := range llm.Recordings() {
		for _, chunk := range append(rec.ToolRound.Events, rec.Answer.Events...) {
			f.Add([]byte(chunk))
		}
	}
	first := []byte(leanChunks[0].chunk)
	f.Fuzz(func(t *testing.T, payload []byte) {
		var d chunkDecoder
		checkChunk(t, &d, first) // a chunk before, as in a stream
		checkChunk(t, &d, payload)
		checkChunk(t, &d, first)
	})
}

// BenchmarkChunkDecode reads one OpenAI text chunk (after the normaliser's check) with the lean
// decoder and with json.Unmarshal, as next did before it.
func BenchmarkChunkDecode(b *testing.B) {
	chunk := []byte(`{"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1767225600,"model":"gpt-4.1-2025-04-14","system_fingerprint":"fp_a1b2c3","service_tier":"default","choices":[{"index":0,"delta":{"content":" token"},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"k2"}`)
	b.Run("lean", func(b *testing.B) {
		var d chunkDecoder
		perOp(b, func() {
			var r openai.ChatCompletionStreamResponse
			if !plainChunk(chunk) || !d.decode(chunk, &r) {
				b.Fatal("declined")
			}
		})
	})
	b.Run("json.Unmarshal", func(b *testing.B) {
		perOp(b, func() {
			var r openai.ChatCompletionStreamResponse
			if !plainChunk(chunk) || json.Unmarshal(chunk, &r) != nil {
				b.Fatal("refused")
			}
		})
	})
}

// perOp runs op b.N times and reports the process's CPU time per op beside the wall time:
// on a shared machine the wall time swings with the neighbours, the CPU time much less.
func perOp(b *testing.B, op func()) {
	b.ReportAllocs()
	start := CPUTime(b)
	n := 0
	for b.Loop() {
		op()
		n++
	}
	b.ReportMetric(float64(CPUTime(b)-start)/float64(n), "cpu-ns/op")
}

// CPUTime is the process's user+system CPU time, for the benchmarks of this package and of
// agent_test (exported to those only: it is in a test file).
func CPUTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkPlainChunk is the normaliser's check of every chunk, before the decoder.
func BenchmarkPlainChunk(b *testing.B) {
	chunk := []byte(`{"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1767225600,"model":"gpt-4.1-2025-04-14","system_fingerprint":"fp_a1b2c3","service_tier":"default","choices":[{"index":0,"delta":{"content":" token"},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"k2"}`)
	perOp(b, func() {
		if !plainChunk(chunk) {
			b.Fatal("not plain")
		}
	})
}
