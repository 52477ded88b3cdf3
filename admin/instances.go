package admin

import (
	"context"
	"net/http"
	"time"
)

// Instance is one replica of the deployment as /api/v1/instances lists it.
type Instance struct {
	ID          string    `json:"id"`
	Host        string    `json:"host"`
	PID         int       `json:"pid"`
	StartedAt   time.Time `json:"started_at"`
	HeartbeatAt time.Time `json:"heartbeat_at"`
	ExpiresAt   time.Time `json:"lease_expires_at"`
	// TurnsRunning counts the turns the replica is running.
	TurnsRunning int `json:"turns_running"`
	// Leases are the named leases the replica holds (the Telegram poller, Discord shards),
	// by name; empty when it holds none.
	Leases []string `json:"leases"`
	// Self marks the replica that answered the request.
	Self bool `json:"self"`
}

// instances lists the live replicas; a single process (Options.Instances nil) lists none.
func (s *Server) instances(ctx context.Context) ([]Instance, error) {
	items := []Instance{}
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
	Replicas []Instance
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
	s.render(w, r, http.StatusOK, "replicas", data)
}
