package admin

import (
	"context"
	"net/http"
	"strings"
	"time"

	"relaybot/chat"
	"relaybot/config"
)

// prices are the models' prices the pages and the API bill with: the running configuration's
// when Options.Settings is set, else Options.Prices.
func (s *Server) prices() map[string]chat.Price {
	if s.opts.Settings != nil {
		return s.opts.Settings.Prices()
	}
	return s.opts.Prices
}

// Settings is the configuration the bot runs with, and its reload (cmd/bot): the Settings page
// and /api/v1/settings show the first, the Reload button does the second, as SIGHUP does.
type Settings interface {
	// Running returns the configuration the bot runs with now.
	Running() *config.Config
	// Prices are the running configuration's prices by configured model name (a model a reload
	// added is priced at once).
	Prices() map[string]chat.Price
	// Reload reads the config file again: a file config refuses is refused (the error names the
	// key and why) and nothing changes; otherwise the live keys are taken by the next turns and
	// those that need a restart are named.
	Reload(ctx context.Context) (config.Changes, error)
}

// reloadTimeout bounds a reload asked from the page or the API (new MCP servers connecting).
const reloadTimeout = 2 * time.Minute

// Reloaded is the outcome of a reload as the page and the API show it.
type Reloaded struct {
	At time.Time `json:"at"`
	// Outcome is "applied" (the next turns run with Applied), "unchanged" (nothing to change
	// live) or "refused" (Error says which key and why; the running config stays).
	Outcome string   `json:"outcome"`
	Applied []string `json:"applied"`
	// Restart are the changed keys that need a restart; their running values stay.
	Restart []string `json:"restart"`
	Error   string   `json:"error,omitempty"`
	// Digest names the configuration the bot runs with after the reload.
	Digest string `json:"digest"`
}

// reload runs one reload and keeps its outcome for the page.
func (s *Server) reload(ctx context.Context) Reloaded {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reloadTimeout)
	defer cancel()
	ch, err := s.opts.Settings.Reload(ctx)
	out := Reloaded{At: s.now().UTC(), Outcome: "applied", Applied: nonNil(ch.Applied), Restart: nonNil(ch.Restart),
		Digest: s.opts.Settings.Running().Digest()}
	switch {
	case err != nil:
		out.Outcome, out.Error = "refused", err.Error()
	case len(ch.Applied) == 0:
		out.Outcome = "unchanged"
	}
	s.mu.Lock()
	s.reloaded = &out
	s.mu.Unlock()
	return out
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// settingsJSON is GET /api/v1/settings.
type settingsJSON struct {
	File     string           `json:"file"`
	Digest   string           `json:"digest"`
	Settings []config.Setting `json:"settings"`
}

// apiSettings shows the configuration the bot runs with, secrets masked, each key with its
// source and whether a reload changes it (GET /api/v1/settings).
func (s *Server) apiSettings(w http.ResponseWriter, r *http.Request) {
	if s.opts.Settings == nil {
		writeJSONError(w, http.StatusNotFound, "this server shows no settings")
		return
	}
	cfg := s.opts.Settings.Running()
	writeJSON(w, http.StatusOK, settingsJSON{File: cfg.File, Digest: cfg.Digest(), Settings: cfg.Settings()})
}

// apiReload reloads the config file as SIGHUP does (POST /api/v1/settings/reload): 200 with the
// keys applied and those that need a restart, 422 when the file is refused.
func (s *Server) apiReload(w http.ResponseWriter, r *http.Request) {
	if s.opts.Settings == nil {
		writeJSONError(w, http.StatusNotFound, "this server cannot reload its settings")
		return
	}
	out := s.reload(r.Context())
	status := http.StatusOK
	if out.Outcome == "refused" {
		status = http.StatusUnprocessableEntity
	}
	writeJSON(w, status, out)
}

// settingRow is one key on the Settings page, with the section heading before it when it opens
// one.
type settingRow struct {
	config.Setting
	Section string
}

type settingsData struct {
	pageData
	Off      bool
	File     string
	Digest   string
	Rows     []settingRow
	Reloaded *Reloaded
}

// settingsPage shows the configuration the bot runs with and the Reload button
// (GET /admin/settings), with the outcome of this process's last reload.
func (s *Server) settingsPage(w http.ResponseWriter, r *http.Request) {
	data := settingsData{pageData: s.page(r, "Settings"), Off: s.opts.Settings == nil}
	data.Nav = "settings"
	if !data.Off {
		cfg := s.opts.Settings.Running()
		data.File, data.Digest = cfg.File, cfg.Digest()
		section := ""
		for _, st := range cfg.Settings() {
			row := settingRow{Setting: st}
			if sec, _, _ := strings.Cut(strings.Split(st.Key, "[")[0], "."); sec != section {
				section, row.Section = sec, sec
			}
			data.Rows = append(data.Rows, row)
		}
		s.mu.Lock()
		data.Reloaded = s.reloaded
		s.mu.Unlock()
	}
	s.render(w, r, http.StatusOK, "settings", data)
}

// settingsReloadPage is the page's Reload button (POST /admin/settings/reload), whose form
// carries the session's CSRF token: it reloads and goes back to the page, which shows the outcome.
func (s *Server) settingsReloadPage(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad reload form: "+err.Error(), http.StatusBadRequest)
		return
	}
	if ss := sessionOf(r); s.opts.Token != "" && (ss.csrf == "" || !equalSecret(r.PostForm.Get("csrf"), ss.csrf)) {
		http.Error(w, "missing or wrong CSRF token: reload the page and try again", http.StatusForbidden)
		return
	}
	if s.opts.Settings == nil {
		s.errorPage(w, r, http.StatusNotFound, "This server cannot reload its settings.")
		return
	}
	s.reload(r.Context())
	http.Redirect(w, r, "/admin/settings", http.StatusSeeOther)
}
