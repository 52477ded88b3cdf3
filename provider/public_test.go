package provider

import "testing"

func TestPublicEndpointsAreThePublicProvidersAndNotLocalServers(t *testing.T) {
	for _, tc := range []struct {
		baseURL string
		public  bool
	}{
		{"https://api.openai.com/v1", true},
		{"https://openrouter.ai/api/v1", true},
		{"https://API.DeepSeek.com", true},
		{"https://api.groq.com/openai/v1", true},
		{"https://myres.openai.azure.com/openai", true},
		{"http://127.0.0.1:11434/v1", false},
		{"http://localhost:8000/v1", false},
		{"http://10.0.0.5/v1", false},
		{"https://llm.internal.example/v1", false},
		{"https://api.openai.com.evil.example/v1", false},
		{"::not a url", false},
	} {
		if got := (Endpoint{BaseURL: tc.baseURL}).Public(); got != tc.public {
			t.Errorf("Public(%q) = %v, want %v", tc.baseURL, got, tc.public)
		}
	}
}

func TestHostShowsNoCredentialsOrPath(t *testing.T) {
	if got := (Endpoint{BaseURL: "https://user:pw@api.example.com/v1?key=s3cret"}).Host(); got != "https://api.example.com" {
		t.Errorf("Host = %q", got)
	}
}
