package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"syscall"

	"relaybot/config"
	"relaybot/provider"
)

// announceModels logs what the bot will talk to: one line a model (its name, endpoint host and
// model id, never its key), and a warning for a public provider's endpoint without a key, whose
// every request would be refused.
func announceModels(log *slog.Logger, cfg *config.Config) {
	for i, m := range cfg.Models {
		role := "fallback"
		if i == 0 {
			role = "primary"
		}
		log.Info("model", "name", m.Name, "role", role, "endpoint", m.Host(), "model", m.Model)
		warnKeyless(log, fmt.Sprintf("models[%d]", i), m.Endpoint)
	}
	for i, m := range cfg.Speech.Candidates() {
		key := "speech"
		if i > 0 {
			key = fmt.Sprintf("speech.fallbacks[%d]", i-1)
		}
		log.Info("speech model", "name", m.Name, "endpoint", m.Host(), "model", m.Model)
		warnKeyless(log, key, m.Endpoint)
	}
}

// warnKeyless warns when e, configured at key, has no API key and is a public provider's.
func warnKeyless(log *slog.Logger, key string, e provider.Endpoint) {
	if e.APIKey != "" || !e.Public() {
		return
	}
	log.Warn(fmt.Sprintf("%s.api_key is empty and %s refuses requests without a key: every answer will fail until it is set "+
		"(the shipped config.toml reads OPENAI_API_KEY)", key, e.Host()), "model", e.Label())
}

// listen takes addr, the value of the config key named key ("[admin] listen"), before the bot
// says it is running, so that an address already taken stops the start with the key to change.
func listen(key, addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err == nil {
		return ln, nil
	}
	hint := "check the address"
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		hint = "another process (another bot?) is listening there: stop it, or set another port in " + key
	case errors.Is(err, syscall.EACCES):
		hint = "this user may not listen there (ports below 1024 need privileges): set another port in " + key
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		hint = "no network interface of this machine has that address: set another one in " + key
	}
	return nil, fmt.Errorf("%s = %q: cannot listen: %w; %s", key, addr, err, hint)
}

// adminURL is the address a browser opens the admin listener at: admin.public_url when set,
// else the address it listens on (localhost for all interfaces).
func adminURL(publicURL string, addr net.Addr) string {
	if publicURL != "" {
		return strings.TrimSuffix(publicURL, "/")
	}
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return "http://" + addr.String()
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// announceAdmin logs where to open the admin pages (and the web chat) and whether they ask for
// a login.
func announceAdmin(log *slog.Logger, cfg *config.Config, addr net.Addr) {
	base := adminURL(cfg.Admin.PublicURL, addr)
	login := "none: the listener is on loopback only and [admin] token is not set"
	if cfg.Admin.Token != "" {
		login = "the [admin] token"
	}
	log.Info("admin pages", "open", base+"/admin/", "login", login)
	if cfg.Admin.WebChat {
		log.Info("web chat", "open", base+"/chat", "login", login)
	}
}
