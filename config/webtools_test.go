package config

import (
	"strings"
	"testing"
	"time"
)

func TestWebToolsConfigErrorsNameTheirKey(t *testing.T) {
	tests := []struct{ name, toml, want string }{
		{"unknown provider", "[tools.web_search]\nprovider = \"bing\"\n", `tools.web_search.provider: must be one of "searxng", "brave", "tavily", got "bing"`},
		{"searxng without base_url", "[tools.web_search]\nprovider = \"searxng\"\n", "tools.web_search.base_url: must be set"},
		{"brave without key", "[tools.web_search]\nprovider = \"brave\"\n", "tools.web_search.api_key: must be set"},
		{"key from an unset variable", "[tools.web_search]\nprovider = \"tavily\"\napi_key = \"${TAVILY_KEY}\"\n", "tools.web_search.api_key: empty: environment variable TAVILY_KEY is not set"},
		{"a key without a provider", "[tools.web_search]\napi_key = \"k\"\n", "tools.web_search.provider: must be set when base_url or api_key is"},
		{"too many results", "[tools.web_search]\nprovider = \"brave\"\napi_key = \"k\"\nresults = 21\n", "tools.web_search.results: must be between 1 and 20, got 21"},
		{"not a URL", "[tools.web_search]\nprovider = \"searxng\"\nbase_url = \"searxng:8080\"\n", `tools.web_search.base_url: must be an http(s) URL`},
		{"images without model", "[tools.images]\nbase_url = \"https://api.openai.com/v1\"\n", "tools.images.model: must be set"},
		{"images key without base_url", "[tools.images]\napi_key = \"k\"\n", "tools.images.base_url: must be set when api_key or model is"},
		{"bad size", "[tools.images]\nbase_url = \"https://api.openai.com/v1\"\nmodel = \"m\"\nsize = \"big\"\n", `tools.images.size: must be "auto" or WIDTHxHEIGHT like "1024x1024", got "big"`},
		{"negative price", "[tools.images]\nbase_url = \"https://api.openai.com/v1\"\nmodel = \"m\"\nprice_per_image = -1.0\n", "tools.images.price_per_image: must be 0 or more"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Parse([]byte(minimal+tc.toml), env(nil)); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %v, want one saying %q", err, tc.want)
			}
		})
	}
}

func TestWebToolsConfigTakesAWorkingSetup(t *testing.T) {
	cfg, err := Parse([]byte(minimal+`[tools.web_search]
provider = "searxng"
base_url = "http://searxng:8080"
cache_ttl_sec = 60

[tools.images]
base_url = "https://api.openai.com/v1"
api_key = "${OPENAI_API_KEY}"
model = "gpt-image-1"
size = "1024x1024"
price_per_image = 0.04
`), env(map[string]string{"OPENAI_API_KEY": "sk-x"}))
	if err != nil {
		t.Fatal(err)
	}
	s, m := cfg.Tools.WebSearch, cfg.Tools.Images
	if s.Provider != SearchSearXNG || s.CacheTTL != time.Minute || s.Results != 5 || s.Timeout != 15*time.Second {
		t.Errorf("web_search = %+v", s)
	}
	if m.APIKey != "sk-x" || m.PricePerImage != 0.04 || m.Timeout != 2*time.Minute {
		t.Errorf("images = %+v", m)
	}
}
