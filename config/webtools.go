package config

import (
	"math"
	"regexp"
	"time"
)

// SearchProvider is tools.web_search.provider: the search API web_search asks.
type SearchProvider string

// The web search providers.
const (
	SearchSearXNG SearchProvider = "searxng" // a SearXNG instance's JSON API (self-hosted, no key)
	SearchBrave   SearchProvider = "brave"   // the Brave Search API (key)
	SearchTavily  SearchProvider = "tavily"  // Tavily's search API (key)
)

// SearchProviders lists tools.web_search.provider's values.
var SearchProviders = []SearchProvider{SearchSearXNG, SearchBrave, SearchTavily}

// UnmarshalText implements encoding.TextUnmarshaler; "" (the tool off) is taken too.
func (s *SearchProvider) UnmarshalText(b []byte) error {
	if len(b) == 0 {
		*s = ""
		return nil
	}
	return parseEnum(s, b, SearchProviders)
}

// WebSearch is [tools.web_search]: the web_search tool, off while Provider is empty.
type WebSearch struct {
	Provider SearchProvider `toml:"provider"`
	// BaseURL is the API's base: a SearXNG instance's root (required for searxng), or another
	// base for Brave's or Tavily's API (empty: their public one). Reached even on a private
	// address, as the admin configured it (decision 055).
	BaseURL string `toml:"base_url"`
	// APIKey is Brave's or Tavily's key (required for them).
	APIKey string `toml:"api_key"`
	// Results is how many results a search returns, 1 to 20.
	Results int `toml:"results"`
	// CacheTTL is how long a query's results are answered again without asking the provider;
	// 0 caches nothing.
	CacheTTL time.Duration `toml:"cache_ttl_sec"`
	// Timeout caps one search.
	Timeout time.Duration `toml:"timeout_sec"`
}

// Images is [tools.images]: the generate_image tool, off while BaseURL is empty.
type Images struct {
	// BaseURL is an OpenAI-compatible API's base up to /v1; POST {base_url}/images/generations.
	BaseURL string `toml:"base_url"`
	APIKey  string `toml:"api_key"`
	// Model, Size and Quality are sent as they are (empty ones left out): "gpt-image-1",
	// "1024x1024", "medium".
	Model   string `toml:"model"`
	Size    string `toml:"size"`
	Quality string `toml:"quality"`
	// PricePerImage is what one image costs, in the currency of the [[models]] prices: /usage,
	// the usage ledger and the cost quotas count it.
	PricePerImage float64 `toml:"price_per_image"`
	// Timeout caps one generation, its download included.
	Timeout time.Duration `toml:"timeout_sec"`
}

func defaultWebSearch() WebSearch {
	return WebSearch{Results: 5, CacheTTL: 10 * time.Minute, Timeout: 15 * time.Second}
}

func defaultImages() Images { return Images{Timeout: 2 * time.Minute} }

// imageSize is an image size as OpenAI's API takes it: "WIDTHxHEIGHT" or "auto".
var imageSize = regexp.MustCompile(`^(auto|[1-9][0-9]{1,4}x[1-9][0-9]{1,4})$`)

// validateWebTools checks [tools.web_search] and [tools.images].
func (c *Config) validateWebTools(p *problems) {
	s := c.Tools.WebSearch
	switch {
	case s.Provider == "" && (s.BaseURL != "" || s.APIKey != ""):
		p.bad("tools.web_search.provider", "must be set when base_url or api_key is (searxng, brave or tavily)")
	case s.Provider != "":
		if s.Provider == SearchSearXNG {
			p.required("tools.web_search.base_url", s.BaseURL)
		} else {
			p.required("tools.web_search.api_key", s.APIKey)
		}
		if s.BaseURL != "" {
			p.httpURL("tools.web_search.base_url", s.BaseURL)
		}
		p.between("tools.web_search.results", s.Results, 1, 20)
		p.durationBetween("tools.web_search.cache_ttl_sec", s.CacheTTL, 0, 86400)
		p.durationBetween("tools.web_search.timeout_sec", s.Timeout, 1, 600)
	}
	m := c.Tools.Images
	if m.BaseURL == "" {
		if m.APIKey != "" || m.Model != "" {
			p.bad("tools.images.base_url", "must be set when api_key or model is")
		}
		return
	}
	p.httpURL("tools.images.base_url", m.BaseURL)
	p.required("tools.images.model", m.Model)
	if m.Size != "" && !imageSize.MatchString(m.Size) {
		p.bad("tools.images.size", `must be "auto" or WIDTHxHEIGHT like "1024x1024", got %q`, m.Size)
	}
	if m.PricePerImage < 0 || math.IsNaN(m.PricePerImage) || math.IsInf(m.PricePerImage, 0) {
		p.bad("tools.images.price_per_image", "must be 0 or more, got %v", m.PricePerImage)
	}
	p.durationBetween("tools.images.timeout_sec", m.Timeout, 1, 3600)
}
