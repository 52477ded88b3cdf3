package admin

import (
	"context"

	"relaybot/pipeline/knowledge"
	"relaybot/pipeline/memory"
)

// Recall is the memory and the knowledge bases a request works with (Options.Recall).
type Recall struct {
	// Memory is nil when memory is off; Knowledge nil when no base is configured.
	Memory    *memory.Memory
	Knowledge *knowledge.Knowledge
	// KnowledgeUploadBytes caps an upload's body (zero: MaxBodyBytes).
	KnowledgeUploadBytes int64
}

// recallKey is the request context's key of the Recall the request took.
type recallKey struct{}

// recall is the memory and the knowledge bases of the request whose context is ctx: the ones it
// took when it came in, so that a reload during it does not change them under it.
func (s *Server) recall(ctx context.Context) Recall {
	if rc, ok := ctx.Value(recallKey{}).(Recall); ok {
		return rc
	}
	if s.opts.Recall != nil {
		return s.opts.Recall()
	}
	return Recall{Memory: s.opts.Memory, Knowledge: s.opts.Knowledge, KnowledgeUploadBytes: s.opts.KnowledgeUploadBytes}
}
