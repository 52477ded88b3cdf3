package provider

import (
	"net/url"
	"strings"
)

// publicHosts are the hosts of public providers' OpenAI-compatible APIs: each refuses a request
// without an API key. A domain covers its subdomains.
var publicHosts = []string{
	"api.openai.com", "openrouter.ai", "api.deepseek.com", "api.groq.com", "api.anthropic.com",
	"generativelanguage.googleapis.com", "api.mistral.ai", "api.together.xyz", "api.x.ai",
	"api.fireworks.ai", "api.perplexity.ai", "openai.azure.com", "api.cohere.ai", "api.cerebras.ai",
	"dashscope.aliyuncs.com", "api.moonshot.ai",
}

// Public reports whether the endpoint is a public provider's, which refuses requests without an
// API key (a server on loopback or a private network may need none).
func (e Endpoint) Public() bool {
	u, err := url.Parse(e.BaseURL)
	if err != nil {
		return false
	}
	host := strings.ToLower(u.Hostname())
	for _, h := range publicHosts {
		if host == h || strings.HasSuffix(host, "."+h) {
			return true
		}
	}
	return false
}

// Host is the scheme and host of the endpoint's base URL ("https://api.openai.com"), which
// logs may show: never its path's query or credentials.
func (e Endpoint) Host() string {
	u, err := url.Parse(e.BaseURL)
	if err != nil || u.Host == "" {
		return "(unparsable base_url)"
	}
	return u.Scheme + "://" + u.Host
}
