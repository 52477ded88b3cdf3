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
	// Self marks the replica that answered the request.
	Self bool `json:"self"`
}

// apiInstances lists the live replicas (GET /api/v1/instances); a single process lists none.
func (s *Server) apiInstances(w http.ResponseWriter, r *http.Request) {
	items := []Instance{}
	if s.opts.Instances != nil {
		ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
		defer cancel()
		got, err := s.opts.Instances(ctx)
		if err != nil {
			s.log.Error("admin: list instances", "err", err)
			writeJSONError(w, http.StatusInternalServerError, "the replicas could not be listed; see the bot's log")
			return
		}
		items = append(items, got...)
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items})
}
