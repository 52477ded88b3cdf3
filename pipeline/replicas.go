package pipeline

import (
	"context"
	"log/slog"
	"relaybot/chat"

	"relaybot/adapters"
)

// StopPublisher carries a /stop (or the Stop button) to the other replicas of a deployment, one
// of which may be running the conversation's turn; each replica hands what it receives to
// Pipeline.StopFromReplica. PublishStop returns once the request is sent, not when it is acted on.
type StopPublisher interface {
	PublishStop(ctx context.Context, key, userID string, admin bool) error
}

// StopFromReplica stops the turn of conversation key when this replica runs it and the asker
// (userID, or an admin) may stop it, as a /stop sent here would; it reports whether it did.
func (p *Pipeline) StopFromReplica(key, userID string, admin bool) bool {
	_, stopped := p.turns.stop(key, ErrStopped, func(started adapters.Inbound) bool {
		return admin || started.UserID == userID
	})
	return stopped
}

// stopElsewhere hands a /stop for a turn this replica does not run to the other replicas, and
// reports whether it did (false for a single process). The replica running the turn ends it,
// and its reply shows it stopped; when none runs one, nothing is said.
func (p *Pipeline) stopElsewhere(key chat.Key, in adapters.Inbound, admin bool, log *slog.Logger) bool {
	if p.opts.Stops == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), saveTimeout)
	defer cancel()
	if err := p.opts.Stops.PublishStop(ctx, key.String(), in.UserID, admin); err != nil {
		log.Warn("pipeline: /stop not passed to the other replicas", "err", err)
		return false
	}
	return true
}
