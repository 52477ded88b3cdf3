package admin

import (
	"context"
	"net/http"
	"relaybot/coord"
	"time"
)

// instances lists the live replicas; a single process (Options.Instances nil) lists none.
func (s *Server) instances(ctx context.Context) ([]coord.Instance, error) {
	items := []coord.Instance{}
	if s.opts.Instances == nil {
		return items, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	got, err := s.opts.Instances(ctx)
	if err != nil {
		return nil, err
	}
	for _, in := range got {
		if in.Leases == nil {
			in.Leases = []string{}
		}
		items = append(items, in)
	}
	return items, nil
}

// apiInstances lists the live replicas (GET /api/v1/instances); a single process lists none.
func (s *Server) apiInstances(w http.ResponseWriter, r *http.Request) {
	items, err := s.instances(r.Context())
	if err != nil {
		s.log.Error("admin: list instances", "err", err)
		writeJSONError(w, http.StatusInternalServerError, "the replicas could not be listed; see the bot's log")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items})
}

type replicasData struct {
	pageData
	// Alone: the bot runs as a single process (no replicas share its database).
	Alone    bool
	Replicas []coord.Instance
	// Digest is the config digest this replica runs with; empty without Options.Settings.
	Digest string
}

// replicasPage lists the live replicas (GET /admin/replicas): a single process says it runs
// alone.
func (s *Server) replicasPage(w http.ResponseWriter, r *http.Request) {
	data := replicasData{pageData: s.page(r, "Replicas"), Alone: s.opts.Instances == nil}
	data.Nav = "replicas"
	items, err := s.instances(r.Context())
	if err != nil {
		s.log.Error("admin: list instances", "err", err)
		s.errorPage(w, r, http.StatusInternalServerError, "The replicas could not be listed; see the bot's log.")
		return
	}
	data.Replicas = items
	if s.opts.Settings != nil {
		data.Digest = s.opts.Settings.Running().Digest()
	}
	s.render(w, r, http.StatusOK, "replicas", data)
}
