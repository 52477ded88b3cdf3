package llm

// Recording is one provider's streamed answer shape, written from the provider's published API
// documentation: a tool round in which the model calls the tool "shell" with {"command":"pwd"},
// and the answer after the tool result. Each event goes out verbatim (Reply.Events), so the
// client meets the provider's real field names, nulls, empty choices and extra fields.
type Recording struct {
	Provider string
	// ToolRound streams the call; Answer streams AnswerText after the tool result.
	ToolRound, Answer Reply
	// CallID is the call's id on the wire; empty when the provider sends none.
	CallID string
	// Reasoning is the reasoning the tool round streams beside the call (a separate field, not
	// <think> tags); empty when none.
	Reasoning string
	// ReasoningSentBack says the provider takes the reasoning back as reasoning_content on the
	// assistant messages of a turn with tool calls (DeepSeek requires it; vLLM's and xAI's
	// templates read it). Groq and others reject reasoning fields on assistant messages.
	ReasoningSentBack bool
	// CallExtra is the JSON object of the call's fields beyond index, id, type and function that
	// the provider needs back unchanged on the call in later requests; empty when none.
	CallExtra string
	// AnswerText is the text Answer streams.
	AnswerText string
	// AnswerUsage is the usage Answer reports.
	AnswerUsage Usage
}

// Recordings returns the recorded shapes of OpenAI, Azure OpenAI, Gemini's OpenAI-compatible
// API, DeepSeek, Groq, Mistral, xAI, Ollama and vLLM, Claude through OpenRouter and through an
// Anthropic-compatible gateway (their prompt cache's usage fields), and one stream of quirks several of them
// show (an empty first chunk, a role repeated on every chunk, "tool_calls": [] on text chunks, a
// tool name split over chunks, usage in a chunk with empty choices).
func Recordings() []Recording {
	usage := Usage{PromptTokens: 52, CompletionTokens: 7}
	return []Recording{
		openAIRecording(usage),
		azureOpenAIRecording(usage),
		geminiRecording(usage),
		deepSeekRecording(usage),
		groqRecording(usage),
		mistralRecording(usage),
		xAIRecording(usage),
		ollamaRecording(usage),
		vLLMRecording(usage),
		openRouterClaudeRecording(usage),
		anthropicGatewayRecording(usage),
		quirksRecording(usage),
	}
}

// openAIRecording is OpenAI's chat completions streaming: the role and the call's id and name
// come first, the arguments in fragments by index, finish_reason in a chunk with an empty delta,
// usage (stream_options.include_usage) in a last chunk whose choices are empty; the answer's
// prompt was served in part from the prompt cache (prompt_tokens_details.cached_tokens).
func openAIRecording(usage Usage) Recording {
	return Recording{
		Provider: "openai",
		CallID:   "call_Vu3mA9yU0kPl2s",
		ToolRound: Reply{Events: []string{
			`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1767225600,"model":"gpt-4.1","system_fingerprint":"fp_1","service_tier":"default","choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_Vu3mA9yU0kPl2s","type":"function","function":{"name":"shell","arguments":""}}],"refusal":null},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"k2"}`,
			`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1767225600,"model":"gpt-4.1","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"comm"}}]},"logprobs":null,"finish_reason":null}],"usage":null}`,
			`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1767225600,"model":"gpt-4.1","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"and\":\"pwd\"}"}}]},"logprobs":null,"finish_reason":null}],"usage":null}`,
			`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1767225600,"model":"gpt-4.1","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}],"usage":null}`,
			`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1767225600,"model":"gpt-4.1","system_fingerprint":"fp_1","choices":[],"usage":{"prompt_tokens":40,"completion_tokens":12,"total_tokens":52,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}}`,
		}},
		AnswerText: "You are in /work.",
		Answer: Reply{Events: []string{
			`{"id":"chatcmpl-2","object":"chat.completion.chunk","created":1767225601,"model":"gpt-4.1","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}`,
			`{"id":"chatcmpl-2","object":"chat.completion.chunk","created":1767225601,"model":"gpt-4.1","choices":[{"index":0,"delta":{"content":"You are in "},"logprobs":null,"finish_reason":null}],"usage":null}`,
			`{"id":"chatcmpl-2","object":"chat.completion.chunk","created":1767225601,"model":"gpt-4.1","choices":[{"index":0,"delta":{"content":"/work."},"logprobs":null,"finish_reason":null}],"usage":null}`,
			`{"id":"chatcmpl-2","object":"chat.completion.chunk","created":1767225601,"model":"gpt-4.1","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}`,
			`{"id":"chatcmpl-2","object":"chat.completion.chunk","created":1767225601,"model":"gpt-4.1","choices":[],"usage":{"prompt_tokens":52,"completion_tokens":7,"total_tokens":59,"prompt_tokens_details":{"cached_tokens":32,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}`,
		}},
		AnswerUsage: Usage{PromptTokens: usage.PromptTokens, CompletionTokens: usage.CompletionTokens, CachedTokens: 32},
	}
}

// azureOpenAIRecording is Azure OpenAI's: a first chunk with empty choices and the prompt's
// filter results, content filter results on every choice.
func azureOpenAIRecording(usage Usage) Recording {
	return Recording{
		Provider: "azure-openai",
		CallID:   "call_az81",
		ToolRound: Reply{Events: []string{
			`{"choices":[],"created":0,"id":"","model":"","object":"","prompt_filter_results":[{"prompt_index":0,"content_filter_results":{"hate":{"filtered":false,"severity":"safe"},"self_harm":{"filtered":false,"severity":"safe"},"sexual":{"filtered":false,"severity":"safe"},"violence":{"filtered":false,"severity":"safe"}}}]}`,
			`{"choices":[{"content_filter_results":{},"delta":{"content":null,"refusal":null,"role":"assistant","tool_calls":[{"function":{"arguments":"","name":"shell"},"id":"call_az81","index":0,"type":"function"}]},"finish_reason":null,"index":0,"logprobs":null}],"created":1767225600,"id":"chatcmpl-az1","model":"gpt-4o-2024-11-20","object":"chat.completion.chunk","system_fingerprint":"fp_az"}`,
			`{"choices":[{"content_filter_results":{},"delta":{"tool_calls":[{"function":{"arguments":"{\"command\":\"pwd\"}"},"index":0}]},"finish_reason":null,"index":0,"logprobs":null}],"created":1767225600,"id":"chatcmpl-az1","model":"gpt-4o-2024-11-20","object":"chat.completion.chunk","system_fingerprint":"fp_az"}`,
			`{"choices":[{"content_filter_results":{},"delta":{},"finish_reason":"tool_calls","index":0,"logprobs":null}],"created":1767225600,"id":"chatcmpl-az1","model":"gpt-4o-2024-11-20","object":"chat.completion.chunk","system_fingerprint":"fp_az"}`,
		}},
		AnswerText: "You are in /work.",
		Answer: Reply{Events: []string{
			`{"choices":[],"created":0,"id":"","model":"","object":"","prompt_filter_results":[{"prompt_index":0,"content_filter_results":{"hate":{"filtered":false,"severity":"safe"}}}]}`,
			`{"choices":[{"content_filter_results":{},"delta":{"content":"","refusal":null,"role":"assistant"},"finish_reason":null,"index":0,"logprobs":null}],"created":1767225601,"id":"chatcmpl-az2","model":"gpt-4o-2024-11-20","object":"chat.completion.chunk","system_fingerprint":"fp_az"}`,
			`{"choices":[{"content_filter_results":{"hate":{"filtered":false,"severity":"safe"}},"delta":{"content":"You are in /work."},"finish_reason":null,"index":0,"logprobs":null}],"created":1767225601,"id":"chatcmpl-az2","model":"gpt-4o-2024-11-20","object":"chat.completion.chunk","system_fingerprint":"fp_az"}`,
			`{"choices":[{"content_filter_results":{},"delta":{},"finish_reason":"stop","index":0,"logprobs":null}],"created":1767225601,"id":"chatcmpl-az2","model":"gpt-4o-2024-11-20","object":"chat.completion.chunk","system_fingerprint":"fp_az"}`,
			`{"choices":[],"created":1767225601,"id":"chatcmpl-az2","model":"gpt-4o-2024-11-20","object":"chat.completion.chunk","system_fingerprint":"fp_az","usage":{"completion_tokens":7,"prompt_tokens":52,"total_tokens":59}}`,
		}},
		AnswerUsage: usage,
	}
}

// geminiRecording is Gemini's OpenAI-compatible API: whole calls in one chunk, the thought
// signature in extra_content.google (to be sent back on the call), usage on the last chunk that
// still has its choice.
func geminiRecording(usage Usage) Recording {
	return Recording{
		Provider:  "gemini",
		CallID:    "function-call-7723190861",
		CallExtra: `{"extra_content":{"google":{"thought_signature":"CsQBAVSoXO5x+Gm1kR0c2lnbmF0dXJlLWJ5dGVz"}}}`,
		ToolRound: Reply{Events: []string{
			`{"choices":[{"delta":{"role":"assistant","tool_calls":[{"extra_content":{"google":{"thought_signature":"CsQBAVSoXO5x+Gm1kR0c2lnbmF0dXJlLWJ5dGVz"}},"function":{"arguments":"{\"command\":\"pwd\"}","name":"shell"},"id":"function-call-7723190861","type":"function"}]},"finish_reason":"tool_calls","index":0}],"created":1767225600,"id":"gem-1","model":"gemini-3-flash-preview","object":"chat.completion.chunk","usage":{"completion_tokens":18,"prompt_tokens":40,"total_tokens":118}}`,
		}},
		AnswerText: "You are in /work.",
		Answer: Reply{Events: []string{
			`{"choices":[{"delta":{"content":"You are in","role":"assistant"},"index":0}],"created":1767225601,"id":"gem-2","model":"gemini-3-flash-preview","object":"chat.completion.chunk"}`,
			`{"choices":[{"delta":{"content":" /work.","role":"assistant"},"finish_reason":"stop","index":0}],"created":1767225601,"id":"gem-2","model":"gemini-3-flash-preview","object":"chat.completion.chunk","usage":{"completion_tokens":7,"prompt_tokens":52,"total_tokens":59}}`,
		}},
		AnswerUsage: usage,
	}
}

// deepSeekRecording is DeepSeek's thinking mode: reasoning_content deltas with content null,
// then the call; usage on the finish chunk with its cache fields (prompt_cache_hit_tokens and
// prompt_cache_miss_tokens, which add up to prompt_tokens; no prompt_tokens_details in the
// answer).
func deepSeekRecording(usage Usage) Recording {
	return Recording{
		Provider:          "deepseek",
		ReasoningSentBack: true,
		CallID:            "call_00_dsk9",
		Reasoning:         "The user wants the directory. I should run pwd.",
		ToolRound: Reply{Events: []string{
			`{"id":"ds-1","object":"chat.completion.chunk","created":1767225600,"model":"deepseek-reasoner","system_fingerprint":"fp_ds","choices":[{"index":0,"delta":{"role":"assistant","content":null,"reasoning_content":""},"logprobs":null,"finish_reason":null}]}`,
			`{"id":"ds-1","object":"chat.completion.chunk","created":1767225600,"model":"deepseek-reasoner","system_fingerprint":"fp_ds","choices":[{"index":0,"delta":{"content":null,"reasoning_content":"The user wants the directory."},"logprobs":null,"finish_reason":null}]}`,
			`{"id":"ds-1","object":"chat.completion.chunk","created":1767225600,"model":"deepseek-reasoner","system_fingerprint":"fp_ds","choices":[{"index":0,"delta":{"content":null,"reasoning_content":" I should run pwd."},"logprobs":null,"finish_reason":null}]}`,
			`{"id":"ds-1","object":"chat.completion.chunk","created":1767225600,"model":"deepseek-reasoner","system_fingerprint":"fp_ds","choices":[{"index":0,"delta":{"content":null,"reasoning_content":null,"tool_calls":[{"index":0,"id":"call_00_dsk9","type":"function","function":{"name":"shell","arguments":""}}]},"logprobs":null,"finish_reason":null}]}`,
			`{"id":"ds-1","object":"chat.completion.chunk","created":1767225600,"model":"deepseek-reasoner","system_fingerprint":"fp_ds","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"command\":\"pwd\"}"}}]},"logprobs":null,"finish_reason":null}]}`,
			`{"id":"ds-1","object":"chat.completion.chunk","created":1767225600,"model":"deepseek-reasoner","system_fingerprint":"fp_ds","choices":[{"index":0,"delta":{"content":"","reasoning_content":null},"logprobs":null,"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":40,"completion_tokens":30,"total_tokens":70,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":12},"prompt_cache_hit_tokens":0,"prompt_cache_miss_tokens":40}}`,
		}},
		AnswerText: "You are in /work.",
		Answer: Reply{Events: []string{
			`{"id":"ds-2","object":"chat.completion.chunk","created":1767225601,"model":"deepseek-reasoner","system_fingerprint":"fp_ds","choices":[{"index":0,"delta":{"role":"assistant","content":null,"reasoning_content":"It printed /work."},"logprobs":null,"finish_reason":null}]}`,
			`{"id":"ds-2","object":"chat.completion.chunk","created":1767225601,"model":"deepseek-reasoner","system_fingerprint":"fp_ds","choices":[{"index":0,"delta":{"content":"You are in /work.","reasoning_content":null},"logprobs":null,"finish_reason":null}]}`,
			`{"id":"ds-2","object":"chat.completion.chunk","created":1767225601,"model":"deepseek-reasoner","system_fingerprint":"fp_ds","choices":[{"index":0,"delta":{"content":"","reasoning_content":null},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":52,"completion_tokens":7,"total_tokens":59,"prompt_cache_hit_tokens":40,"prompt_cache_miss_tokens":12}}`,
		}},
		AnswerUsage: Usage{PromptTokens: usage.PromptTokens, CompletionTokens: usage.CompletionTokens, CachedTokens: 40},
	}
}

// groqRecording is Groq's with reasoning_format "parsed": reasoning in a "reasoning" field,
// whole calls with index, usage under x_groq on the finish chunk.
func groqRecording(usage Usage) Recording {
	return Recording{
		Provider:  "groq",
		CallID:    "call_gq4t",
		Reasoning: "Need the working directory.",
		ToolRound: Reply{Events: []string{
			`{"id":"chatcmpl-gq1","object":"chat.completion.chunk","created":1767225600,"model":"qwen/qwen3-32b","system_fingerprint":"fp_gq","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"x_groq":{"id":"req_01"}}`,
			`{"id":"chatcmpl-gq1","object":"chat.completion.chunk","created":1767225600,"model":"qwen/qwen3-32b","system_fingerprint":"fp_gq","choices":[{"index":0,"delta":{"reasoning":"Need the working directory."},"logprobs":null,"finish_reason":null}]}`,
			`{"id":"chatcmpl-gq1","object":"chat.completion.chunk","created":1767225600,"model":"qwen/qwen3-32b","system_fingerprint":"fp_gq","choices":[{"index":0,"delta":{"tool_calls":[{"id":"call_gq4t","type":"function","function":{"name":"shell","arguments":"{\"command\":\"pwd\"}"},"index":0}]},"logprobs":null,"finish_reason":null}]}`,
			`{"id":"chatcmpl-gq1","object":"chat.completion.chunk","created":1767225600,"model":"qwen/qwen3-32b","system_fingerprint":"fp_gq","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}],"x_groq":{"id":"req_01","usage":{"queue_time":0.01,"prompt_tokens":40,"prompt_time":0.002,"completion_tokens":20,"completion_time":0.05,"total_tokens":60,"total_time":0.052}}}`,
		}},
		AnswerText: "You are in /work.",
		Answer: Reply{Events: []string{
			`{"id":"chatcmpl-gq2","object":"chat.completion.chunk","created":1767225601,"model":"qwen/qwen3-32b","system_fingerprint":"fp_gq","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"x_groq":{"id":"req_02"}}`,
			`{"id":"chatcmpl-gq2","object":"chat.completion.chunk","created":1767225601,"model":"qwen/qwen3-32b","system_fingerprint":"fp_gq","choices":[{"index":0,"delta":{"content":"You are in /work."},"logprobs":null,"finish_reason":null}]}`,
			`{"id":"chatcmpl-gq2","object":"chat.completion.chunk","created":1767225601,"model":"qwen/qwen3-32b","system_fingerprint":"fp_gq","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"x_groq":{"id":"req_02","usage":{"prompt_tokens":52,"completion_tokens":7,"total_tokens":59}},"usage":{"prompt_tokens":52,"completion_tokens":7,"total_tokens":59}}`,
		}},
		AnswerUsage: usage,
	}
}

// mistralRecording is Mistral's: content as an array of typed chunks (Magistral's thinking
// chunk holds text chunks), whole tool calls in one chunk without index, usage on the finish
// chunk.
func mistralRecording(usage Usage) Recording {
	return Recording{
		Provider:  "mistral",
		CallID:    "D681PevKs",
		Reasoning: "The user asks where they are.",
		ToolRound: Reply{Events: []string{
			`{"id":"ms-1","object":"chat.completion.chunk","created":1767225600,"model":"magistral-medium-2509","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`,
			`{"id":"ms-1","object":"chat.completion.chunk","created":1767225600,"model":"magistral-medium-2509","choices":[{"index":0,"delta":{"content":[{"type":"thinking","thinking":[{"type":"text","text":"The user asks where they are."}]}]},"finish_reason":null}]}`,
			`{"id":"ms-1","object":"chat.completion.chunk","created":1767225600,"model":"magistral-medium-2509","choices":[{"index":0,"delta":{"content":"","tool_calls":[{"id":"D681PevKs","function":{"name":"shell","arguments":"{\"command\": \"pwd\"}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":40,"total_tokens":60,"completion_tokens":20}}`,
		}},
		AnswerText: "You are in /work.",
		Answer: Reply{Events: []string{
			`{"id":"ms-2","object":"chat.completion.chunk","created":1767225601,"model":"magistral-medium-2509","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`,
			`{"id":"ms-2","object":"chat.completion.chunk","created":1767225601,"model":"magistral-medium-2509","choices":[{"index":0,"delta":{"content":[{"type":"text","text":"You are in "}]},"finish_reason":null}]}`,
			`{"id":"ms-2","object":"chat.completion.chunk","created":1767225601,"model":"magistral-medium-2509","choices":[{"index":0,"delta":{"content":[{"type":"text","text":"/work."}]},"finish_reason":"stop"}],"usage":{"prompt_tokens":52,"total_tokens":59,"completion_tokens":7}}`,
		}},
		AnswerUsage: usage,
	}
}

// xAIRecording is xAI's: reasoning_content from grok-3-mini, the whole call in one chunk with
// index, usage with reasoning tokens in a chunk of its own.
func xAIRecording(usage Usage) Recording {
	return Recording{
		Provider:          "xai",
		ReasoningSentBack: true,
		CallID:            "call_48290117",
		Reasoning:         "Run pwd.",
		ToolRound: Reply{Events: []string{
			`{"id":"xai-1","object":"chat.completion.chunk","created":1767225600,"model":"grok-3-mini","choices":[{"index":0,"delta":{"role":"assistant","reasoning_content":"Run pwd."}}],"system_fingerprint":"fp_x"}`,
			`{"id":"xai-1","object":"chat.completion.chunk","created":1767225600,"model":"grok-3-mini","choices":[{"index":0,"delta":{"tool_calls":[{"id":"call_48290117","function":{"name":"shell","arguments":"{\"command\":\"pwd\"}"},"index":0,"type":"function"}]}}],"system_fingerprint":"fp_x"}`,
			`{"id":"xai-1","object":"chat.completion.chunk","created":1767225600,"model":"grok-3-mini","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}],"system_fingerprint":"fp_x"}`,
			`{"id":"xai-1","object":"chat.completion.chunk","created":1767225600,"model":"grok-3-mini","choices":[],"usage":{"prompt_tokens":40,"completion_tokens":20,"total_tokens":60,"completion_tokens_details":{"reasoning_tokens":8}},"system_fingerprint":"fp_x"}`,
		}},
		AnswerText: "You are in /work.",
		Answer: Reply{Events: []string{
			`{"id":"xai-2","object":"chat.completion.chunk","created":1767225601,"model":"grok-3-mini","choices":[{"index":0,"delta":{"role":"assistant","content":"You are in /work."}}],"system_fingerprint":"fp_x"}`,
			`{"id":"xai-2","object":"chat.completion.chunk","created":1767225601,"model":"grok-3-mini","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"system_fingerprint":"fp_x"}`,
			`{"id":"xai-2","object":"chat.completion.chunk","created":1767225601,"model":"grok-3-mini","choices":[],"usage":{"prompt_tokens":52,"completion_tokens":7,"total_tokens":59},"system_fingerprint":"fp_x"}`,
		}},
		AnswerUsage: usage,
	}
}

// ollamaRecording is Ollama's OpenAI compatibility: the role on every chunk, thinking in
// "reasoning", the whole call in one chunk, finish_reason "stop" even after a call, usage in a
// chunk with empty choices.
func ollamaRecording(usage Usage) Recording {
	return Recording{
		Provider:  "ollama",
		CallID:    "call_k2j1m0ab",
		Reasoning: "I will call shell.",
		ToolRound: Reply{Events: []string{
			`{"id":"chatcmpl-812","object":"chat.completion.chunk","created":1767225600,"model":"qwen3:8b","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":"","reasoning":"I will call shell."},"finish_reason":null}]}`,
			`{"id":"chatcmpl-812","object":"chat.completion.chunk","created":1767225600,"model":"qwen3:8b","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":"","tool_calls":[{"id":"call_k2j1m0ab","index":0,"type":"function","function":{"name":"shell","arguments":"{\"command\":\"pwd\"}"}}]},"finish_reason":null}]}`,
			`{"id":"chatcmpl-812","object":"chat.completion.chunk","created":1767225600,"model":"qwen3:8b","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":"stop"}]}`,
			`{"id":"chatcmpl-812","object":"chat.completion.chunk","created":1767225600,"model":"qwen3:8b","system_fingerprint":"fp_ollama","choices":[],"usage":{"prompt_tokens":40,"completion_tokens":20,"total_tokens":60}}`,
		}},
		AnswerText: "You are in /work.",
		Answer: Reply{Events: []string{
			`{"id":"chatcmpl-813","object":"chat.completion.chunk","created":1767225601,"model":"qwen3:8b","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":"You are"},"finish_reason":null}]}`,
			`{"id":"chatcmpl-813","object":"chat.completion.chunk","created":1767225601,"model":"qwen3:8b","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":" in /work."},"finish_reason":null}]}`,
			`{"id":"chatcmpl-813","object":"chat.completion.chunk","created":1767225601,"model":"qwen3:8b","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":"stop"}]}`,
			`{"id":"chatcmpl-813","object":"chat.completion.chunk","created":1767225601,"model":"qwen3:8b","system_fingerprint":"fp_ollama","choices":[],"usage":{"prompt_tokens":52,"completion_tokens":7,"total_tokens":59}}`,
		}},
		AnswerUsage: usage,
	}
}

// vLLMRecording is vLLM's with a reasoning parser and tool parser: reasoning_content deltas,
// the call's name in its first fragment without arguments, arguments after, usage in a chunk
// with empty choices.
func vLLMRecording(usage Usage) Recording {
	return Recording{
		Provider:          "vllm",
		ReasoningSentBack: true,
		CallID:            "chatcmpl-tool-5a1c",
		Reasoning:         "pwd answers that.",
		ToolRound: Reply{Events: []string{
			`{"id":"chatcmpl-v1","object":"chat.completion.chunk","created":1767225600,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"prompt_token_ids":null}`,
			`{"id":"chatcmpl-v1","object":"chat.completion.chunk","created":1767225600,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"delta":{"reasoning_content":"pwd answers that."},"logprobs":null,"finish_reason":null}]}`,
			`{"id":"chatcmpl-v1","object":"chat.completion.chunk","created":1767225600,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"delta":{"tool_calls":[{"id":"chatcmpl-tool-5a1c","type":"function","index":0,"function":{"name":"shell"}}]},"logprobs":null,"finish_reason":null}]}`,
			`{"id":"chatcmpl-v1","object":"chat.completion.chunk","created":1767225600,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"command\": "}}]},"logprobs":null,"finish_reason":null}]}`,
			`{"id":"chatcmpl-v1","object":"chat.completion.chunk","created":1767225600,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"pwd\"}"}}]},"logprobs":null,"finish_reason":null}]}`,
			`{"id":"chatcmpl-v1","object":"chat.completion.chunk","created":1767225600,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"delta":{"content":""},"logprobs":null,"finish_reason":"tool_calls","stop_reason":null}]}`,
			`{"id":"chatcmpl-v1","object":"chat.completion.chunk","created":1767225600,"model":"Qwen/Qwen3-8B","choices":[],"usage":{"prompt_tokens":40,"total_tokens":60,"completion_tokens":20}}`,
		}},
		AnswerText: "You are in /work.",
		Answer: Reply{Events: []string{
			`{"id":"chatcmpl-v2","object":"chat.completion.chunk","created":1767225601,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`,
			`{"id":"chatcmpl-v2","object":"chat.completion.chunk","created":1767225601,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"delta":{"content":"You are in /work."},"logprobs":null,"finish_reason":null}]}`,
			`{"id":"chatcmpl-v2","object":"chat.completion.chunk","created":1767225601,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"delta":{"content":""},"logprobs":null,"finish_reason":"stop","stop_reason":null}]}`,
			`{"id":"chatcmpl-v2","object":"chat.completion.chunk","created":1767225601,"model":"Qwen/Qwen3-8B","choices":[],"usage":{"prompt_tokens":52,"total_tokens":59,"completion_tokens":7}}`,
		}},
		AnswerUsage: usage,
	}
}

// openRouterClaudeRecording is an Anthropic Claude model through OpenRouter's OpenAI-compatible
// API: the call streamed in fragments, usage (always sent) in a last chunk with empty choices,
// the prompt cache's read and write under prompt_tokens_details (cached_tokens,
// cache_write_tokens), and the cost OpenRouter charged.
func openRouterClaudeRecording(usage Usage) Recording {
	return Recording{
		Provider: "openrouter-claude",
		CallID:   "toolu_01A9q",
		ToolRound: Reply{Events: []string{
			`{"id":"gen-1","provider":"Anthropic","model":"anthropic/claude-sonnet-4.5","object":"chat.completion.chunk","created":1767225600,"choices":[{"index":0,"delta":{"role":"assistant","content":"","tool_calls":[{"index":0,"id":"toolu_01A9q","type":"function","function":{"name":"shell","arguments":""}}]},"finish_reason":null,"native_finish_reason":null,"logprobs":null}]}`,
			`{"id":"gen-1","provider":"Anthropic","model":"anthropic/claude-sonnet-4.5","object":"chat.completion.chunk","created":1767225600,"choices":[{"index":0,"delta":{"role":"assistant","content":"","tool_calls":[{"index":0,"function":{"arguments":"{\"command\": \"pwd\"}"}}]},"finish_reason":null,"native_finish_reason":null,"logprobs":null}]}`,
			`{"id":"gen-1","provider":"Anthropic","model":"anthropic/claude-sonnet-4.5","object":"chat.completion.chunk","created":1767225600,"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":"tool_calls","native_finish_reason":"tool_use","logprobs":null}]}`,
			`{"id":"gen-1","provider":"Anthropic","model":"anthropic/claude-sonnet-4.5","object":"chat.completion.chunk","created":1767225600,"choices":[],"usage":{"prompt_tokens":40,"completion_tokens":20,"total_tokens":60,"cost":0.00042,"is_byok":false,"prompt_tokens_details":{"cached_tokens":0,"cache_write_tokens":32,"audio_tokens":0},"cost_details":{"upstream_inference_cost":null},"completion_tokens_details":{"reasoning_tokens":0,"image_tokens":0}}}`,
		}},
		AnswerText: "You are in /work.",
		Answer: Reply{Events: []string{
			`{"id":"gen-2","provider":"Anthropic","model":"anthropic/claude-sonnet-4.5","object":"chat.completion.chunk","created":1767225601,"choices":[{"index":0,"delta":{"role":"assistant","content":"You are in /work."},"finish_reason":null,"native_finish_reason":null,"logprobs":null}]}`,
			`{"id":"gen-2","provider":"Anthropic","model":"anthropic/claude-sonnet-4.5","object":"chat.completion.chunk","created":1767225601,"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":"stop","native_finish_reason":"end_turn","logprobs":null}]}`,
			`{"id":"gen-2","provider":"Anthropic","model":"anthropic/claude-sonnet-4.5","object":"chat.completion.chunk","created":1767225601,"choices":[],"usage":{"prompt_tokens":52,"completion_tokens":7,"total_tokens":59,"cost":0.00011,"is_byok":false,"prompt_tokens_details":{"cached_tokens":32,"cache_write_tokens":12,"audio_tokens":0},"cost_details":{"upstream_inference_cost":null},"completion_tokens_details":{"reasoning_tokens":0,"image_tokens":0}}}`,
		}},
		AnswerUsage: Usage{PromptTokens: usage.PromptTokens, CompletionTokens: usage.CompletionTokens, CachedTokens: 32, CacheWriteTokens: 12},
	}
}

// anthropicGatewayRecording is Claude through an Anthropic-compatible gateway that speaks
// OpenAI's chat completions (LiteLLM's shape): the call whole in one chunk, usage on a last
// chunk with empty choices carrying Anthropic's own cache counters (cache_read_input_tokens,
// cache_creation_input_tokens) beside prompt_tokens, which counts them too.
func anthropicGatewayRecording(usage Usage) Recording {
	return Recording{
		Provider: "anthropic-gateway",
		CallID:   "toolu_01Bx7",
		ToolRound: Reply{Events: []string{
			`{"id":"chatcmpl-an1","created":1767225600,"model":"claude-sonnet-4-5","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"toolu_01Bx7","type":"function","function":{"name":"shell","arguments":"{\"command\": \"pwd\"}"}}]},"finish_reason":null}]}`,
			`{"id":"chatcmpl-an1","created":1767225600,"model":"claude-sonnet-4-5","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
			`{"id":"chatcmpl-an1","created":1767225600,"model":"claude-sonnet-4-5","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":40,"completion_tokens":20,"total_tokens":60,"cache_creation_input_tokens":36,"cache_read_input_tokens":0}}`,
		}},
		AnswerText: "You are in /work.",
		Answer: Reply{Events: []string{
			`{"id":"chatcmpl-an2","created":1767225601,"model":"claude-sonnet-4-5","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":"You are in "},"finish_reason":null}]}`,
			`{"id":"chatcmpl-an2","created":1767225601,"model":"claude-sonnet-4-5","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"/work."},"finish_reason":null}]}`,
			`{"id":"chatcmpl-an2","created":1767225601,"model":"claude-sonnet-4-5","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
			`{"id":"chatcmpl-an2","created":1767225601,"model":"claude-sonnet-4-5","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":52,"completion_tokens":7,"total_tokens":59,"prompt_tokens_details":{"cached_tokens":36},"cache_creation_input_tokens":10,"cache_read_input_tokens":36}}`,
		}},
		AnswerUsage: Usage{PromptTokens: usage.PromptTokens, CompletionTokens: usage.CompletionTokens, CachedTokens: 36, CacheWriteTokens: 10},
	}
}

// quirksRecording holds quirks of smaller gateways and local servers in one stream: an empty
// first chunk, the role on every chunk, "tool_calls": [] on text chunks, the tool's name split
// over two chunks before its arguments, usage in a chunk with empty choices.
func quirksRecording(usage Usage) Recording {
	return Recording{
		Provider: "quirks",
		CallID:   "call_q1",
		ToolRound: Reply{Events: []string{
			`{"id":"q-1","object":"chat.completion.chunk","created":1767225600,"model":"local","choices":[{"index":0,"delta":{},"finish_reason":null}]}`,
			`{"id":"q-1","object":"chat.completion.chunk","created":1767225600,"model":"local","choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_q1","type":"function","function":{"name":"sh"}}]},"finish_reason":null}]}`,
			`{"id":"q-1","object":"chat.completion.chunk","created":1767225600,"model":"local","choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"function":{"name":"ell"}}]},"finish_reason":null}]}`,
			`{"id":"q-1","object":"chat.completion.chunk","created":1767225600,"model":"local","choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"function":{"arguments":"{\"command\":\"pwd\"}"}}]},"finish_reason":null}]}`,
			`{"id":"q-1","object":"chat.completion.chunk","created":1767225600,"model":"local","choices":[{"index":0,"delta":{"role":"assistant"},"finish_reason":"tool_calls"}]}`,
			`{"id":"q-1","object":"chat.completion.chunk","created":1767225600,"model":"local","choices":[],"usage":{"prompt_tokens":40,"completion_tokens":20,"total_tokens":60}}`,
		}},
		AnswerText: "You are in /work.",
		Answer: Reply{Events: []string{
			`{"id":"q-2","object":"chat.completion.chunk","created":1767225601,"model":"local","choices":[]}`,
			`{"id":"q-2","object":"chat.completion.chunk","created":1767225601,"model":"local","choices":[{"index":0,"delta":{"role":"assistant","content":"You are in ","tool_calls":[]},"finish_reason":null}]}`,
			`{"id":"q-2","object":"chat.completion.chunk","created":1767225601,"model":"local","choices":[{"index":0,"delta":{"role":"assistant","content":"/work.","tool_calls":[]},"finish_reason":null}]}`,
			`{"id":"q-2","object":"chat.completion.chunk","created":1767225601,"model":"local","choices":[{"index":0,"delta":{"role":"assistant","content":"","tool_calls":[]},"finish_reason":"stop"}]}`,
			`{"id":"q-2","object":"chat.completion.chunk","created":1767225601,"model":"local","choices":[],"usage":{"prompt_tokens":52,"completion_tokens":7,"total_tokens":59}}`,
		}},
		AnswerUsage: usage,
	}
}
